"""Deploy ``model.tar.gz`` to a SageMaker real-time endpoint, invoke it, and delete everything.

:func:`deploy_on` is what notebook 03 calls: on ``"emulator"`` (a local moto server; the
predictions come from the real serving stack on 127.0.0.1) or ``"aws"`` (your account, billed),
it validates the archive, picks and checks the image before any AWS call, uploads the archive
(SSE-S3), creates model, endpoint config and endpoint, classifies a few texts, deletes what it
created in ``finally`` and checks that nothing with the run's name is left. The resources
themselves are :class:`pt2aws.aws.hosting.Deployment`; :func:`sagemaker_requests` shows the
requests a deployment with the same :class:`DeploySettings` sends.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pt2aws.aws import artifact, hosting
from pt2aws.aws.autoscaling import AutoScaling
from pt2aws.aws.images import (
    DEFAULT_INSTANCE_TYPE,
    INFERENCE_TORCH_VERSION,
    check_custom_image_uri,
    check_image_matches_instance,
    check_instance_type,
    inference_image_support,
    inference_image_uri,
)
from pt2aws.aws.invoke import DEFAULT_MAX_PAYLOAD_BYTES, REALTIME_PAYLOAD_LIMIT_BYTES, load_test
from pt2aws.aws.session import (
    billable_resources,
    check_name,
    default_bucket,
    resource_name,
    resource_tags,
)
from pt2aws.standins.aws_emulator import (
    aws_target,
    execution_role,
    local_model_server,
    target_region,
)

logger = logging.getLogger(__name__)


#: The images a deployment can use (issue 12): the AWS PyTorch inference DLC, or the project's
#: own serving image pushed to the user's ECR repository (``container/``).
IMAGE_CHOICES = ("dlc", "custom")


@dataclass
class DeploySettings:
    """What to deploy where: instance, image, account settings and limits (validated offline).

    Attributes:
        instance_type: SageMaker hosting type (default ``ml.c7g.xlarge``: Graviton3, 4 vCPUs).
        image: ``"dlc"`` (the AWS PyTorch inference DLC; past its end of patch, it warns) or
            ``"custom"`` (the project's own image in your ECR repository: ``image_uri``).
        image_uri: ``dlc``: an explicit DLC, empty for the one of ``instance_type`` and
            ``torch_version``; ``custom``: required, ``<account>.dkr.ecr.<region>.amazonaws.com/
            <repository>:<tag>`` built for the instance's architecture.
        torch_version: PyTorch version of the AWS inference DLC.
        network_isolation: ``EnableNetworkIsolation`` on the model: the container gets no
            network at all. Only with ``image="custom"``: the DLC pip-installs
            ``code/requirements.txt`` (transformers) when it starts, which then fails.
        region: AWS region; empty: the session's (the emulator's is ``us-east-1``).
        role_arn: SageMaker execution role; required on ``"aws"``.
        bucket: S3 bucket for the archive; empty: ``sagemaker-<region>-<account>``.
        keep_model_data: keep the uploaded ``model.tar.gz`` in S3 after the clean-up.
        name_prefix: prefix of the timestamped resource name.
        max_batch: texts per request the handler accepts (``PT2AWS_MAX_BATCH``).
        max_payload_bytes: bytes per request the client sends (SageMaker's limit: 6 MB).
        wait_timeout_s: seconds to wait for ``InService``.
        autoscaling: target-tracking autoscaling; None: one instance, no autoscaling.
        load_test_requests: requests of the bounded load test after the first answer; 0: none.
        load_test_seconds: the load test stops after this many seconds at the latest.
        tags: extra resource tags (``project=pt2aws`` and ``pt2aws:created-at`` are always set).
        progress: show the wait as a progress bar.

    Raises:
        pt2aws.aws.images.ImageSelectionError: an instance type SageMaker hosting does not offer,
            a malformed custom image URI.
        ValueError: an unknown image choice, network isolation with the DLC, a name prefix
            SageMaker names do not allow, limits out of range.
    """

    instance_type: str = DEFAULT_INSTANCE_TYPE
    image: str = "dlc"
    image_uri: str = ""
    torch_version: str = INFERENCE_TORCH_VERSION
    network_isolation: bool = False
    region: str = ""
    role_arn: str = ""
    bucket: str = ""
    keep_model_data: bool = False
    name_prefix: str = "pt2aws"
    max_batch: int = 64
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    wait_timeout_s: int = 1800
    autoscaling: AutoScaling | None = None
    load_test_requests: int = 0
    load_test_seconds: float = 60.0
    tags: dict[str, str] = field(default_factory=dict)
    progress: bool = True

    def __post_init__(self):
        check_instance_type(self.instance_type)
        check_name(f"{self.name_prefix}-20261201-000000")
        if self.image not in IMAGE_CHOICES:
            raise ValueError(f"image must be one of {IMAGE_CHOICES}, not {self.image!r}")
        if self.image == "custom":
            check_custom_image_uri(self.image_uri, self.region or None)
        elif self.network_isolation:
            raise ValueError(
                "network_isolation needs image='custom': the AWS PyTorch DLC pip-installs "
                "code/requirements.txt (transformers) when it starts, which fails without "
                "network; the project's own image installs everything at build time"
            )
        if not 0 < self.max_payload_bytes <= REALTIME_PAYLOAD_LIMIT_BYTES:
            raise ValueError(
                f"max_payload_bytes {self.max_payload_bytes:,} must be in 1 .. "
                f"{REALTIME_PAYLOAD_LIMIT_BYTES:,} (SageMaker's real-time limit)"
            )
        if self.max_batch < 1 or self.wait_timeout_s <= 0 or self.load_test_requests < 0:
            raise ValueError("need max_batch >= 1, wait_timeout_s > 0, load_test_requests >= 0")

    def environment(self) -> dict[str, str]:
        """The container environment (:func:`pt2aws.aws.hosting.endpoint_environment`); the
        project's image also gets ``PT2AWS_VARIANT=auto`` (the fastest variant on the instance
        among those the archive records as keeping 99% agreement; the AWS DLC serves fp32)."""
        env = hosting.endpoint_environment(self.instance_type, max_batch=self.max_batch)
        if self.image == "custom":
            env["PT2AWS_VARIANT"] = "auto"
        return env

    def resolve_image_uri(self, region: str) -> str:
        """The image to deploy in ``region``, checked against the instance (no AWS call).

        Warns:
            pt2aws.aws.image_support.ImageSupportWarning: a DLC past its end of patch.

        Raises:
            pt2aws.aws.images.ImageSelectionError: see :func:`pt2aws.aws.images.inference_image_uri`
                and :func:`pt2aws.aws.images.check_custom_image_uri`.
        """
        if self.image == "custom":
            check_custom_image_uri(self.image_uri, region)
            return self.image_uri
        uri = self.image_uri or inference_image_uri(region, self.torch_version, self.instance_type)
        check_image_matches_instance(uri, self.instance_type)
        return uri

    def image_support(self, region: str) -> dict:
        """Patch support of the chosen image, for the record (no warning)."""
        if self.image == "custom":
            return {
                "image": "custom",
                "message": "your own image: rebuild and push it to pick up security fixes",
            }
        try:
            return inference_image_support(region, self.torch_version, self.instance_type)
        except KeyError:
            return {"image": "dlc", "message": "no support data for this DLC"}


def sagemaker_requests(
    settings: DeploySettings,
    region: str,
    *,
    name: str = "pt2aws-<timestamp>",
    model_data_url: str = "s3://<bucket>/pt2aws/<name>/model.tar.gz",
    role_arn: str = "arn:aws:iam::<account>:role/<sagemaker-execution-role>",
) -> dict[str, dict]:
    """The ``CreateModel`` / ``CreateEndpointConfig`` / ``CreateEndpoint`` requests that
    :func:`deploy_on` sends for ``settings`` (placeholders for what only the run knows).

    Returns:
        See :func:`pt2aws.aws.hosting.hosting_requests`.

    Raises:
        pt2aws.aws.images.ImageSelectionError: see :meth:`DeploySettings.resolve_image_uri`.
    """
    return hosting.hosting_requests(
        name,
        model_data_url=model_data_url,
        role_arn=settings.role_arn or role_arn,
        image_uri=settings.resolve_image_uri(region),
        instance_type=settings.instance_type,
        environment=settings.environment(),
        tags=resource_tags(settings.tags),
        instance_count=settings.autoscaling.min_instances if settings.autoscaling else 1,
        network_isolation=settings.network_isolation,
    )


#: ``local_server(archive, workdir)`` -> a context manager yielding a started server with ``.url``.
LocalServer = Callable[[Path, Path], contextlib.AbstractContextManager]


def _start_answerer(stack, archive: Path, workdir: Path, local_server, settings: DeploySettings):
    """Start the emulator's model server; returns ``(invocations_url or None, answer_source)``.

    The server is the one the chosen image runs: ``dlc``: the SageMaker PyTorch toolkit +
    TorchServe (needs Java); ``custom``: the project's Starlette/uvicorn server
    (:mod:`pt2aws.serving.server`, what ``container/Dockerfile`` starts). ``local_server`` may
    also be a callable ``(archive, workdir) -> context manager yielding a server with .url``.
    """
    if callable(local_server):
        server = stack.enter_context(local_server(archive, workdir))
        name = getattr(local_server, "__name__", type(local_server).__name__)
        return f"{server.url}/invocations", f"local server ({name})"
    kind = "asgi" if settings.image == "custom" else "torchserve"
    if kind == "asgi":
        from pt2aws.standins.asgi_local import AsgiEndpoint as endpoint_class
    else:
        from pt2aws.standins.torchserve import LocalEndpoint as endpoint_class
    missing = endpoint_class.missing() if local_server else "local_server=False"
    if missing:
        logger.warning("local model server skipped (%s): the emulator replays the handler", missing)
        return None, f"replayed handler output ({missing})"
    server = stack.enter_context(
        local_model_server(
            archive, workdir, env={"PT2AWS_MAX_BATCH": str(settings.max_batch)}, server=kind
        )
    )
    logger.info("model server %s up in %.1f s", server.url, server.startup_s)
    source = {
        "torchserve": "local serving stack (SageMaker PyTorch toolkit + TorchServe)",
        "asgi": "local serving image server (pt2aws.serving.server, Starlette + uvicorn)",
    }[kind]
    return f"{server.url}/invocations", source


def deploy_on(
    target: str,
    archive: str | Path,
    settings: DeploySettings | None = None,
    *,
    texts: list[str],
    local_predictions: list[dict] | None = None,
    workdir: str | Path | None = None,
    local_server: bool | LocalServer = True,
) -> dict:
    """Deploy ``archive`` on ``target``, classify ``texts`` through the endpoint, delete it all.

    Order: archive layout checked, image and instance checked, role checked (all before any AWS
    call); then upload (SSE-S3), model, endpoint config, endpoint (and autoscaling), one
    prediction call, and in ``finally`` the deletion and a listing of what is left with this
    run's name. An exception is re-raised after the clean-up.

    Args:
        target: ``"emulator"`` (local moto server, no cost) or ``"aws"`` (your account, billed).
        archive: ``model.tar.gz`` (:func:`pt2aws.aws.artifact.package`).
        settings: instance, image, role, region, limits; default :class:`DeploySettings`.
        texts: texts to classify through the endpoint.
        local_predictions: the in-process handler's answer for ``texts``; default computed here
            (:func:`pt2aws.aws.artifact.smoke_test_archive`).
        workdir: emulator only: folder for the local model server's files; default
            ``<archive folder>/serve``.
        local_server: emulator only: who answers ``InvokeEndpoint``. ``True``: the SageMaker
            PyTorch serving stack on 127.0.0.1 (needs Java; without it the handler's own answer
            is replayed, and ``answer_source`` says so); ``False``: replay; a callable
            ``(archive, workdir) -> context manager yielding a server with .url``: that server
            (e.g. the project's own serving image).

    Returns:
        ``{"target", "region", "instance_type", "image", "image_uri", "image_support",
        "network_isolation", "role_arn", "archive_bytes", "archive_valid", "local_predictions",
        "endpoint_name", "model_data_url", "requests", "answer", "answer_source",
        "matches_local", "load_test", "created", "deleted", "model_data_deleted",
        "resources_left", "left"}``: ``requests`` are the three ``Create*`` requests as sent;
        ``load_test`` (:func:`pt2aws.aws.invoke.load_test`) only with ``load_test_requests``
        and a server that answers (AWS, or the emulator with a local server); ``resources_left``
        counts the SageMaker resources still carrying the run's name (0 after a clean run);
        ``answer`` and ``matches_local`` are missing when the deployment failed.

    Raises:
        pt2aws.aws.artifact.ArchiveError: the archive breaks the SageMaker layout.
        pt2aws.aws.images.ImageSelectionError: no image fits the instance.
        pt2aws.standins.aws_emulator.RoleError: ``"aws"`` without a role.
        botocore.exceptions.ClientError, pt2aws.aws.hosting.DeploymentError, TimeoutError: AWS
            refused or the endpoint failed (after the clean-up).
    """
    settings = settings or DeploySettings()
    archive = Path(archive)
    result = _checked_plan(target, archive, settings, texts, local_predictions)
    with contextlib.ExitStack() as stack:
        invocations_url = None
        if target == "emulator":
            workdir = Path(workdir) if workdir else archive.parent / "serve"
            invocations_url, result["answer_source"] = _start_answerer(
                stack, archive, workdir, local_server, settings
            )
        emulator = stack.enter_context(aws_target(target, result["region"], invocations_url))
        _deploy_predict_delete(result, archive, settings, texts, emulator, invocations_url)
    return result


def _checked_plan(
    target: str, archive: Path, settings: DeploySettings, texts: list[str], local_predictions
) -> dict:
    """Every check that needs no AWS call; the start of :func:`deploy_on`'s result."""
    check = artifact.validate_archive(archive, smoke_test=False)
    if local_predictions is None:
        local_predictions = artifact.smoke_test_archive(archive, texts)
    region = target_region(target, settings.region)
    return {
        "target": target,
        "region": region,
        "instance_type": settings.instance_type,
        "image": settings.image,
        "image_uri": settings.resolve_image_uri(region),
        "image_support": settings.image_support(region),
        "network_isolation": settings.network_isolation,
        "role_arn": execution_role(target, settings.role_arn),
        "archive_bytes": check["bytes"],
        "archive_valid": True,
        "local_predictions": local_predictions,
        "endpoint_name": resource_name(settings.name_prefix),
        "answer_source": "SageMaker endpoint",
    }


def _deploy_predict_delete(result, archive, settings, texts, emulator, invocations_url) -> None:
    """Upload, create, predict (and load-test); in ``finally`` clean up (into ``result``)."""
    name, region = result["endpoint_name"], result["region"]
    deployment, succeeded = None, False
    try:
        bucket = settings.bucket or default_bucket(region)
        key = f"pt2aws/{name}/model.tar.gz"
        result["model_data_url"] = artifact.upload_archive(archive, bucket, key, region)
        deployment = hosting.new_deployment(
            result["model_data_url"],
            role_arn=result["role_arn"],
            region=region,
            instance_type=settings.instance_type,
            image_uri=result["image_uri"],
            name=name,
            tags=settings.tags,
            environment=settings.environment(),
            autoscaling=settings.autoscaling,
            network_isolation=settings.network_isolation,
        )
        result["requests"] = deployment.requests
        deployment.create(wait_timeout_s=settings.wait_timeout_s, progress=settings.progress)
        if emulator and not invocations_url:
            emulator.queue_endpoint_result(json.dumps(result["local_predictions"]))
        answer = deployment.predict(texts, max_payload_bytes=settings.max_payload_bytes)
        result["answer"] = answer
        expected = [p["label"] for p in result["local_predictions"]]
        result["matches_local"] = [a["label"] for a in answer] == expected
        if settings.load_test_requests and (invocations_url or not emulator):
            result["load_test"] = load_test(
                deployment.client(max_payload_bytes=settings.max_payload_bytes),
                texts,
                max_requests=settings.load_test_requests,
                max_seconds=settings.load_test_seconds,
                concurrency=int(deployment.environment["SAGEMAKER_MODEL_SERVER_WORKERS"]),
            )
        succeeded = True
    finally:
        _clean_up(result, deployment, settings, succeeded)


def _clean_up(result: dict, deployment, settings: DeploySettings, succeeded: bool) -> None:
    """Delete the endpoint's resources and (unless kept) the S3 model; list what is left."""
    name, region = result["endpoint_name"], result["region"]
    result["created"] = [list(pair) for pair in deployment.created] if deployment else []
    result["deleted"] = [list(pair) for pair in (deployment.delete() if deployment else [])]
    result["model_data_deleted"] = False
    if "model_data_url" in result and not settings.keep_model_data:
        result["model_data_deleted"] = artifact.delete_uploaded(result["model_data_url"], region)
    result["left"] = billable_resources(prefix=name, region=region)
    result["resources_left"] = sum(len(v) for v in result["left"].values())
    if not succeeded:
        logger.warning(
            "deploy failed; clean-up deleted %s, %d resources left with the name %s: %s",
            result["deleted"],
            result["resources_left"],
            name,
            result["left"],
        )


def format_result(result: dict) -> str:
    """Lines a notebook prints after :func:`deploy_on`: where, what answered, what was deleted."""
    lines = [
        f"target {result['target']} ({result['region']}): {result['instance_type']}",
        f"image ({result['image']}) {result['image_uri']}",
        f"  {result['image_support']['message']}",
        f"model data {result.get('model_data_url', 'not uploaded')}",
        f"created {result['created']}",
        f"answer ({result['answer_source']}): {result.get('answer')}",
        f"matches the in-process handler: {result.get('matches_local')}",
    ]
    load = result.get("load_test")
    if load:
        latency = load["latency_ms"] or {}
        lines.append(
            f"load test: {load['requests']} requests ({load['errors']} failed) in "
            f"{load['seconds']:.1f} s, {load['concurrency']} in flight: "
            f"{load['throughput_per_s']:.1f} inferences/s, p50 {latency.get('p50', 0):.1f} ms, "
            f"p99 {latency.get('p99', 0):.1f} ms"
        )
    lines += [
        f"deleted {result['deleted']}; S3 model deleted: {result['model_data_deleted']}",
        f"resources left with this name: {result['resources_left']}",
    ]
    return "\n".join(lines)
