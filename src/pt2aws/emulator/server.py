"""A moto server on 127.0.0.1 in this process; while it runs, ``AWS_ENDPOINT_URL`` and fake
credentials point every boto3 and SDK client at it (moto's state lives as long as the process)."""

from __future__ import annotations

import contextlib
import datetime
import io
import logging
import os
import tarfile
from pathlib import Path
from unittest import mock

from pt2aws.aws import images
from pt2aws.aws import session as aws_session
from pt2aws.aws.account import quota_name
from pt2aws.emulator.endpoints import EndpointServers
from pt2aws.processes import free_port
from pt2aws.sizing import catalog, pricing

EMULATOR_ACCOUNT = "123456789012"  # moto's default account id
EMULATOR_REGION = "us-east-1"
EMULATOR_ROLE_ARN = f"arn:aws:iam::{EMULATOR_ACCOUNT}:role/pt2aws-emulator-sagemaker-role"
#: AMI ID the emulator answers for the public DLAMI parameters (moto knows only Amazon Linux's).
PLACEHOLDER_AMI = "ami-0e0e0e0e0e0e0e0e0"
#: Environment set (None: cleared) while it runs; ``SAGEMAKER_VALIDATE_ROLE``: the SDK's check.
ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
       "SAGEMAKER_VALIDATE_ROLE": "false", "AWS_SESSION_TOKEN": None, "AWS_PROFILE": None}  # fmt: skip


class Emulator:
    """moto's S3, SageMaker, STS, IAM, SSM, EC2, Service Quotas and autoscaling, patched;
    ``model_servers``: endpoints answered by the project's server (files in ``workdir``), else
    moto's canned answers; ``training_output``: the run folder a completed job brings back."""

    def __init__(self, region=EMULATOR_REGION, *, model_servers=True, workdir=None,
                 training_output=None):  # fmt: skip
        self.region, self.port = region, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.endpoints = EndpointServers(workdir) if model_servers else None
        self.training_output = Path(training_output) if training_output else None
        self.quotas = emulated_quotas()
        self._stack = contextlib.ExitStack()  # what stop() undoes, last first
        self._sessions: dict[str, aws_session.AwsSession] = {}

    def start(self) -> Emulator:
        """Start the server, apply the patches, point AWS clients at it."""
        from moto.server import ThreadedMotoServer
        from moto.ssm.models import ssm_backends
        from sagemaker.core.helper import session_helper

        from pt2aws.emulator import patches

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a log line per request otherwise
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        server.start()
        self._stack.callback(server.stop)
        env = {**ENV, "AWS_ENDPOINT_URL": self.url, "AWS_DEFAULT_REGION": self.region}
        self._stack.enter_context(mock.patch.dict(os.environ, {k: v for k, v in env.items() if v}))
        for key in (k for k, v in env.items() if v is None):
            os.environ.pop(key, None)
        # the SDK builds its STS client with an explicit regional URL, bypassing AWS_ENDPOINT_URL
        self._stack.enter_context(
            mock.patch.object(session_helper, "sts_regional_endpoint", lambda region: self.url)
        )
        if self.endpoints:
            self._stack.callback(self.endpoints.close)
        patches.apply()
        output = self.training_output
        tarball = output and (lambda: run_folder_tarball(output))
        settings = {"endpoints": self.endpoints, "training_output": tarball, "quotas": self.quotas}
        self._stack.enter_context(mock.patch.dict(patches._state, settings))  # restores an earlier
        with images.reported_by_caller():  # support-date warnings belong to the launch plan
            names = {images.dlami_parameter(it.name) for it in catalog.load_catalog()}
        store = ssm_backends[EMULATOR_ACCOUNT][self.region]._parameters
        for name in sorted(n for n in names if not store.get(n)):
            self.seed_public_parameter(name, PLACEHOLDER_AMI)
        return self

    def stop(self) -> None:
        """Stop it and its endpoints' servers; ``os.environ`` back as it was (idempotent)."""
        self._stack.close()

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def session(self, role_arn: str = EMULATOR_ROLE_ARN) -> aws_session.AwsSession:
        """An :class:`~pt2aws.aws.session.AwsSession` here (one per role)."""
        return self._sessions.setdefault(role_arn, aws_session.AwsSession(
            self.region, role_arn, endpoint_url=self.url, emulator=self, poll_s=1))  # fmt: skip

    def answered_by(self, endpoint_name: str) -> str:
        """What answers (or answered) ``endpoint_name``'s invocations, in words."""
        history = self.endpoints.history if self.endpoints else {}
        return history.get(endpoint_name, "moto's canned answer (no model server)")

    def launch_instance(self, instance_type: str) -> str:
        """An emulated EC2 instance (placeholder AMI) to send commands to; returns its id."""
        from pt2aws.lessons.ec2 import run_instances_request

        request = run_instances_request(instance_type, PLACEHOLDER_AMI, name="pt2aws-ec2")
        return self.session().client("ec2").run_instances(**request)["Instances"][0]["InstanceId"]

    def seed_public_parameter(self, name: str, value: str) -> None:
        """SSM answers ``value`` for the AWS-owned ``name`` (written into moto's store: no account
        may write ``/aws/service/...``)."""
        from moto.ssm.models import Parameter, ssm_backends

        store = ssm_backends[EMULATOR_ACCOUNT][self.region]._parameters
        now, kind = datetime.datetime.now(datetime.timezone.utc), "aws:ec2:image"
        store[name].append(Parameter(
            EMULATOR_ACCOUNT, name, value, "String", "seeded by pt2aws.emulator", None, None, now,
            len(store[name]) + 1, kind if value.startswith("ami-") else "text",
        ))  # fmt: skip


def emulated_quotas() -> dict[str, tuple[float, bool]]:
    """``{quota name: (value, applied)}``: 2 of every priced type, GPU training 0 (a default
    only), as new accounts often start (sagemaker-examples#593)."""
    quotas = {quota_name(n): (2.0, True) for n in pricing.table_prices("hosting")}
    for name in pricing.table_prices("training"):
        gpu = catalog.instance_family(name)[0] in "gp"
        quotas[quota_name(name, "training")] = (0.0, False) if gpu else (2.0, True)
    return quotas


def run_folder_tarball(train_dir: Path) -> bytes:
    """``train_dir`` as a job's ``model.tar.gz`` (no checkpoints); ``FileNotFoundError``."""
    if not (train_dir / "model").is_dir():
        raise FileNotFoundError(f"{train_dir} has no model/ folder: train first (notebook 01)")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path in sorted(train_dir.iterdir()):
            if path.name != "checkpoints" and not path.name.startswith("sagemaker_job"):
                tar.add(path, arcname=path.name)
    return buffer.getvalue()


def start(region: str = "", *, model_servers: bool = True, workdir=None,
          training_output=None) -> aws_session.AwsSession:  # fmt: skip
    """Start the process's one emulator (stopping an earlier one); its session, until
    ``session.close()`` or :func:`pt2aws.aws.session.connect`."""
    if aws_session._RUNNING_EMULATOR["session"] is not None:
        aws_session._RUNNING_EMULATOR["session"].close()
    emulator = Emulator(region or EMULATOR_REGION, model_servers=model_servers, workdir=workdir,
                        training_output=training_output)  # fmt: skip
    session = emulator.start().session()
    aws_session._RUNNING_EMULATOR["session"] = session
    return session
