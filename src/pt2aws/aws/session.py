"""AWS sessions, and a local emulator of the AWS control plane (moto) for tests and workshops.

``Emulator`` runs a moto server on 127.0.0.1 in this process and points every boto3/SageMaker
client at it through ``AWS_ENDPOINT_URL`` with fake credentials, so the product's real AWS code
path runs unchanged over HTTP. It is an emulator: nothing is created in any AWS account, and
endpoint invocations answer whatever the emulator was told to answer.

moto 5.2.5 needs a few small patches, applied when the server starts (documented in
``../shared/notes/stack-notes.md``, section 7c):

1. **Instance types.** moto's endpoint-config validator knows only a few x86 types; the patch
   validates against botocore's ``ProductionVariantInstanceType`` enum instead (the real API's
   list, which holds the Graviton families ml.c6g … ml.r8g).
2. **Empty nested shapes.** moto's DescribeModel/DescribeEndpoint(Config) return ``VpcConfig: {}``
   and ``DataCaptureConfig: {}``, which sagemaker-core's pydantic shapes reject; the patch drops
   empty-dict values from those three responses, as AWS omits unset members.
3. **STS in the SageMaker SDK** builds its client with an explicit regional endpoint that bypasses
   ``AWS_ENDPOINT_URL``; the patch points it at the emulator.

Three more patches (each acts only on the moto
server; the product's AWS code path is unchanged):

4. **InvokeEndpoint forwarding.** moto runs no model: ``InvokeEndpoint`` answers a canned body.
   With ``Emulator(invocations_url=...)`` it forwards the request body, ``Content-Type`` and
   ``Accept`` to that URL (``POST``; e.g. the local SageMaker serving stack of
   :mod:`pt2aws.serving.local`) and answers with what the model server answered. A non-2xx
   answer becomes a ``ModelError`` (HTTP 424) naming the original status, as SageMaker does, and
   an endpoint that does not exist (or was deleted) is a ``ValidationError``, as on AWS.
5. **Fault injection.** :meth:`Emulator.inject_fault` makes the next call(s) of an operation
   (``CreateModel``, ``CreateEndpointConfig``, ``CreateEndpoint``, ``InvokeEndpoint``) fail with
   a given AWS error code (e.g. ``ThrottlingException``), to test retries and clean-up.
6. **IAM SimulatePrincipalPolicy** is not implemented by moto (HTTP 500, retried by botocore with
   a traceback per try); SDK v3 ``ModelTrainer`` calls it to check that the role may write to the
   staging bucket. The patch answers ``allowed`` for every requested action and resource, as for
   a role with the usual ``AmazonSageMakerFullAccess`` policy.
"""

from __future__ import annotations

_LOADER = None


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


def list_sagemaker_resources(prefix: str = "", region: str | None = None) -> dict[str, list[str]]:
    """Names of SageMaker models, endpoint configs and endpoints starting with ``prefix``."""
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
    """Application Auto Scaling resource ids of SageMaker variants whose endpoint starts with ``prefix``.

    Returns ids like ``endpoint/<name>/variant/AllTraffic``.
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


def retrying_client(service: str, region: str, max_attempts: int = 8):
    """A boto3 client with botocore's ``standard`` retry mode (exponential backoff + jitter)."""
    from botocore.config import Config

    from pt2aws.aws.session import boto_session

    config = Config(retries={"mode": "standard", "total_max_attempts": max_attempts})
    return boto_session(region).client(service, config=config)


def default_bucket(region: str) -> str:
    """SageMaker's default bucket name for this account and region: ``sagemaker-<region>-<account>``."""
    from pt2aws.aws.session import boto_session

    account = boto_session(region).client("sts").get_caller_identity()["Account"]
    return f"sagemaker-{region}-{account}"
