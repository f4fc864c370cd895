"""A local emulator of the AWS control plane (moto) for tests and workshops.

:class:`Emulator` runs a moto server on 127.0.0.1 in this process and points every boto3 /
SageMaker client at it through ``AWS_ENDPOINT_URL`` with fake credentials, so the product's real
AWS code path runs unchanged over HTTP. It is an emulator: nothing is created in any AWS
account. An emulated endpoint answers with the serving software of its image running on this
machine (:mod:`pt2aws.emulator.endpoints`), or whatever a test tells it to. The moto
patches it needs are in :mod:`pt2aws.emulator.patches`.

:func:`start` is what a notebook calls when it chooses the emulator: it returns the same
:class:`pt2aws.aws.session.AwsSession` that :func:`pt2aws.aws.session.connect` returns for an
account, carrying the emulator's URL, role and hooks.
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from pathlib import Path

from pt2aws.aws import session as aws_session
from pt2aws.aws.session import AwsSession
from pt2aws.emulator import patches as moto_patches
from pt2aws.emulator.endpoints import EndpointServers
from pt2aws.system import free_port

logger = logging.getLogger(__name__)

EMULATOR_ACCOUNT = "123456789012"  # moto's default account id
EMULATOR_REGION = "us-east-1"  # the emulator's default region (any region works)
EMULATOR_ROLE_ARN = f"arn:aws:iam::{EMULATOR_ACCOUNT}:role/pt2aws-emulator-sagemaker-role"
#: AMI ID the emulator answers for the public DLAMI parameters (moto knows only Amazon Linux's).
PLACEHOLDER_AMI = "ami-0e0e0e0e0e0e0e0e0"
#: Environment variables the emulator sets or clears while it runs (restored on exit).
ENV_KEYS = (
    "AWS_ENDPOINT_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_DEFAULT_REGION",
    "SAGEMAKER_VALIDATE_ROLE",
    "AWS_PROFILE",
)


class Emulator:
    """A moto server on 127.0.0.1 emulating S3, SageMaker, STS, IAM, SSM, EC2 and autoscaling.

    Use as a context manager (or :func:`start`); while it runs, ``AWS_ENDPOINT_URL`` and fake
    credentials are set in ``os.environ`` (restored on exit), so boto3 and the SageMaker SDK
    talk to it. The public DLAMI parameters pt2aws looks up are seeded with
    :data:`PLACEHOLDER_AMI` (AWS-owned parameters do not exist in an emulator).

    Args:
        region: the emulated region (default ``us-east-1``).
        port: TCP port; default a free one.
        invocations_url: every ``InvokeEndpoint`` goes to this URL (moto_patches patch 3), e.g.
            a test's stub server; ``None``: see ``endpoint_servers``.
        training_seconds: training jobs created while it runs stay ``InProgress`` this long
            (moto_patches patch 6); 0: ``Completed`` at once.
        endpoint_servers: what answers an endpoint
            (:data:`pt2aws.emulator.endpoints.MODES`): ``"auto"`` its image's serving
            software, started by ``CreateEndpoint``; ``"in_process"`` the archive's handler in
            this process; ``"canned"`` moto's canned answers (``InService`` at once).
        workdir: folder for the endpoints' model servers (default a temporary one).
        training_output: a local run folder (``train/``) that a completed emulated training job
            finds as its ``model.tar.gz`` (see :meth:`seed_training_output`).

    moto keeps its state in this process, not in the server: an emulator started later in the
    same process (a later notebook cell) still sees the buckets, jobs and endpoints.
    """

    def __init__(
        self,
        region: str = EMULATOR_REGION,
        port: int | None = None,
        invocations_url: str | None = None,
        training_seconds: float = 0.0,
        endpoint_servers: str = "canned",
        workdir: str | os.PathLike | None = None,
        training_output: str | os.PathLike | None = None,
    ):
        self.region = region
        self.invocations_url = invocations_url
        self.training_seconds = training_seconds
        self.endpoints = EndpointServers(endpoint_servers, workdir)
        self.training_output = Path(training_output) if training_output else None
        self.quotas = emulated_quotas()
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server = None
        self._saved_env: dict[str, str | None] = {}
        self._sts_patch = None

    def start(self) -> Emulator:
        """Start the server, apply the moto patches and point AWS clients at it."""
        from moto.server import ThreadedMotoServer

        moto_patches.apply()
        moto_patches.clear_faults()
        moto_patches.forward_invocations_to(self.invocations_url)
        moto_patches.serve_endpoints_with(self.endpoints)
        moto_patches.set_training_seconds(self.training_seconds)
        output = self.training_output
        moto_patches.set_training_output(output and (lambda: _run_folder_tarball(output)))
        moto_patches.set_sagemaker_quotas(self.quotas)
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request otherwise
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self._server.start()
        self._saved_env = {k: os.environ.get(k) for k in ENV_KEYS}
        os.environ.pop("AWS_PROFILE", None)
        os.environ.pop("AWS_SESSION_TOKEN", None)
        os.environ.update(
            AWS_ENDPOINT_URL=self.url,
            AWS_ACCESS_KEY_ID="testing",
            AWS_SECRET_ACCESS_KEY="testing",
            AWS_DEFAULT_REGION=self.region,
            SAGEMAKER_VALIDATE_ROLE="false",
        )
        try:  # moto_patches patch 2: the SDK's STS endpoint (only when the SDK is installed)
            from sagemaker.core.helper import session_helper

            self._sts_patch = (session_helper, session_helper.sts_regional_endpoint)
            session_helper.sts_regional_endpoint = lambda region: self.url
        except (ImportError, AttributeError):
            self._sts_patch = None
        self._seed_dlami_parameters()
        return self

    def stop(self) -> None:
        """Stop the server (and the endpoints' model servers) and restore the environment
        (idempotent)."""
        moto_patches.clear_faults()
        moto_patches.forward_invocations_to(None)
        moto_patches.serve_endpoints_with(None)
        moto_patches.set_training_seconds(0)
        moto_patches.set_training_output(None)
        self.endpoints.close()
        if self._sts_patch:
            module, original = self._sts_patch
            module.sts_regional_endpoint = original
            self._sts_patch = None
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved_env = {}
        if self._server is not None:
            self._server.stop()
            self._server = None

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def session(self, role_arn: str = EMULATOR_ROLE_ARN) -> AwsSession:
        """An :class:`pt2aws.aws.session.AwsSession` on this emulator (its role and hooks)."""
        return AwsSession(
            region=self.region,
            role_arn=role_arn,
            endpoint_url=self.url,
            emulator=self,
            poll_s=0.5,
        )

    def answered_by(self, endpoint_name: str) -> str:
        """What answers (or answered) ``endpoint_name``'s invocations, in words."""
        if self.invocations_url:
            return f"the server at {self.invocations_url} (every endpoint)"
        return self.endpoints.answered_by(endpoint_name)

    def launch_instance(self, instance_type: str) -> str:
        """An emulated EC2 instance (placeholder AMI) to send commands to; returns its id."""
        from pt2aws.lessons.ec2.plan import run_instances_request

        request = run_instances_request(instance_type, PLACEHOLDER_AMI, name="pt2aws-ec2")
        reply = self.session().client("ec2").run_instances(**request)
        return reply["Instances"][0]["InstanceId"]

    def seed_public_parameter(self, name: str, value: str) -> None:
        """Make the emulated SSM answer ``value`` for the AWS-owned public parameter ``name``.

        AWS publishes parameters under ``/aws/service/...`` (e.g. DLAMI IDs) that no account can
        write (``PutParameter`` answers AccessDenied, in moto too), so the emulator's store is
        filled directly. moto ships only the Amazon Linux ones.

        Raises:
            RuntimeError: the emulator is not running.
        """
        import datetime

        from moto.ssm.models import Parameter

        if self._server is None:
            raise RuntimeError(
                "start the emulator before seeding parameters (use `with Emulator()`)"
            )
        store = self._ssm_store()
        store[name].append(
            Parameter(
                account_id=EMULATOR_ACCOUNT,
                name=name,
                value=value,
                parameter_type="String",
                description="seeded by pt2aws.emulator.server.Emulator",
                allowed_pattern=None,
                keyid=None,
                last_modified_date=datetime.datetime.now(datetime.timezone.utc),
                version=len(store[name]) + 1,
                data_type="aws:ec2:image" if value.startswith("ami-") else "text",
            )
        )

    def _ssm_store(self):
        from moto.ssm.models import ssm_backends

        return ssm_backends[EMULATOR_ACCOUNT][self.region]._parameters

    def _seed_dlami_parameters(self) -> None:
        """The public SSM parameters of the DLAMIs pt2aws may look up, as :data:`PLACEHOLDER_AMI`."""
        from pt2aws.aws.training_images import dlami_parameter
        from pt2aws.sizing import catalog

        names = set()
        with warnings.catch_warnings():  # support-date warnings belong to the launch plan
            warnings.simplefilter("ignore")
            for it in catalog.load_catalog():
                with contextlib.suppress(KeyError, ValueError):
                    names.add(dlami_parameter(it.name))
        store = self._ssm_store()
        for name in sorted(names):
            if not store.get(name):
                self.seed_public_parameter(name, PLACEHOLDER_AMI)

    def seed_training_output(self, model_artifact_s3: str, train_dir: str | os.PathLike) -> int:
        """Put a real run folder where an emulated training job's ``model.tar.gz`` belongs.

        An emulated job runs nothing, so it writes nothing: this uploads ``train_dir`` (a local
        run of the same config: ``model/``, ``metrics.json``, ``train_log.jsonl`` ...; without
        ``checkpoints/``, which a job keeps out of its model archive) as a gzipped tar to
        ``model_artifact_s3``, so downloading and extracting the job's model is exercised.
        (``training_output`` does this for every job that completes.)

        Returns:
            The archive's size in bytes.

        Raises:
            FileNotFoundError: ``train_dir`` has no ``model/`` folder.
        """
        body = _run_folder_tarball(Path(train_dir))
        bucket, key = model_artifact_s3.removeprefix("s3://").split("/", 1)
        self.session().client("s3").put_object(Bucket=bucket, Key=key, Body=body)
        return len(body)


def emulated_quotas() -> dict[str, tuple[float, bool]]:
    """The emulator's SageMaker quotas (its own figures, not AWS's): 2 endpoint instances of
    every hosting type pt2aws prices; training: 2 CPU instances, and GPU types at 0 with only a
    default value, as new accounts often start (awslabs/amazon-sagemaker-examples#593)."""
    from pt2aws.aws.account import quota_name
    from pt2aws.sizing import catalog, pricing
    from pt2aws.sizing.serving_cost import DEFAULT_COMPARISON

    quotas = {}
    for name in dict.fromkeys([*DEFAULT_COMPARISON, *pricing.table_prices("hosting")]):
        quotas[quota_name(name, "endpoint")] = (2.0, True)
    for name in pricing.table_prices("training"):
        gpu = catalog.instance_family(name)[0] in "gp"
        quotas[quota_name(name, "training")] = (0.0, False) if gpu else (2.0, True)
    return quotas


def _run_folder_tarball(train_dir: Path) -> bytes:
    """``train_dir`` as a gzipped tar, members relative to it, ``checkpoints/`` and
    ``sagemaker_job*`` left out (what a job's ``/opt/ml/model`` holds)."""
    import io
    import tarfile

    if not (train_dir / "model").is_dir():
        raise FileNotFoundError(f"{train_dir} has no model/ folder: train first (notebook 01)")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path in sorted(train_dir.iterdir()):
            if path.name != "checkpoints" and not path.name.startswith("sagemaker_job"):
                tar.add(path, arcname=path.name)
    return buffer.getvalue()


def start(
    region: str = "",
    *,
    model_servers: bool | str = True,
    workdir: str | os.PathLike | None = None,
    training_seconds: float = 0.0,
    training_output: str | os.PathLike | None = None,
    role_arn: str = EMULATOR_ROLE_ARN,
) -> AwsSession:
    """Start the emulator for this process and return its session (the notebooks' way in).

    One emulator runs per process: one an earlier call started is stopped first (moto keeps its
    state in the process, so what it held is still there). It runs until ``session.close()``,
    or until :func:`pt2aws.aws.session.connect` switches the process to AWS.

    Args:
        region: the emulated region; empty: ``us-east-1``.
        model_servers: ``True`` (``"auto"``): an endpoint answers with its image's serving
            software on this machine (TorchServe for the AWS DLC, which needs Java, else the
            archive's handler in this process; the project's server for your own image);
            ``"in_process"``: always the handler in this process; ``False`` (``"canned"``):
            moto's canned answers.
        workdir: folder for the endpoints' model servers (their logs are there).
        training_seconds: how long an emulated training job stays ``InProgress``.
        training_output: a local run folder a completed emulated training job brings back as
            its ``model.tar.gz`` (it trains nothing itself).
        role_arn: the execution role the session carries.

    Returns:
        An :class:`pt2aws.aws.session.AwsSession` whose ``emulator`` is the running
        :class:`Emulator`.
    """
    running = aws_session._RUNNING_EMULATOR["session"]
    if running is not None:
        running.close()
    mode = {True: "auto", False: "canned"}.get(model_servers, model_servers)
    emulator = Emulator(
        region=region or EMULATOR_REGION,
        training_seconds=training_seconds,
        endpoint_servers=mode,
        workdir=workdir,
        training_output=training_output,
    ).start()
    session = emulator.session(role_arn)
    aws_session._RUNNING_EMULATOR["session"] = session
    return session
