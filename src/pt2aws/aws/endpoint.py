"""Package a trained model for SageMaker, deploy it to a Graviton endpoint, invoke it, clean up.

Each step fails loudly, before anything is billed, on the mistakes that public issue trackers
show people making (see ``../shared/notes/aws-reference-notes.md`` section 3):

* the artifact: a nested top folder, the handler at the root, a tokenizer left out, symlinks,
  absolute or ``..`` paths (:func:`package` cannot produce them, :func:`validate_archive`
  rejects them and then loads the model and predicts, with no AWS);
* the image: an x86 image for a Graviton instance, a Hugging Face DLC on Graviton, an SDK that
  does not know the newer arm64 images (:func:`inference_image_uri`);
* the bill: endpoints left running after a failure (:func:`deployed_endpoint` deletes what it
  created in ``finally``; ``pt2aws cleanup --prefix`` finds leftovers).

The ``model.tar.gz`` contract of the SageMaker PyTorch inference container (see
aws/sagemaker-pytorch-inference-toolkit): model files at the archive root, the handler in
``code/inference.py`` and its extra packages in ``code/requirements.txt``, which the container
pip-installs at start.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from pt2aws.aws.images import (
    DEFAULT_INSTANCE_TYPE,
    DEFAULT_TORCH_VERSION,
    check_image_matches_instance,
    check_instance_type,
    inference_image_uri,
)
from pt2aws.aws.session import retrying_client
from pt2aws.inference.runtime import graviton_settings
from pt2aws.sizing.catalog import has_bf16, instance_vcpus, is_graviton

logger = logging.getLogger(__name__)


class DeploymentError(RuntimeError):
    """The endpoint reached ``Failed`` (the message carries SageMaker's ``FailureReason``)."""


def endpoint_environment(
    instance_type: str,
    vcpus: int | None = None,
    *,
    workers: int | None = None,
    max_batch: int = 64,
) -> dict[str, str]:
    """Container environment: handler location, worker/thread counts and Graviton settings.

    Workers default to one per physical core (``vcpus`` on Graviton, ``vcpus // 2`` on x86),
    each with ``vcpus // workers`` intra-op threads: the throughput set-up of the Graviton
    benchmark notebook (aws/amazon-sagemaker-examples PR #3940: ``OMP_NUM_THREADS=1`` and one
    worker per vCPU on c7g.4xlarge). Graviton settings from the AWS Graviton Technical Guide,
    machinelearning/pytorch.md: ``DNNL_DEFAULT_FPMATH_MODE=BF16`` (bf16 fast-math GEMM kernels;
    Graviton3 and later only, which have bf16), ``LRU_CACHE_CAPACITY=1024`` (oneDNN primitive
    cache), ``THP_MEM_ALLOC_ENABLE=1`` (transparent huge pages).

    Args:
        instance_type: e.g. ``"ml.c7g.xlarge"``.
        vcpus: vCPUs of the instance; default from :func:`instance_vcpus`.
        workers: model-server workers (each loads the model once: memory = workers x model).
        max_batch: texts per request the handler accepts (``PT2AWS_MAX_BATCH``); keep it equal
            to the invoke client's ``max_items``.

    Raises:
        ValueError: ``workers`` or ``max_batch`` below 1.
    """
    vcpus = vcpus or instance_vcpus(instance_type)
    graviton = is_graviton(instance_type)
    workers = workers or max(1, vcpus if graviton else vcpus // 2)
    if workers < 1 or max_batch < 1:
        raise ValueError(f"workers ({workers}) and max_batch ({max_batch}) must be >= 1")
    env = {
        "SAGEMAKER_PROGRAM": "inference.py",
        "SAGEMAKER_SUBMIT_DIRECTORY": "/opt/ml/model/code",
        "SAGEMAKER_CONTAINER_LOG_LEVEL": "20",
        "SAGEMAKER_MODEL_SERVER_WORKERS": str(workers),
        "PT2AWS_MAX_BATCH": str(max_batch),
        "TOKENIZERS_PARALLELISM": "false",
    }
    runtime = graviton_settings(
        arm64=graviton, bf16=has_bf16(instance_type), vcpus=vcpus, processes=workers
    )
    # x86 endpoints get only the thread count; the Graviton guide's settings are for Graviton
    env.update(
        runtime["env"] if graviton else {"OMP_NUM_THREADS": runtime["env"]["OMP_NUM_THREADS"]}
    )
    return env


_NAME_RE = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")


def resource_name(prefix: str = "pt2aws") -> str:
    """``<prefix>-<UTC yyyymmdd-HHMMSS>``, within SageMaker's 63-character name limit.

    Raises:
        ValueError: a prefix with characters SageMaker names do not allow.
    """
    name = f"{prefix}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"[:63]
    if not _NAME_RE.match(name):
        raise ValueError(
            f"{prefix!r}: SageMaker names allow letters, digits and single hyphens "
            "(pattern ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62})"
        )
    return name


@dataclass
class AutoScaling:
    """Target-tracking autoscaling of an endpoint variant (Application Auto Scaling).

    The metric ``SageMakerVariantInvocationsPerInstance`` is invocations per minute per instance
    (AWS docs, "Automatic scaling of Amazon SageMaker AI models"); the cooldowns are the values of
    the huggingface/notebooks ``13_deploy_and_autoscaling_transformers`` example.
    """

    min_instances: int = 1
    max_instances: int = 2
    target_invocations_per_instance: float = 600.0
    scale_in_cooldown_s: int = 300
    scale_out_cooldown_s: int = 60

    def __post_init__(self):
        if not 1 <= self.min_instances <= self.max_instances:
            raise ValueError(
                f"need 1 <= min_instances ({self.min_instances}) <= max_instances ({self.max_instances})"
            )
        if self.target_invocations_per_instance <= 0:
            raise ValueError("target_invocations_per_instance must be > 0 (per minute)")


def scalable_resource_id(endpoint_name: str, variant: str = "AllTraffic") -> str:
    """Application Auto Scaling id of an endpoint variant."""
    return f"endpoint/{endpoint_name}/variant/{variant}"


def enable_autoscaling(
    endpoint_name: str, region: str, config: AutoScaling, variant: str = "AllTraffic"
) -> str:
    """Register the variant as a scalable target and attach a target-tracking policy.

    Returns:
        The scalable target's resource id.
    """
    client = retrying_client("application-autoscaling", region)
    resource_id = scalable_resource_id(endpoint_name, variant)
    client.register_scalable_target(
        ServiceNamespace="sagemaker",
        ResourceId=resource_id,
        ScalableDimension="sagemaker:variant:DesiredInstanceCount",
        MinCapacity=config.min_instances,
        MaxCapacity=config.max_instances,
    )
    client.put_scaling_policy(
        PolicyName=f"{endpoint_name}-invocations",
        ServiceNamespace="sagemaker",
        ResourceId=resource_id,
        ScalableDimension="sagemaker:variant:DesiredInstanceCount",
        PolicyType="TargetTrackingScaling",
        TargetTrackingScalingPolicyConfiguration={
            "TargetValue": float(config.target_invocations_per_instance),
            "PredefinedMetricSpecification": {
                "PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"
            },
            "ScaleInCooldown": config.scale_in_cooldown_s,
            "ScaleOutCooldown": config.scale_out_cooldown_s,
        },
    )
    return resource_id


def disable_autoscaling(endpoint_name: str, region: str) -> list[str]:
    """Delete the scaling policies and deregister every scalable variant of ``endpoint_name``.

    Returns:
        The resource ids deregistered.
    """
    client = retrying_client("application-autoscaling", region)
    removed = []
    pages = client.get_paginator("describe_scalable_targets").paginate(ServiceNamespace="sagemaker")
    targets = [t for page in pages for t in page["ScalableTargets"]]
    for target in targets:
        resource_id = target["ResourceId"]
        if not resource_id.startswith(f"endpoint/{endpoint_name}/variant/"):
            continue
        policies = client.describe_scaling_policies(
            ServiceNamespace="sagemaker", ResourceId=resource_id
        )["ScalingPolicies"]
        for policy in policies:
            client.delete_scaling_policy(
                PolicyName=policy["PolicyName"],
                ServiceNamespace="sagemaker",
                ResourceId=resource_id,
                ScalableDimension=policy["ScalableDimension"],
            )
        client.deregister_scalable_target(
            ServiceNamespace="sagemaker",
            ResourceId=resource_id,
            ScalableDimension=target["ScalableDimension"],
        )
        removed.append(resource_id)
    return removed


def _is_not_found(err) -> bool:
    text = str(err).lower()
    return "not found" in text or "could not find" in text or "does not exist" in text


def delete_resources(name: str, region: str) -> list[tuple[str, str]]:
    """Delete the autoscaling, endpoint, endpoint config and model called ``name``.

    Missing resources are skipped; other errors are logged and the next resource is still tried
    (the client retries throttling with backoff).

    Returns:
        The ``(kind, name)`` pairs actually deleted.
    """
    sm = retrying_client("sagemaker", region)
    deleted = []
    try:
        deleted += [("scalable_target", r) for r in disable_autoscaling(name, region)]
    except Exception as err:  # noqa: BLE001 - clean-up must go on
        logger.error("could not remove autoscaling of %s: %s", name, err)
    for kind, call, key in (
        ("endpoint", sm.delete_endpoint, "EndpointName"),
        ("endpoint_config", sm.delete_endpoint_config, "EndpointConfigName"),
        ("model", sm.delete_model, "ModelName"),
    ):
        try:
            call(**{key: name})
            deleted.append((kind, name))
        except sm.exceptions.ClientError as err:
            if not _is_not_found(err):
                logger.error("could not delete %s %s: %s", kind, name, err)
    return deleted


def wait_for_endpoint(
    name: str,
    region: str,
    *,
    timeout_s: float = 1800,
    poll_s: float | None = None,
    progress: bool = True,
) -> dict:
    """Poll ``DescribeEndpoint`` until ``InService``, showing the status and elapsed seconds.

    Args:
        timeout_s: give up after this many seconds (real endpoints take 5-10 minutes).
        poll_s: seconds between polls; default 15 (1 for timeouts under a minute).
        progress: show a tqdm bar (notebook or terminal) with the status.

    Returns:
        The last ``DescribeEndpoint`` response.

    Raises:
        DeploymentError: status ``Failed`` (with SageMaker's ``FailureReason``).
        TimeoutError: not ``InService`` within ``timeout_s``.
    """
    from tqdm.auto import tqdm

    sm = retrying_client("sagemaker", region)
    poll_s = poll_s or (1 if timeout_s < 60 else 15)
    start = time.monotonic()
    bar = tqdm(total=int(timeout_s), unit="s", desc=f"{name}", disable=not progress, leave=True)
    try:
        while True:
            described = sm.describe_endpoint(EndpointName=name)
            status = described["EndpointStatus"]
            elapsed = time.monotonic() - start
            bar.set_postfix_str(status)
            bar.n = min(int(elapsed), int(timeout_s))
            bar.refresh()
            if status == "InService":
                return described
            if status in ("Failed", "OutOfService", "RollingBack", "UpdateRollbackFailed"):
                raise DeploymentError(
                    f"endpoint {name} is {status}: {described.get('FailureReason', 'no reason given')} "
                    f"(logs: CloudWatch /aws/sagemaker/Endpoints/{name})"
                )
            if elapsed + poll_s > timeout_s:
                raise TimeoutError(
                    f"endpoint {name} still {status} after {elapsed:.0f} s (timeout {timeout_s:.0f} s); "
                    f"see CloudWatch /aws/sagemaker/Endpoints/{name}"
                )
            time.sleep(poll_s)
    finally:
        bar.close()


@dataclass
class Deployment:
    """What :func:`deployed_endpoint` created; ``deleted`` lists what clean-up removed."""

    name: str
    region: str
    instance_type: str
    image_uri: str
    model_data_url: str
    environment: dict = field(default_factory=dict)
    endpoint: object = None  # sagemaker.core.resources.Endpoint
    autoscaling_target: str | None = None
    created: list[tuple[str, str]] = field(default_factory=list)
    deleted: list[tuple[str, str]] = field(default_factory=list)

    def invoke(
        self,
        body: str | bytes,
        content_type: str = "application/json",
        accept: str = "application/json",
    ) -> str:
        """Send one request to the endpoint; returns the response body as text (UTF-8)."""
        body = body.encode("utf-8") if isinstance(body, str) else body
        payload, _ = self.client().invoke_raw(body, content_type, accept)
        return payload.decode("utf-8")

    def client(self, **kwargs):
        """An :class:`pt2aws.invoke.EndpointClient` for this endpoint (chunking, retries)."""
        from pt2aws.aws.invoke import EndpointClient

        kwargs.setdefault("max_items", int(self.environment.get("PT2AWS_MAX_BATCH", 64)))
        return EndpointClient(self.name, region=self.region, **kwargs)

    def predict(self, texts: list[str], **kwargs) -> list[dict]:
        """Classify ``texts`` (any number): split into requests under the payload limit."""
        return self.client(**kwargs).predict(texts)


def upload_model(archive: str | Path, bucket: str, key: str, region: str) -> str:
    """Upload ``archive`` to ``s3://bucket/key`` with SSE-S3 encryption; returns the S3 URL.

    Creates the bucket (SSE-S3 default encryption, public access blocked) if it does not exist.
    """
    from pt2aws.aws.session import boto_session

    s3 = boto_session(region).client("s3")
    try:
        s3.head_bucket(Bucket=bucket)
    except s3.exceptions.ClientError:
        kwargs = (
            {}
            if region == "us-east-1"
            else {"CreateBucketConfiguration": {"LocationConstraint": region}}
        )
        s3.create_bucket(Bucket=bucket, **kwargs)
        s3.put_public_access_block(
            Bucket=bucket,
            PublicAccessBlockConfiguration={
                "BlockPublicAcls": True,
                "IgnorePublicAcls": True,
                "BlockPublicPolicy": True,
                "RestrictPublicBuckets": True,
            },
        )
    s3.upload_file(str(archive), bucket, key, ExtraArgs={"ServerSideEncryption": "AES256"})
    return f"s3://{bucket}/{key}"


@contextlib.contextmanager
def deployed_endpoint(
    model_data_url: str,
    *,
    role_arn: str,
    region: str,
    instance_type: str = DEFAULT_INSTANCE_TYPE,
    image_uri: str | None = None,
    torch_version: str = DEFAULT_TORCH_VERSION,
    name: str | None = None,
    wait_timeout_s: int = 1800,
    poll_s: float | None = None,
    progress: bool = False,
    tags: dict[str, str] | None = None,
    environment: dict[str, str] | None = None,
    autoscaling: AutoScaling | None = None,
):
    """Create model, endpoint config and endpoint; yield a :class:`Deployment`; always delete them.

    Image and instance are checked before any AWS call. Clean-up runs in ``finally``: after
    success, after an exception in the ``with`` body, and after a failure part-way through
    creation (including the autoscaling set-up), so nothing billable is left behind.

    Args:
        model_data_url: ``s3://`` URL of ``model.tar.gz`` (see :func:`upload_model`).
        role_arn: SageMaker execution role.
        region: AWS region.
        instance_type: hosting instance type (default ``ml.c7g.xlarge``, Graviton3, 4 vCPUs).
        image_uri: default :func:`inference_image_uri` for ``torch_version``.
        name: resource name for model, config and endpoint; default :func:`resource_name`.
        wait_timeout_s: seconds to wait for ``InService``.
        progress: show the wait as a progress bar.
        tags: extra tags; ``project=pt2aws`` and ``pt2aws:created-at`` are always set.
        environment: overrides of :func:`endpoint_environment`.
        autoscaling: target-tracking autoscaling; removed on clean-up.

    Raises:
        ImageSelectionError: see :func:`inference_image_uri` (before any AWS call).
        DeploymentError, TimeoutError: see :func:`wait_for_endpoint`.
    """
    check_instance_type(instance_type)
    image_uri = image_uri or inference_image_uri(region, torch_version, instance_type)
    check_image_matches_instance(image_uri, instance_type)
    name = name or resource_name()
    if not _NAME_RE.match(name):
        raise ValueError(f"{name!r} is not a valid SageMaker name (letters, digits, hyphens)")

    from sagemaker.core.resources import Endpoint, EndpointConfig, Model
    from sagemaker.core.shapes import ContainerDefinition, ProductionVariant, Tag

    from pt2aws.aws.session import boto_session

    env = {**endpoint_environment(instance_type), **(environment or {})}
    created_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    all_tags = {"project": "pt2aws", "pt2aws:created-at": created_at, **(tags or {})}
    tag_list = [Tag(key=k, value=v) for k, v in all_tags.items()]
    session = boto_session(region)
    deployment = Deployment(
        name=name,
        region=region,
        instance_type=instance_type,
        image_uri=image_uri,
        model_data_url=model_data_url,
        environment=env,
    )
    try:
        Model.create(
            model_name=name,
            execution_role_arn=role_arn,
            tags=tag_list,
            session=session,
            region=region,
            primary_container=ContainerDefinition(
                image=image_uri, model_data_url=model_data_url, environment=env
            ),
        )
        deployment.created.append(("model", name))
        EndpointConfig.create(
            endpoint_config_name=name,
            tags=tag_list,
            session=session,
            region=region,
            production_variants=[
                ProductionVariant(
                    variant_name="AllTraffic",
                    model_name=name,
                    initial_instance_count=autoscaling.min_instances if autoscaling else 1,
                    instance_type=instance_type,
                )
            ],
        )
        deployment.created.append(("endpoint_config", name))
        deployment.endpoint = Endpoint.create(
            endpoint_name=name,
            endpoint_config_name=name,
            tags=tag_list,
            session=session,
            region=region,
        )
        deployment.created.append(("endpoint", name))
        wait_for_endpoint(name, region, timeout_s=wait_timeout_s, poll_s=poll_s, progress=progress)
        if autoscaling:
            deployment.autoscaling_target = enable_autoscaling(name, region, autoscaling)
            deployment.created.append(("scalable_target", deployment.autoscaling_target))
        yield deployment
    finally:
        deployment.deleted = delete_resources(name, region)
        logger.info("deleted %s", deployment.deleted)
