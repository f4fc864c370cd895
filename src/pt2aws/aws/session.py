"""Where pt2aws's AWS calls go, chosen once per notebook: an :class:`AwsSession` for your account
(:func:`connect`) or the local emulator (:func:`pt2aws.emulator.start`); resource names, and what
is still billable. boto3 is imported inside the functions: the package imports without it.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field

from pt2aws.errors import UserError

#: SageMaker resource names: letters, digits and single hyphens, 63 characters at most.
NAME_PATTERN = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
#: The emulator this process runs, if any: :func:`connect` closes it, so "aws" reaches AWS.
_RUNNING_EMULATOR: dict = {"session": None}
_LOADER = None  # botocore's data loader, shared: SageMaker's service model is parsed once


class AwsSetupError(UserError):
    """The AWS set-up stops the run before anything is created (no credentials or region, AWS
    unreachable, a role that cannot be passed, no quota); the message names the fix."""


class RoleError(AwsSetupError, ValueError):
    """A call needs a SageMaker execution role and the session has none."""


def boto_session(region: str | None = None, profile: str | None = None):
    """A ``boto3.Session`` (credentials and ``AWS_ENDPOINT_URL`` read now; region: ``region``,
    else the configured one, else None)."""
    global _LOADER
    import boto3
    import botocore.session

    core = botocore.session.get_session()
    if profile:
        core.set_config_variable("profile", profile)
    _LOADER = _LOADER or core.get_component("data_loader")
    core.register_component("data_loader", _LOADER)
    return boto3.Session(botocore_session=core, region_name=region or None)


@dataclass
class AwsSession:
    """Where AWS calls go: your account, or the local emulator (``emulator`` set).

    Attributes:
        region: the region of every call.
        role_arn: the SageMaker execution role the created resources assume ("" until needed).
        endpoint_url: the emulator's ``http://127.0.0.1:<port>``; None for AWS.
        emulator: the running :class:`pt2aws.emulator.server.Emulator`, or None.
        profile: the AWS config profile (None: the default credential chain).
        poll_s: seconds between status polls (AWS 15, the emulator 1).
    """

    region: str
    role_arn: str = ""
    endpoint_url: str | None = None
    emulator: object | None = None
    profile: str | None = None
    poll_s: int = 15
    _boto: object = field(default=None, init=False, repr=False, compare=False)

    @property
    def emulated(self) -> bool:
        return self.emulator is not None

    @property
    def target(self) -> str:
        """``"emulator"`` or ``"aws"`` (recorded in the run folder)."""
        return "emulator" if self.emulated else "aws"

    def boto(self):
        """This session's ``boto3.Session`` (one per session: the SDK caches clients by it)."""
        if self._boto is None:
            self._boto = boto_session(self.region, self.profile)
        return self._boto

    @property
    def sdk(self) -> dict:
        """``session=`` and ``region=`` for the SDK's resource calls (``Model.create(..., **sdk)``)."""
        return {"session": self.boto(), "region": self.region}

    def client(self, service: str, *, max_attempts: int = 8, **config):
        """A boto3 client with botocore's ``standard`` retries (backoff with jitter on throttling).

        Args:
            max_attempts: tries per call, the first included.
            **config: more ``botocore.config.Config`` settings (e.g. ``read_timeout``).
        """
        from botocore.config import Config

        retries = {"mode": "standard", "total_max_attempts": max_attempts}
        url = {"endpoint_url": self.endpoint_url} if self.endpoint_url else {}
        return self.boto().client(service, config=Config(retries=retries, **config), **url)

    def require_role(self) -> str:
        """The execution role.

        Raises:
            RoleError: none set; the message says where to find one.
        """
        if self.role_arn:
            return self.role_arn
        raise RoleError(
            "this step needs ROLE_ARN: the ARN of a SageMaker execution role that can read "
            "and write the bucket and pull the image (IAM console -> Roles, e.g. "
            "arn:aws:iam::<account>:role/service-role/AmazonSageMaker-ExecutionRole-...)"
        )

    def identity(self) -> dict:
        """The caller (STS ``GetCallerIdentity``: ``{"Account", "Arn", "UserId"}``).

        Raises:
            AwsSetupError: no or invalid credentials, or AWS unreachable (one line, the fix).
        """
        from botocore import exceptions as bx

        try:
            return self.client("sts", max_attempts=2, connect_timeout=5).get_caller_identity()
        except (bx.NoCredentialsError, bx.PartialCredentialsError):
            why = "no AWS credentials found"
        except bx.ProfileNotFound as err:
            why = f"{err}: set AWS_PROFILE to a profile of `aws configure list-profiles`;"
        except bx.EndpointConnectionError as err:
            raise AwsSetupError(
                f"AWS is unreachable ({err}): check the network, the region {self.region!r} "
                "and AWS_ENDPOINT_URL"
            ) from None
        except bx.ClientError as err:
            why = f"the credentials were refused ({err.response['Error']['Code']})"
        raise AwsSetupError(
            f"{why}: set AWS credentials (aws configure, AWS_PROFILE or an instance role) and "
            "check them with `aws sts get-caller-identity`"
        ) from None

    def account(self) -> str:
        """The account id (see :meth:`identity`)."""
        return self.identity()["Account"]

    def answered_by(self, endpoint_name: str) -> str:
        """What answers ``endpoint_name``'s invocations, in words."""
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
    """A session for your AWS account (no AWS call yet; :meth:`AwsSession.identity` checks the
    credentials). An emulator this process started is closed first.

    Args:
        target: ``"aws"``.
        region: empty: the AWS configuration's (``AWS_DEFAULT_REGION``, ``~/.aws/config``).

    Raises:
        AwsSetupError: another ``target``; no region given or configured.
    """
    if target != "aws":
        raise AwsSetupError(
            f"connect({target!r}): connect() is for your AWS account ('aws'); the local emulator "
            "is pt2aws.emulator.start()"
        )
    if _RUNNING_EMULATOR["session"] is not None:
        _RUNNING_EMULATOR["session"].close()
    region = region or boto_session(profile=profile).region_name
    if not region:
        raise AwsSetupError(
            "no AWS region: set REGION (e.g. 'us-east-1') in the parameters cell, --region on "
            "the command line, or AWS_DEFAULT_REGION"
        )
    url = os.environ.get("AWS_ENDPOINT_URL") or None
    return AwsSession(region=region, role_arn=role_arn, endpoint_url=url, profile=profile)


def default_bucket(session: AwsSession) -> str:
    """SageMaker's default bucket ``sagemaker-<region>-<account>`` (one STS call)."""
    return f"sagemaker-{session.region}-{session.account()}"


def billable_resources(session: AwsSession, prefix: str = "") -> dict[str, list[str]]:
    """What could still cost money: names starting with ``prefix``.

    Returns:
        ``{"endpoints", "endpoint_configs", "models": [names], "scalable_targets": [ids like
        endpoint/<name>/variant/AllTraffic]}``.
    """
    sm, found = session.client("sagemaker"), {}
    for key, call, field_name in (
        ("endpoints", "list_endpoints", "Endpoint"),
        ("endpoint_configs", "list_endpoint_configs", "EndpointConfig"),
        ("models", "list_models", "Model"),
    ):
        pages = sm.get_paginator(call).paginate(**({"NameContains": prefix} if prefix else {}))
        names = [item[f"{field_name}Name"] for page in pages for item in page[f"{field_name}s"]]
        found[key] = [n for n in names if n.startswith(prefix)]
    scaling = session.client("application-autoscaling").get_paginator("describe_scalable_targets")
    targets = scaling.paginate(ServiceNamespace="sagemaker")
    ids = [t["ResourceId"] for page in targets for t in page["ScalableTargets"]]
    found["scalable_targets"] = [i for i in ids if i.startswith(f"endpoint/{prefix}")]
    return found


def check_name(name: str) -> str:
    """``name`` if SageMaker accepts it as a model / endpoint name.

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
    """``<prefix>-<UTC yyyymmdd-HHMMSS>``, at most 63 characters (see :func:`check_name`)."""
    return check_name(f"{prefix}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"[:63])


def resource_tags(extra: dict[str, str] | None = None) -> dict[str, str]:
    """``project=pt2aws``, ``pt2aws:created-at=<UTC ISO time>`` and ``extra``."""
    created_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {"project": "pt2aws", "pt2aws:created-at": created_at, **(extra or {})}
