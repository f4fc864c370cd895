"""Where AWS calls go, chosen once per notebook: your account (:func:`connect`) or the local
emulator (:func:`pt2aws.emulator.start`); resource names, and what is still billable."""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field

from pt2aws.errors import UserError, explain_aws

#: SageMaker resource names: letters, digits and single hyphens, 63 characters at most.
NAME_PATTERN = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
#: The emulator this process runs: :func:`connect` closes it, so that "aws" reaches AWS.
_RUNNING_EMULATOR: dict = {"session": None}


class AwsSetupError(UserError):
    """The AWS set-up stops the run before anything is created; the message names the fix."""


class RoleError(AwsSetupError, ValueError):
    """A call needs a SageMaker execution role and the session has none."""


@dataclass
class AwsSession:
    """Your account, or the emulator (``emulator`` and ``endpoint_url`` set); ``role_arn``: the
    SageMaker execution role; ``poll_s``: seconds between polls."""

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
        return "emulator" if self.emulated else "aws"

    def boto(self):
        """This session's ``boto3.Session`` (one: the SDK caches its clients by it)."""
        import boto3

        self._boto = self._boto or boto3.Session(region_name=self.region, profile_name=self.profile)
        return self._boto

    @property
    def sdk(self) -> dict:
        """``session=`` and ``region=`` of the SDK's resource calls (``Model.create(..., **sdk)``)."""
        return {"session": self.boto(), "region": self.region}

    def client(self, service: str, *, max_attempts: int = 8, **config):
        """A boto3 client with botocore's ``standard`` retries; ``config``: more ``Config``."""
        from botocore.config import Config

        retries = {"mode": "standard", "total_max_attempts": max_attempts}
        url = {"endpoint_url": self.endpoint_url} if self.endpoint_url else {}
        return self.boto().client(service, config=Config(retries=retries, **config), **url)

    def require_role(self) -> str:
        """The execution role, or :class:`RoleError` naming where to find one."""
        if self.role_arn:
            return self.role_arn
        raise RoleError(
            "this step needs ROLE_ARN: the ARN of a SageMaker execution role that can read "
            "and write the bucket and pull the image (IAM console -> Roles, e.g. "
            "arn:aws:iam::<account>:role/service-role/AmazonSageMaker-ExecutionRole-...)"
        )

    def account(self) -> str:
        """The account id (STS); AwsSetupError: no/refused credentials, unknown profile, offline."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            sts = self.client("sts", max_attempts=2, connect_timeout=5)
            return sts.get_caller_identity()["Account"]
        except (BotoCoreError, ClientError) as err:
            raise (explain(err, self.region) or err) from None

    def answered_by(self, endpoint_name: str) -> str:
        """What answers ``endpoint_name``'s invocations, in words."""
        if self.emulated:
            return self.emulator.answered_by(endpoint_name)
        return f"SageMaker endpoint {endpoint_name} ({self.region})"

    def close(self) -> None:
        """Stop the emulator and its model servers (nothing to do on AWS)."""
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


def explain(err: BaseException, region: str = "") -> AwsSetupError | None:
    """:func:`pt2aws.errors.explain_aws`'s line for ``err`` as an error, or None."""
    line = explain_aws(err, region)
    return AwsSetupError(line) if line else None


def connect(target="aws", *, region="", role_arn="", profile=None) -> AwsSession:
    """A session for your account (no AWS call yet), ``region`` empty: the configured one; closes
    a running emulator. ``AwsSetupError``: another ``target``, no region."""
    import boto3

    if target != "aws":
        raise AwsSetupError(
            f"connect({target!r}): connect() is for your AWS account ('aws'); the local emulator "
            "is pt2aws.emulator.start()"
        )
    if _RUNNING_EMULATOR["session"] is not None:
        _RUNNING_EMULATOR["session"].close()
    region = region or boto3.Session(profile_name=profile).region_name
    if not region:
        raise AwsSetupError(
            "no AWS region: set REGION (e.g. 'us-east-1') in the parameters cell, --region on "
            "the command line, or AWS_DEFAULT_REGION"
        )
    url = os.environ.get("AWS_ENDPOINT_URL") or None
    return AwsSession(region=region, role_arn=role_arn, endpoint_url=url, profile=profile)


def default_bucket(session: AwsSession) -> str:
    """SageMaker's default bucket ``sagemaker-<region>-<account>``."""
    return f"sagemaker-{session.region}-{session.account()}"


def billable_resources(session: AwsSession, prefix: str = "") -> dict[str, list[str]]:
    """``{"endpoints", "endpoint_configs", "models", "scalable_targets"}``: what starting with
    ``prefix`` could still cost (the SDK's ``get_all``; autoscaling by boto3)."""
    from sagemaker.core.resources import Endpoint, EndpointConfig, Model

    contains = {"name_contains": prefix} if prefix else {}
    found = {key: [name for r in kind.get_all(**contains, **session.sdk)
                   if (name := r.get_name()).startswith(prefix)]
             for key, kind in (("endpoints", Endpoint), ("endpoint_configs", EndpointConfig),
                               ("models", Model))}  # fmt: skip
    scaling = session.client("application-autoscaling").get_paginator("describe_scalable_targets")
    ids = [t["ResourceId"] for p in scaling.paginate(ServiceNamespace="sagemaker")
           for t in p["ScalableTargets"]]  # fmt: skip
    found["scalable_targets"] = [i for i in ids if i.startswith(f"endpoint/{prefix}")]
    return found


def resource_name(prefix: str = "pt2aws") -> str:
    """``<prefix>-<UTC yyyymmdd-HHMMSS>``, 63 characters at most; ``ValueError``: SageMaker would refuse it."""
    name = f"{prefix}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"[:63]
    if not NAME_PATTERN.match(name):
        raise ValueError(
            f"{name!r}: SageMaker names allow letters, digits and single hyphens "
            "(pattern ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62})"
        )
    return name
