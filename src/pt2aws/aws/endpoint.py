"""Notebook 03's deployment, around the lifecycle it shows: the image, the record, the lines.

Notebook 03 sends the SageMaker requests itself, one call per step (upload, ``CreateModel``,
``CreateEndpointConfig``, ``CreateEndpoint``, wait, ``InvokeEndpoint``, delete in ``finally``),
as SageMaker's own examples do; the requests come from :func:`pt2aws.aws.hosting.new_deployment`.
This module holds what surrounds those calls:

* :func:`choose_image`: the serving image for the instance, checked before any AWS call;
* :func:`serving_environment`: the container environment of that image;
* :func:`deployment_record`: what the run folder keeps (``deploy/deploy.json``), and
  :func:`format_record`, the lines the notebook prints;
* :func:`kept_endpoint`: what a kept endpoint costs per hour and the command that deletes it.
"""

from __future__ import annotations

from pt2aws.aws import hosting
from pt2aws.aws.image_support import reported_by_caller
from pt2aws.aws.images import (
    INFERENCE_TORCH_VERSION,
    check_custom_image_uri,
    check_image_matches_instance,
    check_instance_type,
    inference_image_support,
    inference_image_uri,
)

#: The images a deployment can use (issue 12): the AWS PyTorch inference DLC, or the project's
#: own serving image pushed to the user's ECR repository (``container/``).
IMAGE_CHOICES = ("dlc", "custom")


def choose_image(
    image: str,
    region: str,
    instance_type: str,
    *,
    image_uri: str = "",
    torch_version: str = INFERENCE_TORCH_VERSION,
    network_isolation: bool = False,
) -> dict:
    """The serving image for ``instance_type`` in ``region``, checked offline.

    Args:
        image: ``"dlc"`` (the AWS PyTorch inference DLC; past its end of patch, it warns) or
            ``"custom"`` (the project's image in your ECR repository: ``image_uri``).
        region: the endpoint's region.
        instance_type: SageMaker hosting type, e.g. ``"ml.c7g.xlarge"``.
        image_uri: ``dlc``: an explicit DLC (checked against the instance's architecture), empty
            for the one of ``instance_type`` and ``torch_version``; ``custom``: required,
            ``<account>.dkr.ecr.<region>.amazonaws.com/<repository>:<tag>``.
        torch_version: PyTorch version of the AWS inference DLC.
        network_isolation: ``EnableNetworkIsolation`` wanted (only with ``custom``: the DLC
            pip-installs ``code/requirements.txt`` when it starts, which then fails).

    Returns:
        ``{"image", "image_uri", "support"}``; ``support`` says the image's patch support
        (``{"message", ...}``).

    A DLC past its end of patch is not warned about here (:class:`ImageSupportWarning`):
    ``support["message"]`` says so, and the caller prints it once (notebook 03, the CLI).

    Raises:
        pt2aws.aws.images.ImageSelectionError: an instance type SageMaker hosting does not offer,
            an image for the other architecture, a malformed custom image URI.
        ValueError: an unknown image choice, network isolation with the DLC.
    """
    check_instance_type(instance_type)
    if image not in IMAGE_CHOICES:
        raise ValueError(f"image must be one of {IMAGE_CHOICES}, not {image!r}")
    if image == "custom":
        check_custom_image_uri(image_uri, region)
        support = {
            "image": "custom",
            "message": "your own image: rebuild and push it to pick up security fixes",
        }
        return {"image": image, "image_uri": image_uri, "support": support}
    if network_isolation:
        raise ValueError(
            "network isolation needs IMAGE='custom': the AWS PyTorch DLC pip-installs "
            "code/requirements.txt (transformers) when it starts, which fails without "
            "network; the project's own image installs everything at build time"
        )
    with reported_by_caller():  # ``support["message"]`` carries the notice; the caller prints it
        uri = image_uri or inference_image_uri(region, torch_version, instance_type)
        check_image_matches_instance(uri, instance_type)
        try:
            support = inference_image_support(region, torch_version, instance_type)
        except KeyError:
            support = {"image": "dlc", "message": "no support data for this DLC"}
    return {"image": image, "image_uri": uri, "support": support}


def serving_environment(image: str, instance_type: str, max_batch: int = 64) -> dict[str, str]:
    """The container environment (:func:`pt2aws.aws.hosting.endpoint_environment`); the
    project's image also gets ``PT2AWS_VARIANT=auto`` (the fastest variant on the instance
    among those the archive records as keeping 99% agreement; the AWS DLC serves fp32)."""
    env = hosting.endpoint_environment(instance_type, max_batch=max_batch)
    if image == "custom":
        env["PT2AWS_VARIANT"] = "auto"
    return env


def format_requests(requests: dict[str, dict]) -> str:
    """The ``Create*`` requests one line per field (the notebook shows them before sending)."""
    import json

    lines = []
    for operation, request in requests.items():
        lines.append(f"{operation}:")
        for key, value in request.items():
            if key == "Tags":
                value = {t["Key"]: t["Value"] for t in value}
            lines.append(f"  {key}: {json.dumps(value)}")
    return "\n".join(lines)


def kept_endpoint(session, name: str, instance_type: str, instance_count: int = 1) -> dict:
    """What a kept endpoint costs and how to delete it.

    Returns:
        ``{"usd_per_hour": float | None, "usd_per_day", "price", "cleanup_command"}``: the
        catalog's hosting price (:func:`pt2aws.sizing.pricing.price`, its status in words) x
        instances, and the exact ``pt2aws cleanup`` command for this endpoint.
    """
    from pt2aws.sizing import pricing

    price = pricing.price(instance_type, "hosting", session.region)
    hourly = price.usd_per_hour * instance_count if price else None
    return {
        "usd_per_hour": hourly,
        "usd_per_day": hourly * 24 if hourly is not None else None,
        "price": price.describe() if price else "no hosting price in pt2aws/sizing/instances.json",
        "cleanup_command": f"pt2aws cleanup --prefix {name} --region {session.region} --yes",
    }


def deployment_record(
    session,
    deployment: hosting.Deployment,
    *,
    image: dict,
    archive: dict,
    local_predictions: list[dict],
    deployed: bool,
    answer: list[dict] | None = None,
    load_test: dict | None = None,
    deleted: list | None = None,
    model_data_deleted: bool = False,
    left: dict | None = None,
    kept: dict | None = None,
) -> dict:
    """The record of one deployment (``deploy/deploy.json``; ``summary.md`` reads it).

    Args:
        session: where it ran.
        deployment: its requests (:func:`pt2aws.aws.hosting.new_deployment`).
        image: :func:`choose_image`'s answer.
        archive: :func:`pt2aws.aws.artifact.validate_archive`'s answer.
        local_predictions: the in-process handler's answer for the same texts.
        deployed: whether the requests were sent (False: ``DEPLOY`` off on AWS).
        answer: the endpoint's predictions (None when it failed or was not deployed).
        load_test: :func:`pt2aws.aws.invoke.load_test`'s answer, if it ran.
        deleted: ``(kind, name)`` pairs the clean-up deleted.
        model_data_deleted: whether the uploaded ``model.tar.gz`` was deleted.
        left: :func:`pt2aws.aws.session.billable_resources` with the run's name, after clean-up.
        kept: :func:`kept_endpoint` when the endpoint was kept on purpose, else None.

    Returns:
        A JSON-ready dict: ``target, region, instance_type, image, image_uri, image_support,
        network_isolation, role_arn, archive_bytes, archive_valid, endpoint_name,
        model_data_url, requests, deployed, local_predictions, answer, answer_source,
        matches_local, load_test, created, deleted, model_data_deleted, left, resources_left,
        kept``; ``matches_local`` is None without an answer; ``resources_left`` counts what
        still carries the run's name (0 after a clean run; the endpoint's three resources when
        kept).
    """
    import json

    left = left or {}
    matches = None
    if answer is not None:
        matches = [a["label"] for a in answer] == [p["label"] for p in local_predictions]
    record = {
        "target": session.target,
        "region": session.region,
        "instance_type": deployment.instance_type,
        "image": image["image"],
        "image_uri": deployment.image_uri,
        "image_support": image["support"],
        "network_isolation": deployment.requests["CreateModel"]["EnableNetworkIsolation"],
        "role_arn": deployment.requests["CreateModel"]["ExecutionRoleArn"],
        "archive_bytes": archive["bytes"],
        "archive_valid": True,
        "endpoint_name": deployment.name,
        "model_data_url": deployment.model_data_url,
        "requests": deployment.requests,
        "deployed": deployed,
        "local_predictions": local_predictions,
        "answer": answer,
        "answer_source": session.answered_by(deployment.name) if deployed else "not deployed",
        "matches_local": matches,
        "load_test": load_test,
        "deleted": [list(pair) for pair in deleted or []],
        "model_data_deleted": model_data_deleted,
        "left": left,
        "resources_left": sum(len(v) for v in left.values()),
        "kept": kept,
    }
    return json.loads(json.dumps(record))


def format_record(record: dict) -> str:
    """The lines notebook 03 prints after the lifecycle: what answered, what was deleted."""
    if not record["deployed"]:
        return (
            f"{record['target']} ({record['region']}): not deployed (DEPLOY is off); the requests "
            "above are what would be sent"
        )
    lines = [
        f"answer ({record['answer_source']}): {record['answer']}",
        f"matches the in-process handler: {record['matches_local']}",
    ]
    load = record.get("load_test")
    if load:
        latency = load["latency_ms"] or {}
        lines.append(
            f"load test: {load['requests']} requests ({load['errors']} failed) in "
            f"{load['seconds']:.1f} s, {load['concurrency']} in flight: "
            f"{load['throughput_per_s']:.1f} inferences/s, p50 {latency.get('p50', 0):.1f} ms, "
            f"p90 {latency.get('p90', 0):.1f} ms (of {load['requests']} calls)"
        )
    lines.append(
        f"deleted {record['deleted']}; S3 model deleted: {record['model_data_deleted']}; "
        f"resources left with this name: {record['resources_left']}"
    )
    kept = record.get("kept")
    if kept:
        cost = "unknown" if kept["usd_per_hour"] is None else f"{kept['usd_per_hour']:.4f} USD/h"
        lines += [
            f"KEPT: {record['endpoint_name']} costs {cost} until deleted ({kept['price']})",
            f"delete it with: {kept['cleanup_command']}",
        ]
    return "\n".join(lines)
