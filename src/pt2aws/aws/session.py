"""AWS sessions and clients, the default bucket, how pt2aws names and tags what it creates, and
which SageMaker resources exist.

Everything AWS-facing in pt2aws builds its clients here, so that the same code runs against a
real account and against the local emulator (:class:`pt2aws.standins.aws_emulator.Emulator` sets
``AWS_ENDPOINT_URL`` and fake credentials; boto3 reads them anew for every session).
``boto3``/``botocore`` are imported inside the functions: the package imports without them.
"""

from __future__ import annotations

import re
import time

_LOADER = None
#: SageMaker resource names: letters, digits and single hyphens, 63 characters at most.
NAME_PATTERN = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")


def boto_session(region: str | None = None):
    """A fresh ``boto3.Session`` for ``region`` (default: the configured one, else ``us-east-1``).

    Credentials, region and ``AWS_ENDPOINT_URL`` are read anew for every session; only botocore's
    data loader is shared, so the service models (SageMaker's is several MB of JSON) are parsed
    once per process instead of once per client (about 0.5 s each on 2 cores).
    """
    global _LOADER
    import boto3
    import botocore.session

    core = botocore.session.get_session()
    if _LOADER is None:
        _LOADER = core.get_component("data_loader")
    core.register_component("data_loader", _LOADER)
    region = region or core.get_config_variable("region") or "us-east-1"
    return boto3.Session(botocore_session=core, region_name=region)


def retrying_client(service: str, region: str | None = None, max_attempts: int = 8):
    """A boto3 client with botocore's ``standard`` retry mode (exponential backoff + jitter).

    Args:
        service: e.g. ``"sagemaker"``, ``"s3"``.
        region: AWS region; default the session's.
        max_attempts: tries per call, the first included (throttling and transient errors only).
    """
    from botocore.config import Config

    config = Config(retries={"mode": "standard", "total_max_attempts": max_attempts})
    return boto_session(region).client(service, config=config)


def default_bucket(region: str) -> str:
    """SageMaker's default bucket for this account and region: ``sagemaker-<region>-<account>``.

    One STS ``GetCallerIdentity`` call (any credentials may make it).
    """
    account = boto_session(region).client("sts").get_caller_identity()["Account"]
    return f"sagemaker-{region}-{account}"


def list_sagemaker_resources(prefix: str = "", region: str | None = None) -> dict[str, list[str]]:
    """Names of SageMaker models, endpoint configs and endpoints starting with ``prefix``.

    Returns:
        ``{"endpoints": [...], "endpoint_configs": [...], "models": [...]}``.
    """
    sm = boto_session(region).client("sagemaker")
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


def list_scalable_targets(prefix: str = "", region: str | None = None) -> list[str]:
    """Application Auto Scaling ids of SageMaker variants whose endpoint starts with ``prefix``.

    Returns:
        Ids like ``endpoint/<name>/variant/AllTraffic``.
    """
    client = boto_session(region).client("application-autoscaling")
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


def billable_resources(prefix: str = "", region: str | None = None) -> dict[str, list[str]]:
    """:func:`list_sagemaker_resources` plus ``"scalable_targets"``: what could still cost money.

    Returns:
        ``{"endpoints", "endpoint_configs", "models", "scalable_targets"}`` -> names.
    """
    found = list_sagemaker_resources(prefix, region)
    found["scalable_targets"] = list_scalable_targets(prefix, region)
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
