"""Where pt2aws's AWS calls go, chosen once: an :class:`AwsSession`; plus naming, tagging and
which SageMaker resources exist.

A notebook makes one session and passes it to every function that talks to AWS:

* :func:`connect` for your account (``connect("aws", region=..., role_arn=...)``);
* :func:`pt2aws.emulator.server.start` for the local emulator, which returns the same
  kind of session with its endpoint URL and the stand-in's hooks (:attr:`AwsSession.emulator`).

The functions themselves do not know which one they got: they build their clients with
:meth:`AwsSession.client`. ``boto3``/``botocore`` are imported inside the functions: the package
imports without them.
"""

from __future__ import annotations

import logging
import os
import re
import time
from dataclasses import dataclass

logger = logging.getLogger(__name__)

_LOADER = None
#: SageMaker resource names: letters, digits and single hyphens, 63 characters at most.
NAME_PATTERN = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
#: Region when neither the caller nor the AWS configuration names one.
DEFAULT_REGION = "us-east-1"
#: An emulator started by :func:`pt2aws.emulator.server.start` in this process, if any:
#: :func:`connect` closes it, so that a kernel switched to ``"aws"`` really reaches AWS.
_RUNNING_EMULATOR: dict = {"session": None}


class RoleError(ValueError):
    """A call needs a SageMaker execution role and the session has none."""


def boto_session(region: str | None = None, profile: str | None = None):
    """A fresh ``boto3.Session`` for ``region`` (default: the configured one, else ``us-east-1``).

    Credentials, region and ``AWS_ENDPOINT_URL`` are read anew for every session; only botocore's
    data loader is shared, so the service models (SageMaker's is several MB of JSON) are parsed
    once per process instead of once per client (about 0.5 s each on 2 cores).
    """
    global _LOADER
    import boto3
    import botocore.session

    core = botocore.session.get_session()
    if profile:
        core.set_config_variable("profile", profile)
    if _LOADER is None:
        _LOADER = core.get_component("data_loader")
    core.register_component("data_loader", _LOADER)
    region = region or core.get_config_variable("region") or DEFAULT_REGION
    return boto3.Session(botocore_session=core, region_name=region)


def retrying_client(service: str, region: str | None = None, max_attempts: int = 8, **config):
    """A boto3 client with botocore's ``standard`` retry mode (exponential backoff + jitter).

    Args:
        service: e.g. ``"sagemaker"``, ``"s3"``.
        region: AWS region; default the session's.
        max_attempts: tries per call, the first included (throttling and transient errors only).
        **config: more ``botocore.config.Config`` settings (e.g. ``read_timeout``).
    """
    from botocore.config import Config

    retries = {"mode": "standard", "total_max_attempts": max_attempts}
    return boto_session(region).client(service, config=Config(retries=retries, **config))


@dataclass
class AwsSession:
    """Where AWS calls go: your account, or the local emulator. Made once per notebook.

    Attributes:
        region: the AWS region every call goes to.
        role_arn: the SageMaker execution role the created resources assume (CreateModel,
            CreateTrainingJob); empty until a call needs one (:meth:`require_role`).
        endpoint_url: where the calls go instead of AWS's public endpoints (the emulator's
            ``http://127.0.0.1:<port>``); None for AWS itself.
        emulator: the stand-in's hooks (:class:`pt2aws.emulator.server.Emulator`: fault
            injection, which server answered an endpoint, ...); None on AWS.
        profile: the AWS config profile (None: the default credential chain).
        poll_s: seconds between status polls (AWS: 15; the emulator: under a second).
    """

    region: str
    role_arn: str = ""
    endpoint_url: str | None = None
    emulator: object | None = None
    profile: str | None = None
    poll_s: float = 15.0

    @property
    def emulated(self) -> bool:
        """True on the local emulator: nothing is created in any AWS account, nothing billed."""
        return self.emulator is not None

    @property
    def target(self) -> str:
        """``"emulator"`` or ``"aws"`` (recorded in the run folder)."""
        return "emulator" if self.emulated else "aws"

    def boto(self):
        """A ``boto3.Session`` for this session's region (and profile)."""
        return boto_session(self.region, self.profile)

    def client(self, service: str, *, max_attempts: int = 8, **config):
        """A client for ``service`` with the ``standard`` retry mode (see :func:`retrying_client`).

        Args:
            service: e.g. ``"sagemaker"``, ``"sagemaker-runtime"``, ``"s3"``.
            max_attempts: tries per call, the first included.
            **config: more ``botocore.config.Config`` settings.
        """
        from botocore.config import Config

        retries = {"mode": "standard", "total_max_attempts": max_attempts}
        return self.boto().client(
            service,
            config=Config(retries=retries, **config),
            **({"endpoint_url": self.endpoint_url} if self.endpoint_url else {}),
        )

    def require_role(self) -> str:
        """The execution role; raises when the session has none.

        Raises:
            RoleError: no role; the message says where to find one.
        """
        if self.role_arn:
            return self.role_arn
        raise RoleError(
            "this step needs ROLE_ARN: the ARN of a SageMaker execution role that can read "
            "and write the bucket and pull the image (IAM console -> Roles, e.g. "
            "arn:aws:iam::<account>:role/service-role/AmazonSageMaker-ExecutionRole-...)"
        )

    def account(self) -> str:
        """The account id (one STS ``GetCallerIdentity`` call; any credentials may make it)."""
        return self.client("sts").get_caller_identity()["Account"]

    def answered_by(self, endpoint_name: str) -> str:
        """What answers ``endpoint_name``'s invocations, in words (the emulator says which local
        server; on AWS it is the endpoint itself)."""
        if self.emulated:
            return self.emulator.answered_by(endpoint_name)
        return f"SageMaker endpoint {endpoint_name} ({self.region})"

    def close(self) -> None:
        """Stop the emulator (and its model servers); nothing to do on AWS."""
        if self.emulated:
            self.emulator.stop()
            if _RUNNING_EMULATOR["session"] is self:
                _RUNNING_EMULATOR["session"] = None

    def __str__(self) -> str:
        if self.emulated:
            return (
                f"LOCAL EMULATOR at {self.endpoint_url} ({self.region}): nothing is created in "
                "any AWS account, nothing is billed"
            )
        via = f" via {self.endpoint_url}" if self.endpoint_url else ""
        return f"REAL AWS ACCOUNT, region {self.region}{via}: what is created is billed"


def connect(
    target: str = "aws", *, region: str = "", role_arn: str = "", profile: str | None = None
) -> AwsSession:
    """A session for your AWS account (no AWS call yet).

    An emulator this process started with :func:`pt2aws.emulator.server.start` is closed
    first, so that the calls really reach AWS.

    Args:
        target: ``"aws"`` (the emulator's sessions come from
            :func:`pt2aws.emulator.server.start`).
        region: the region; empty: the AWS configuration's (``AWS_REGION``, ``~/.aws/config``),
            else ``us-east-1``.
        role_arn: the SageMaker execution role for the resources you create.
        profile: an AWS config profile (None: the default credential chain).

    Raises:
        ValueError: another ``target``.
    """
    if target != "aws":
        raise ValueError(
            f"connect({target!r}): connect() is for your AWS account ('aws'); the local emulator "
            "is pt2aws.emulator.server.start()"
        )
    running = _RUNNING_EMULATOR["session"]
    if running is not None:
        logger.warning("closing the emulator still running in this process (%s)", running)
        running.close()
    return AwsSession(
        region=region or boto_session(profile=profile).region_name,
        role_arn=role_arn,
        endpoint_url=os.environ.get("AWS_ENDPOINT_URL") or None,
        profile=profile,
    )


def default_bucket(session: AwsSession) -> str:
    """SageMaker's default bucket for the session's account and region:
    ``sagemaker-<region>-<account>`` (one STS call)."""
    return f"sagemaker-{session.region}-{session.account()}"


def list_sagemaker_resources(session: AwsSession, prefix: str = "") -> dict[str, list[str]]:
    """Names of SageMaker models, endpoint configs and endpoints starting with ``prefix``.

    Returns:
        ``{"endpoints": [...], "endpoint_configs": [...], "models": [...]}``.
    """
    sm = session.client("sagemaker")
    found = {"endpoints": [], "endpoint_configs": [], "models": []}
    for key, call, field, name_key in (
        ("endpoints", "list_endpoints", "Endpoints", "EndpointName"),
        ("endpoint_configs", "list_endpoint_configs", "EndpointConfigs", "EndpointConfigName"),
        ("models", "list_models", "Models", "ModelName"),
    ):
        for page in sm.get_paginator(call).paginate(**({"NameContains": prefix} if prefix else {})):
            found[key] += [
                item[name_key] for item in page[field] if item[name_key].startswith(prefix)
            ]
    return found


def list_scalable_targets(session: AwsSession, prefix: str = "") -> list[str]:
    """Application Auto Scaling ids of SageMaker variants whose endpoint starts with ``prefix``.

    Returns:
        Ids like ``endpoint/<name>/variant/AllTraffic``.
    """
    client = session.client("application-autoscaling")
    ids = []
    for page in client.get_paginator("describe_scalable_targets").paginate(
        ServiceNamespace="sagemaker"
    ):
        ids += [
            t["ResourceId"]
            for t in page["ScalableTargets"]
            if t["ResourceId"].startswith(f"endpoint/{prefix}")
        ]
    return ids


def billable_resources(session: AwsSession, prefix: str = "") -> dict[str, list[str]]:
    """:func:`list_sagemaker_resources` plus ``"scalable_targets"``: what could still cost money.

    Returns:
        ``{"endpoints", "endpoint_configs", "models", "scalable_targets"}`` -> names.
    """
    found = list_sagemaker_resources(session, prefix)
    found["scalable_targets"] = list_scalable_targets(session, prefix)
    return found


def check_name(name: str) -> str:
    """Return ``name`` if SageMaker accepts it as a model / endpoint name.

    Raises:
        ValueError: characters SageMaker names do not allow, or over 63 characters.
    """
    if not NAME_PATTERN.match(name):
        raise ValueError(
            f"{name!r}: SageMaker names allow letters, digits and single hyphens "
            "(pattern ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62})"
        )
    return name


def resource_name(prefix: str = "pt2aws") -> str:
    """``<prefix>-<UTC yyyymmdd-HHMMSS>``, within SageMaker's 63-character name limit.

    Raises:
        ValueError: a prefix with characters SageMaker names do not allow.
    """
    return check_name(f"{prefix}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"[:63])


def resource_tags(extra: dict[str, str] | None = None) -> dict[str, str]:
    """``project=pt2aws``, ``pt2aws:created-at=<UTC ISO time>`` and ``extra``."""
    created_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {"project": "pt2aws", "pt2aws:created-at": created_at, **(extra or {})}
