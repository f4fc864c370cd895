"""A local emulator of the AWS control plane (moto) for tests and workshops, and its model server.

:class:`Emulator` runs a moto server on 127.0.0.1 in this process and points every boto3 /
SageMaker client at it through ``AWS_ENDPOINT_URL`` with fake credentials, so the product's real
AWS code path runs unchanged over HTTP. It is an emulator: nothing is created in any AWS
account, and endpoint invocations answer whatever the emulator was told to answer, e.g. the
real serving stack on 127.0.0.1 started by :func:`local_model_server`. The moto patches it needs
are in :mod:`pt2aws.standins.moto_patches`.

:func:`aws_target` is the one switch the notebooks use: ``"emulator"`` or ``"aws"``.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

from pt2aws.standins import moto_patches
from pt2aws.system import free_port

logger = logging.getLogger(__name__)

EMULATOR_ACCOUNT = "123456789012"  # moto's default account id
EMULATOR_REGION = "us-east-1"  # the emulator's default region (any region works)
EMULATOR_ROLE_ARN = f"arn:aws:iam::{EMULATOR_ACCOUNT}:role/pt2aws-emulator-sagemaker-role"
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

    Use as a context manager; while it runs, ``AWS_ENDPOINT_URL`` and fake credentials are set in
    ``os.environ`` (restored on exit), so boto3 and the SageMaker SDK talk to it.

    Args:
        region: the emulated region (default ``us-east-1``).
        port: TCP port; default a free one.
        invocations_url: where ``InvokeEndpoint`` forwards requests (moto_patches patch 3), e.g.
            ``LocalEndpoint(...).url + "/invocations"``; ``None`` keeps moto's canned answers.
        training_seconds: training jobs created while it runs stay ``InProgress`` this long
            (moto_patches patch 6); 0: ``Completed`` at once.

    moto keeps its state in this process, not in the server: an emulator started later in the
    same process (a later notebook cell) still sees the buckets, jobs and endpoints.
    """

    def __init__(
        self,
        region: str = EMULATOR_REGION,
        port: int | None = None,
        invocations_url: str | None = None,
        training_seconds: float = 0.0,
    ):
        self.region = region
        self.invocations_url = invocations_url
        self.training_seconds = training_seconds
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
        moto_patches.set_training_seconds(self.training_seconds)
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
        return self

    def stop(self) -> None:
        """Stop the server and restore the environment (idempotent)."""
        moto_patches.clear_faults()
        moto_patches.forward_invocations_to(None)
        moto_patches.set_training_seconds(0)
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

    def queue_endpoint_result(self, body: str, content_type: str = "application/json") -> None:
        """Make the next ``InvokeEndpoint`` answer ``body`` (moto's result queue).

        moto does not run models: without this (or a forwarding URL) it answers ``b"body"``.
        """
        import json
        import urllib.request

        payload = json.dumps({"results": [{"Body": body, "ContentType": content_type}]}).encode()
        request = urllib.request.Request(
            f"{self.url}/moto-api/static/sagemaker/endpoint-results",
            data=payload,
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()

    def seed_public_parameter(self, name: str, value: str) -> None:
        """Make the emulated SSM answer ``value`` for the AWS-owned public parameter ``name``.

        AWS publishes parameters under ``/aws/service/...`` (e.g. DLAMI IDs) that no account can
        write (``PutParameter`` answers AccessDenied, in moto too), so the emulator's store is
        filled directly. moto ships only the Amazon Linux ones.

        Raises:
            RuntimeError: the emulator is not running.
        """
        import datetime

        from moto.ssm.models import Parameter, ssm_backends

        if self._server is None:
            raise RuntimeError(
                "start the emulator before seeding parameters (use `with Emulator()`)"
            )
        store = ssm_backends[EMULATOR_ACCOUNT][self.region]._parameters
        store[name].append(
            Parameter(
                account_id=EMULATOR_ACCOUNT,
                name=name,
                value=value,
                parameter_type="String",
                description="seeded by pt2aws.standins.aws_emulator.Emulator",
                allowed_pattern=None,
                keyid=None,
                last_modified_date=datetime.datetime.now(datetime.timezone.utc),
                version=len(store[name]) + 1,
                data_type="aws:ec2:image" if value.startswith("ami-") else "text",
            )
        )

    def seed_training_output(self, model_artifact_s3: str, train_dir: str | os.PathLike) -> int:
        """Put a real run folder where an emulated training job's ``model.tar.gz`` belongs.

        An emulated job runs nothing, so it writes nothing: this uploads ``train_dir`` (a local
        run of the same config: ``model/``, ``metrics.json``, ``train_log.jsonl`` ...; without
        ``checkpoints/``, which a job keeps out of its model archive) as a gzipped tar to
        ``model_artifact_s3``, so downloading and extracting the job's model is exercised.

        Returns:
            The archive's size in bytes.

        Raises:
            FileNotFoundError: ``train_dir`` has no ``model/`` folder.
        """
        from pt2aws.aws.session import boto_session

        body = _run_folder_tarball(Path(train_dir))
        bucket, key = model_artifact_s3.removeprefix("s3://").split("/", 1)
        boto_session(self.region).client("s3").put_object(Bucket=bucket, Key=key, Body=body)
        return len(body)


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


@contextlib.contextmanager
def local_model_server(
    model,
    workdir,
    *,
    attempts: int = 3,
    env: dict[str, str] | None = None,
    server: str = "torchserve",
):
    """Start a local model server to answer the emulator's invocations.

    Each attempt takes fresh free ports: the ports are picked before TorchServe binds them, so on
    a busy machine another process can take one in between ("Address already in use"); that
    attempt fails and the next one usually succeeds. Stops the server on exit.

    Args:
        model: ``model.tar.gz`` or a model folder.
        workdir: folder for the server's files (``workdir``, then ``workdir-retry2`` ...).
        attempts: starts to try.
        env: extra server environment (e.g. ``{"PT2AWS_MAX_BATCH": "64"}``).
        server: ``"torchserve"`` (:class:`pt2aws.standins.torchserve.LocalEndpoint`: the AWS DLC's
            serving stack) or ``"asgi"`` (:class:`pt2aws.standins.asgi_local.AsgiEndpoint`: the
            project's serving image's server).

    Yields:
        The running endpoint (``.url``, ``.startup_s``).

    Raises:
        pt2aws.standins.torchserve.LocalEndpointError: every attempt failed (the last error).
    """
    from pathlib import Path

    from pt2aws.standins.torchserve import LocalEndpoint, LocalEndpointError

    if server == "asgi":  # imported only when asked: it subclasses LocalEndpoint at import
        from pt2aws.standins.asgi_local import AsgiEndpoint as endpoint_class
    else:
        endpoint_class = LocalEndpoint
    last = None
    for attempt in range(1, attempts + 1):
        folder = Path(workdir) if attempt == 1 else Path(f"{workdir}-retry{attempt}")
        endpoint = endpoint_class(model, folder, env=env)
        try:
            endpoint.start()
        except LocalEndpointError as err:
            last = err
            logger.warning(
                "local model server attempt %d/%d failed: %s", attempt, attempts, str(err)[:300]
            )
            continue
        try:
            yield endpoint
        finally:
            endpoint.stop()
        return
    raise last


@contextlib.contextmanager
def aws_target(
    target: str,
    region: str | None = None,
    invocations_url: str | None = None,
    training_seconds: float = 0.0,
):
    """``with aws_target("emulator") as emulator:`` ... (``None`` for ``"aws"``, the real account).

    Args:
        target: ``"emulator"`` (a local moto server, no cost) or ``"aws"`` (your account).
        region: the emulator's region (default ``us-east-1``); ignored for ``"aws"``.
        invocations_url: emulator only: forward ``InvokeEndpoint`` there (see :class:`Emulator`).
        training_seconds: emulator only: how long new training jobs stay ``InProgress``.

    Yields:
        The running :class:`Emulator`, or ``None`` for ``"aws"``.

    Raises:
        ValueError: a target other than ``emulator`` or ``aws``.
    """
    if target == "emulator":
        with Emulator(
            region=region or EMULATOR_REGION,
            invocations_url=invocations_url,
            training_seconds=training_seconds,
        ) as emulator:
            yield emulator
    elif target == "aws":
        yield None
    else:
        raise ValueError(f"AWS_TARGET must be 'emulator' or 'aws', not {target!r}")


def target_region(target: str, region: str = "") -> str:
    """The region to work in: ``region`` if given, else the emulator's (``us-east-1``) for
    ``"emulator"``, else the session's (``AWS_REGION`` / ``~/.aws/config``, default ``us-east-1``).

    Raises:
        ValueError: a target other than ``emulator`` or ``aws``.
    """
    from pt2aws.aws.session import boto_session

    if target not in ("emulator", "aws"):
        raise ValueError(f"AWS_TARGET must be 'emulator' or 'aws', not {target!r}")
    if region:
        return region
    return EMULATOR_REGION if target == "emulator" else boto_session().region_name


class RoleError(ValueError):
    """``"aws"`` needs a SageMaker execution role and none was given."""


def execution_role(target: str, role_arn: str = "") -> str:
    """``role_arn``, or the emulator's role on ``"emulator"``.

    Raises:
        RoleError: ``"aws"`` without ``role_arn``; the message says where to find one.
    """
    if role_arn:
        return role_arn
    if target == "emulator":
        return EMULATOR_ROLE_ARN
    raise RoleError(
        "AWS_TARGET='aws' needs ROLE_ARN: the ARN of a SageMaker execution role that can read "
        "and write the bucket and pull the image (IAM console -> Roles, e.g. "
        "arn:aws:iam::<account>:role/service-role/AmazonSageMaker-ExecutionRole-...)"
    )
