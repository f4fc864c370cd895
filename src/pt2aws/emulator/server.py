"""A local emulator of the AWS control plane: a moto server on 127.0.0.1 in this process.

While it runs, ``AWS_ENDPOINT_URL`` and fake credentials point every boto3 / SageMaker SDK
client at it, so the product's real AWS code path runs unchanged over HTTP; nothing is created
in any AWS account. :func:`start` returns the same :class:`pt2aws.aws.session.AwsSession` that
:func:`pt2aws.aws.session.connect` returns for an account. moto keeps its state in the process:
an emulator started later (a later cell) still sees the buckets, jobs and endpoints.
"""

from __future__ import annotations

import datetime
import io
import logging
import os
import tarfile
import warnings
from pathlib import Path

from pt2aws.aws import session as aws_session
from pt2aws.emulator import patches
from pt2aws.emulator.endpoints import EndpointServers
from pt2aws.system import free_port

EMULATOR_ACCOUNT = "123456789012"  # moto's default account id
EMULATOR_REGION = "us-east-1"
EMULATOR_ROLE_ARN = f"arn:aws:iam::{EMULATOR_ACCOUNT}:role/pt2aws-emulator-sagemaker-role"
#: AMI ID the emulator answers for the public DLAMI parameters (moto knows only Amazon Linux's).
PLACEHOLDER_AMI = "ami-0e0e0e0e0e0e0e0e0"
#: Environment the emulator sets or clears while it runs (restored by :meth:`Emulator.stop`).
ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "SAGEMAKER_VALIDATE_ROLE": "false",  # the SDK's role check; moto answers it (patches)
    "AWS_SESSION_TOKEN": None,
    "AWS_PROFILE": None,
}


class Emulator:
    """A moto server emulating S3, SageMaker, STS, IAM, SSM, EC2, Service Quotas and Application
    Auto Scaling, with the patches moto needs (:mod:`pt2aws.emulator.patches`).

    Args:
        region: the emulated region.
        port: TCP port; default a free one.
        model_servers: an emulated endpoint is answered by the project's server on this machine
            (:mod:`pt2aws.emulator.endpoints`); False: moto's canned answers.
        workdir: folder for the endpoints' servers (default a temporary one).
        training_seconds: training jobs stay ``InProgress`` this long (0: ``Completed`` at once).
        training_output: a local run folder (``train/``) a completed job brings back as its
            ``model.tar.gz`` (an emulated job trains nothing).
    """

    def __init__(self, region=EMULATOR_REGION, port=None, *, model_servers=True, workdir=None,
                 training_seconds=0.0, training_output=None):  # fmt: skip
        self.region, self.port = region, port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.endpoints = EndpointServers(workdir) if model_servers else None
        self.training_seconds = training_seconds
        self.training_output = Path(training_output) if training_output else None
        self.quotas = emulated_quotas()
        self._server, self._saved_env, self._saved_patches, self._sts = None, {}, {}, None

    def start(self) -> Emulator:
        """Start the server, apply the patches and point AWS clients at it."""
        from moto.server import ThreadedMotoServer
        from sagemaker.core.helper import session_helper

        output = self.training_output
        patches.apply()
        self._saved_patches = patches.configure(
            endpoints=self.endpoints,
            training_seconds=self.training_seconds,
            training_output=output and (lambda: run_folder_tarball(output)),
            quotas=self.quotas,
        )
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a log line per request otherwise
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self._server.start()
        env = {**ENV, "AWS_ENDPOINT_URL": self.url, "AWS_DEFAULT_REGION": self.region}
        self._saved_env = {k: os.environ.get(k) for k in env}
        _set_environment(env)
        # the SDK builds its STS client with an explicit regional URL, bypassing AWS_ENDPOINT_URL
        self._sts = session_helper.sts_regional_endpoint
        session_helper.sts_regional_endpoint = lambda region: self.url
        self._seed_dlami_parameters()
        return self

    def stop(self) -> None:
        """Stop the server and the endpoints' servers; restore the environment (idempotent)."""
        from sagemaker.core.helper import session_helper

        patches.configure(**self._saved_patches)  # what an emulator started before had set
        self._saved_patches = {}
        if self.endpoints:
            self.endpoints.close()
        if self._sts:
            session_helper.sts_regional_endpoint, self._sts = self._sts, None
        _set_environment(self._saved_env)
        self._saved_env = {}
        if self._server is not None:
            self._server.stop()
            self._server = None

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def session(self, role_arn: str = EMULATOR_ROLE_ARN) -> aws_session.AwsSession:
        """An :class:`pt2aws.aws.session.AwsSession` on this emulator."""
        return aws_session.AwsSession(
            region=self.region, role_arn=role_arn, endpoint_url=self.url, emulator=self, poll_s=1
        )

    def answered_by(self, endpoint_name: str) -> str:
        """What answers (or answered) ``endpoint_name``'s invocations, in words."""
        if self.endpoints is None:
            return "moto's canned answer (no model server)"
        return self.endpoints.answered_by(endpoint_name)

    def launch_instance(self, instance_type: str) -> str:
        """An emulated EC2 instance (placeholder AMI) to send commands to; returns its id."""
        from pt2aws.lessons.ec2.plan import run_instances_request

        request = run_instances_request(instance_type, PLACEHOLDER_AMI, name="pt2aws-ec2")
        return self.session().client("ec2").run_instances(**request)["Instances"][0]["InstanceId"]

    def seed_public_parameter(self, name: str, value: str) -> None:
        """Make the emulated SSM answer ``value`` for the AWS-owned parameter ``name``
        (``/aws/service/...``: no account may write those, so the store is filled directly)."""
        from moto.ssm.models import Parameter, ssm_backends

        store = ssm_backends[EMULATOR_ACCOUNT][self.region]._parameters
        store[name].append(
            Parameter(
                account_id=EMULATOR_ACCOUNT,
                name=name,
                value=value,
                parameter_type="String",
                description="seeded by pt2aws.emulator",
                allowed_pattern=None,
                keyid=None,
                last_modified_date=datetime.datetime.now(datetime.timezone.utc),
                version=len(store[name]) + 1,
                data_type="aws:ec2:image" if value.startswith("ami-") else "text",
            )
        )

    def _seed_dlami_parameters(self) -> None:
        from moto.ssm.models import ssm_backends

        from pt2aws.aws.images import dlami_parameter
        from pt2aws.sizing import catalog

        store = ssm_backends[EMULATOR_ACCOUNT][self.region]._parameters
        with warnings.catch_warnings():  # support-date warnings belong to the launch plan
            warnings.simplefilter("ignore")
            names = {dlami_parameter(it.name) for it in catalog.load_catalog()}
        for name in sorted(n for n in names if not store.get(n)):
            self.seed_public_parameter(name, PLACEHOLDER_AMI)


def _set_environment(env: dict[str, str | None]) -> None:
    for key, value in env.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def emulated_quotas() -> dict[str, tuple[float, bool]]:
    """The emulator's SageMaker quotas ``{name: (value, applied)}`` (its own figures): 2 endpoint
    instances of every priced hosting type; training 2 CPU instances, GPU types 0 with only a
    default value, as new accounts often start (awslabs/amazon-sagemaker-examples#593)."""
    from pt2aws.aws.account import quota_name
    from pt2aws.sizing import catalog
    from pt2aws.sizing.serving_cost import DEFAULT_COMPARISON

    quotas = {quota_name(n): (2.0, True) for n in [*DEFAULT_COMPARISON, *catalog.hosting_prices()]}
    for name in catalog.training_prices():
        gpu = catalog.instance_family(name)[0] in "gp"
        quotas[quota_name(name, "training")] = (0.0, False) if gpu else (2.0, True)
    return quotas


def run_folder_tarball(train_dir: Path) -> bytes:
    """``train_dir`` as a job's ``model.tar.gz`` holds it (no ``checkpoints/``, no
    ``sagemaker_job*``).

    Raises:
        FileNotFoundError: no ``model/`` folder.
    """
    if not (train_dir / "model").is_dir():
        raise FileNotFoundError(f"{train_dir} has no model/ folder: train first (notebook 01)")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path in sorted(train_dir.iterdir()):
            if path.name != "checkpoints" and not path.name.startswith("sagemaker_job"):
                tar.add(path, arcname=path.name)
    return buffer.getvalue()


def start(region: str = "", *, model_servers: bool = True, workdir=None, training_seconds=0.0,
          training_output=None, role_arn: str = EMULATOR_ROLE_ARN) -> aws_session.AwsSession:  # fmt: skip
    """Start the emulator for this process and return its session (the notebooks' way in).

    One emulator runs per process: one started earlier is stopped first. It runs until
    ``session.close()`` or :func:`pt2aws.aws.session.connect`. Arguments: :class:`Emulator`'s.
    """
    if aws_session._RUNNING_EMULATOR["session"] is not None:
        aws_session._RUNNING_EMULATOR["session"].close()
    emulator = Emulator(
        region or EMULATOR_REGION,
        model_servers=model_servers,
        workdir=workdir,
        training_seconds=training_seconds,
        training_output=training_output,
    ).start()
    session = emulator.session(role_arn)
    aws_session._RUNNING_EMULATOR["session"] = session
    return session
