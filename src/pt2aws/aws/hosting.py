"""The SageMaker hosting resources of one endpoint: its requests, creating, waiting, deleting.

A real-time endpoint is three resources with the same name here: a *model* (image + S3 model
data + environment + execution role), an *endpoint config* (instance type and count) and the
*endpoint*. :func:`hosting_requests` builds the three ``Create*`` requests; a
:class:`Deployment` sends exactly those (``boto3``), waits for ``InService`` and deletes them
again; :func:`deployed_endpoint` is that lifecycle as a ``with`` block that always cleans up.
Notebook 03 sends the same requests itself, one call per step, as SageMaker's own examples do.
Every function takes the :class:`pt2aws.aws.session.AwsSession` the calls go to.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field

from pt2aws.aws.autoscaling import AutoScaling, disable_autoscaling, enable_autoscaling
from pt2aws.aws.images import (
    DEFAULT_INSTANCE_TYPE,
    INFERENCE_TORCH_VERSION,
    check_image_matches_instance,
    check_instance_type,
    inference_image_uri,
    is_aws_dlc,
)
from pt2aws.aws.session import AwsSession, check_name, resource_name, resource_tags
from pt2aws.aws.waiting import wait_for_status
from pt2aws.inference.runtime import graviton_settings
from pt2aws.sizing.catalog import has_bf16, instance_vcpus, is_graviton

logger = logging.getLogger(__name__)

VARIANT_NAME = "AllTraffic"
#: Endpoint states after which waiting longer cannot help.
FAILED_STATES = ("Failed", "OutOfService", "RollingBack", "UpdateRollbackFailed")


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
    worker per vCPU on c7g.4xlarge). The Graviton runtime settings come from
    :func:`pt2aws.inference.runtime.graviton_settings` (AWS Graviton Technical Guide); x86
    endpoints get only the thread count.

    Args:
        instance_type: e.g. ``"ml.c7g.xlarge"``.
        vcpus: vCPUs of the instance; default from :func:`pt2aws.sizing.catalog.instance_vcpus`.
        workers: model-server workers (each loads the model once: memory = workers x model).
        max_batch: texts per request the handler accepts (``PT2AWS_MAX_BATCH``); keep it equal
            to the invoke client's ``max_items``.

    Returns:
        ``{name: value}``, all strings (the ``Environment`` of ``CreateModel``).

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
    env.update(
        runtime["env"] if graviton else {"OMP_NUM_THREADS": runtime["env"]["OMP_NUM_THREADS"]}
    )
    return env


def hosting_requests(
    name: str,
    *,
    model_data_url: str,
    role_arn: str,
    image_uri: str,
    instance_type: str,
    environment: dict[str, str],
    tags: dict[str, str],
    instance_count: int = 1,
    network_isolation: bool = False,
) -> dict[str, dict]:
    """The ``CreateModel``, ``CreateEndpointConfig`` and ``CreateEndpoint`` requests for ``name``.

    Args:
        name: name of the model, endpoint config and endpoint (:func:`resource_name`).
        model_data_url: ``s3://`` URL of ``model.tar.gz``.
        role_arn: SageMaker execution role (reads the model data, pulls the image).
        image_uri: the serving container image.
        instance_type: e.g. ``"ml.c7g.xlarge"``.
        environment: the container environment (:func:`endpoint_environment`).
        tags: resource tags.
        instance_count: initial instances of the variant.
        network_isolation: ``EnableNetworkIsolation``: the container gets no network access.

    Returns:
        ``{"CreateModel": {...}, "CreateEndpointConfig": {...}, "CreateEndpoint": {...}}``, each
        the keyword arguments of the ``boto3`` SageMaker client call of that name.
    """
    tag_list = [{"Key": k, "Value": v} for k, v in tags.items()]
    return {
        "CreateModel": {
            "ModelName": name,
            "ExecutionRoleArn": role_arn,
            "PrimaryContainer": {
                "Image": image_uri,
                "ModelDataUrl": model_data_url,
                "Environment": dict(environment),
            },
            "EnableNetworkIsolation": network_isolation,
            "Tags": tag_list,
        },
        "CreateEndpointConfig": {
            "EndpointConfigName": name,
            "ProductionVariants": [
                {
                    "VariantName": VARIANT_NAME,
                    "ModelName": name,
                    "InitialInstanceCount": instance_count,
                    "InstanceType": instance_type,
                }
            ],
            "Tags": tag_list,
        },
        "CreateEndpoint": {"EndpointName": name, "EndpointConfigName": name, "Tags": tag_list},
    }


def wait_for_endpoint(
    session: AwsSession,
    name: str,
    *,
    timeout_s: float = 1800,
    poll_s: float | None = None,
    progress: bool = True,
) -> dict:
    """Poll ``DescribeEndpoint`` until ``InService``, showing the status and elapsed seconds.

    Args:
        session: where the endpoint is.
        name: the endpoint.
        timeout_s: give up after this many seconds (real endpoints take 5-10 minutes).
        poll_s: seconds between polls; default the session's (15 on AWS).
        progress: show a tqdm bar (notebook or terminal) with the status.

    Returns:
        The last ``DescribeEndpoint`` response.

    Raises:
        DeploymentError: status ``Failed`` (with SageMaker's ``FailureReason``).
        TimeoutError: not ``InService`` within ``timeout_s``.
    """
    sm = session.client("sagemaker")
    return wait_for_status(
        lambda: sm.describe_endpoint(EndpointName=name),
        status_key="EndpointStatus",
        done=("InService",),
        failed=FAILED_STATES,
        label=f"endpoint {name}",
        timeout_s=timeout_s,
        poll_s=poll_s or min(session.poll_s, timeout_s / 4),
        progress=progress,
        failure=DeploymentError,
        hint=f" (logs: CloudWatch /aws/sagemaker/Endpoints/{name})",
    )


def _is_not_found(err) -> bool:
    text = str(err).lower()
    return "not found" in text or "could not find" in text or "does not exist" in text


def delete_resources(session: AwsSession, name: str) -> list[tuple[str, str]]:
    """Delete the autoscaling, endpoint, endpoint config and model called ``name``.

    Missing resources are skipped; other errors are logged and the next resource is still tried
    (the client retries throttling with backoff).

    Returns:
        The ``(kind, name)`` pairs actually deleted.
    """
    sm = session.client("sagemaker")
    deleted = []
    try:
        deleted += [("scalable_target", r) for r in disable_autoscaling(session, name)]
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


@dataclass
class Deployment:
    """One endpoint's resources: :meth:`create` sends :attr:`requests`, :meth:`delete` undoes them.

    Attributes:
        session: where the resources are created.
        name: name of the model, endpoint config and endpoint.
        requests: the three ``Create*`` requests (:func:`hosting_requests`).
        autoscaling: autoscaling to attach once ``InService``, or None.
        created: ``(kind, name)`` of what :meth:`create` created, in order.
        deleted: ``(kind, name)`` of what :meth:`delete` deleted.
    """

    session: AwsSession
    name: str
    requests: dict[str, dict]
    autoscaling: AutoScaling | None = None
    created: list[tuple[str, str]] = field(default_factory=list)
    deleted: list[tuple[str, str]] = field(default_factory=list)

    @property
    def image_uri(self) -> str:
        return self.requests["CreateModel"]["PrimaryContainer"]["Image"]

    @property
    def instance_type(self) -> str:
        return self.requests["CreateEndpointConfig"]["ProductionVariants"][0]["InstanceType"]

    @property
    def model_data_url(self) -> str:
        return self.requests["CreateModel"]["PrimaryContainer"]["ModelDataUrl"]

    @property
    def environment(self) -> dict[str, str]:
        return self.requests["CreateModel"]["PrimaryContainer"]["Environment"]

    @property
    def workers(self) -> int:
        """Model-server workers per instance: requests it answers at once."""
        return int(self.environment["SAGEMAKER_MODEL_SERVER_WORKERS"])

    def create(
        self, *, wait_timeout_s: float = 1800, poll_s: float | None = None, progress: bool = False
    ) -> None:
        """Create model, endpoint config and endpoint, wait for ``InService``, add autoscaling.

        Raises:
            botocore.exceptions.ClientError: a request AWS refused (quota, permissions ...).
            pt2aws.aws.DeploymentError, TimeoutError: see
                :func:`wait_for_endpoint`.
        """
        sm = self.session.client("sagemaker")
        sm.create_model(**self.requests["CreateModel"])
        self.created.append(("model", self.name))
        sm.create_endpoint_config(**self.requests["CreateEndpointConfig"])
        self.created.append(("endpoint_config", self.name))
        sm.create_endpoint(**self.requests["CreateEndpoint"])
        self.created.append(("endpoint", self.name))
        wait_for_endpoint(
            self.session, self.name, timeout_s=wait_timeout_s, poll_s=poll_s, progress=progress
        )
        if self.autoscaling:
            target = enable_autoscaling(self.session, self.name, self.autoscaling)
            self.created.append(("scalable_target", target))

    def delete(self) -> list[tuple[str, str]]:
        """Delete everything called :attr:`name` (see :func:`delete_resources`)."""
        self.deleted = delete_resources(self.session, self.name)
        logger.info("deleted %s", self.deleted)
        return self.deleted

    def client(self, **kwargs):
        """An :class:`pt2aws.aws.invoke.EndpointClient` for this endpoint (chunking, retries)."""
        from pt2aws.aws.invoke import EndpointClient

        kwargs.setdefault("max_items", int(self.environment.get("PT2AWS_MAX_BATCH", 64)))
        return EndpointClient(self.name, self.session, **kwargs)

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

    def predict(self, texts: list[str], **kwargs) -> list[dict]:
        """Classify ``texts`` (any number): split into requests under the payload limit."""
        return self.client(**kwargs).predict(texts)


def new_deployment(
    session: AwsSession,
    model_data_url: str,
    *,
    instance_type: str = DEFAULT_INSTANCE_TYPE,
    image_uri: str | None = None,
    torch_version: str = INFERENCE_TORCH_VERSION,
    name: str | None = None,
    tags: dict[str, str] | None = None,
    environment: dict[str, str] | None = None,
    autoscaling: AutoScaling | None = None,
    network_isolation: bool = False,
) -> Deployment:
    """A :class:`Deployment` with its requests built and checked; nothing is sent yet.

    An AWS DLC's architecture is checked against the instance; an image of your own is not (its
    URI does not say which platform it was built for). The execution role is the session's.

    Args:
        session: where it will be created (region, execution role).
        model_data_url: ``s3://`` URL of ``model.tar.gz`` (uploaded now or later).
        instance_type: SageMaker hosting type.
        image_uri: the serving image; default the AWS PyTorch inference DLC of the instance.
        torch_version: the DLC's PyTorch version (without ``image_uri``).
        name: model, endpoint config and endpoint name; default :func:`resource_name`.
        tags: extra tags (``project=pt2aws`` and the creation time are always set).
        environment: container environment on top of :func:`endpoint_environment`'s.
        autoscaling: target tracking to attach once ``InService``; None: one instance.
        network_isolation: ``EnableNetworkIsolation`` on the model.

    Raises:
        pt2aws.aws.images.ImageSelectionError: see :func:`pt2aws.aws.images.inference_image_uri`.
        pt2aws.aws.session.RoleError: the session has no execution role.
        ValueError: an invalid resource name.
    """
    check_instance_type(instance_type)
    image_uri = image_uri or inference_image_uri(session.region, torch_version, instance_type)
    if is_aws_dlc(image_uri):
        check_image_matches_instance(image_uri, instance_type)
    name = check_name(name or resource_name())
    requests = hosting_requests(
        name,
        model_data_url=model_data_url,
        role_arn=session.require_role(),
        image_uri=image_uri,
        instance_type=instance_type,
        environment={**endpoint_environment(instance_type), **(environment or {})},
        tags=resource_tags(tags),
        instance_count=autoscaling.min_instances if autoscaling else 1,
        network_isolation=network_isolation,
    )
    return Deployment(session=session, name=name, requests=requests, autoscaling=autoscaling)


@contextlib.contextmanager
def deployed_endpoint(
    session: AwsSession,
    model_data_url: str,
    *,
    wait_timeout_s: int = 1800,
    poll_s: float | None = None,
    progress: bool = False,
    **kwargs,
):
    """Create model, endpoint config and endpoint; yield the :class:`Deployment`; always delete.

    Image and instance are checked before any AWS call. Clean-up runs in ``finally``: after
    success, after an exception in the ``with`` body, and after a failure part-way through
    creation (including the autoscaling set-up), so nothing billable is left behind.

    Args:
        session: where to create it.
        model_data_url: ``s3://`` URL of ``model.tar.gz``
            (:func:`pt2aws.aws.artifact.upload_archive`).
        wait_timeout_s: seconds to wait for ``InService``.
        poll_s: seconds between status polls.
        progress: show the wait as a progress bar.
        **kwargs: :func:`new_deployment`'s ``instance_type``, ``image_uri``,
            ``torch_version``, ``name``, ``tags``, ``environment``, ``autoscaling``,
            ``network_isolation``.

    Raises:
        pt2aws.aws.images.ImageSelectionError: see :func:`new_deployment` (before any AWS call).
        pt2aws.aws.DeploymentError, TimeoutError: see
            :func:`wait_for_endpoint`.
    """
    deployment = new_deployment(session, model_data_url, **kwargs)
    try:
        deployment.create(wait_timeout_s=wait_timeout_s, poll_s=poll_s, progress=progress)
        yield deployment
    finally:
        deployment.delete()
