"""What surrounds notebook 03's SageMaker SDK calls: the container environment, the requests, the
clean-up on any failure (:class:`Cleanup`), autoscaling, the record. Model, endpoint config and
endpoint share one name."""

from __future__ import annotations

import contextlib
import json
import logging
import time

from pt2aws.aws.artifact import delete_uploaded
from pt2aws.aws.invoke import DEFAULT_MAX_ITEMS
from pt2aws.aws.session import AwsSetupError, explain
from pt2aws.inference.runtime import graviton_settings
from pt2aws.sizing.catalog import has_bf16, instance_vcpus, is_graviton
from pt2aws.sizing.pricing import instance_cost

logger = logging.getLogger(__name__)

VARIANT_NAME = "AllTraffic"


class DeploymentError(AwsSetupError):
    """The endpoint did not reach ``InService`` (SageMaker's reason and where the logs are)."""


def endpoint_environment(
    instance_type: str, vcpus: int | None = None, *, image: str = "dlc"
) -> dict[str, str]:
    """The container environment: the handler, one worker per physical core, the Graviton runtime
    settings (:func:`pt2aws.inference.runtime.graviton_settings`), ``PT2AWS_MAX_BATCH``; the
    project's image (``image="custom"``) also ``PT2AWS_VARIANT=auto``."""
    vcpus = vcpus or instance_vcpus(instance_type)
    graviton = is_graviton(instance_type)
    workers = max(1, vcpus if graviton else vcpus // 2)
    runtime = graviton_settings(
        arm64=graviton, bf16=has_bf16(instance_type), vcpus=vcpus, processes=workers
    )["env"]
    env = {
        "SAGEMAKER_PROGRAM": "inference.py", "SAGEMAKER_SUBMIT_DIRECTORY": "/opt/ml/model/code",
        "SAGEMAKER_CONTAINER_LOG_LEVEL": "20", "SAGEMAKER_MODEL_SERVER_WORKERS": str(workers),
        "PT2AWS_MAX_BATCH": str(DEFAULT_MAX_ITEMS), "TOKENIZERS_PARALLELISM": "false",
        **(runtime if graviton else {"OMP_NUM_THREADS": runtime["OMP_NUM_THREADS"]}),
    }  # fmt: skip
    if image == "custom":  # the fastest variant the archive records as keeping 99% agreement
        env["PT2AWS_VARIANT"] = "auto"
    return env


def tags(extra: dict[str, str] | None = None) -> list:
    """``project=pt2aws``, ``pt2aws:created-at=<UTC time>`` and ``extra`` as SDK ``Tag``s."""
    from sagemaker.core.shapes import Tag

    created_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    values = {"project": "pt2aws", "pt2aws:created-at": created_at, **(extra or {})}
    return [Tag(key=k, value=v) for k, v in values.items()]


def requests(name: str, container, variant, *, role_arn: str, network_isolation: bool, tags: list):
    """The ``CreateModel``, ``CreateEndpointConfig``, ``CreateEndpoint`` requests the SDK sends."""
    from sagemaker.core.utils.utils import serialize

    return serialize({
        "CreateModel": {"ModelName": name, "ExecutionRoleArn": role_arn,
                        "PrimaryContainer": container, "EnableNetworkIsolation": network_isolation,
                        "Tags": tags},
        "CreateEndpointConfig": {"EndpointConfigName": name, "ProductionVariants": [variant],
                                 "Tags": tags},
        "CreateEndpoint": {"EndpointName": name, "EndpointConfigName": name, "Tags": tags},
    })  # fmt: skip


def format_requests(sent: dict[str, dict]) -> str:
    """The requests one line per field (tags as ``{key: value}``)."""
    lines = []
    for operation, request in sent.items():
        lines.append(f"{operation}:")
        for key, value in request.items():
            value = {t["Key"]: t["Value"] for t in value} if key == "Tags" else value
            lines.append(f"  {key}: {json.dumps(value)}")
    return "\n".join(lines)


def _scaling_target(name: str) -> dict:
    return {
        "ServiceNamespace": "sagemaker",
        "ResourceId": f"endpoint/{name}/variant/{VARIANT_NAME}",
        "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
    }


def enable_autoscaling(session, endpoint_name: str, *, min_instances=1, max_instances=2) -> str:
    """Target tracking at 600 invocations a minute per instance, scale-in cooldown 300 s, out 60 s
    (AWS docs, "Automatic scaling of Amazon SageMaker AI models"); the variant's id
    ``endpoint/<name>/variant/...``; ``ValueError``: not 1 <= min <= max."""
    if not 1 <= min_instances <= max_instances:
        raise ValueError(
            f"need 1 <= min_instances ({min_instances}) <= max_instances ({max_instances})"
        )
    client, where = session.client("application-autoscaling"), _scaling_target(endpoint_name)
    client.register_scalable_target(MinCapacity=min_instances, MaxCapacity=max_instances, **where)
    client.put_scaling_policy(
        PolicyName=f"{endpoint_name}-invocations", PolicyType="TargetTrackingScaling",
        TargetTrackingScalingPolicyConfiguration={
            "TargetValue": 600.0, "ScaleInCooldown": 300, "ScaleOutCooldown": 60,
            "PredefinedMetricSpecification": {
                "PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"},
        },
        **where,
    )  # fmt: skip
    return where["ResourceId"]


def delete_resources(session, name: str) -> list[tuple[str, str]]:
    """Delete what is called ``name`` (autoscaling first: deregistering deletes its policies),
    skipping what does not exist, logging other errors; the ``(kind, name)`` deleted."""
    from botocore.exceptions import ClientError

    deleted, where = [], _scaling_target(name)
    sm = session.client("sagemaker")
    calls = [
        ("scalable_target", where["ResourceId"],
         session.client("application-autoscaling").deregister_scalable_target, where),
        ("endpoint", name, sm.delete_endpoint, {"EndpointName": name}),
        ("endpoint_config", name, sm.delete_endpoint_config, {"EndpointConfigName": name}),
        ("model", name, sm.delete_model, {"ModelName": name}),
    ]  # fmt: skip
    for kind, what, call, ask in calls:
        try:
            call(**ask)
            deleted.append((kind, what))
        except ClientError as err:  # clean-up goes on
            gone = ("not found", "could not find", "does not exist", "no scalable target")
            if not any(s in str(err).lower() for s in gone):
                logger.error("could not delete %s %s: %s", kind, what, err)
    return deleted


def _explained(session, name: str, err: BaseException) -> Exception | None:
    """One line for a failed step: the endpoint's status and reason after a wait, else explain's."""
    from sagemaker.core.utils.exceptions import WaiterError

    if not isinstance(err, WaiterError):  # FailedStatusError, TimeoutExceededError
        return explain(err, session.region)
    found = session.client("sagemaker").describe_endpoint(EndpointName=name)
    status, reason = found["EndpointStatus"], found.get("FailureReason", "no reason given")
    why = reason if status == "Failed" else "still not InService: raise WAIT_TIMEOUT_S"
    logs = f"CloudWatch /aws/sagemaker/Endpoints/{name}"
    return DeploymentError(f"endpoint {name} is {status}: {why} (logs: {logs})")


class Cleanup(contextlib.AbstractContextManager):
    """Deletes what the deployment ``name`` created (the S3 archive unless ``keep_model_data``) on
    any exception inside ``with cleanup:`` (re-raised as one line where the fix is known) and on
    :meth:`delete`."""

    def __init__(self, session, name: str, model_data_url: str, *, keep_model_data: bool = False):
        self.session, self.name, self.model_data_url = session, name, model_data_url
        self.keep_model_data, self.deleted, self.model_data_deleted = keep_model_data, [], False

    def __exit__(self, kind, err, traceback) -> bool:
        if err is None:
            return False
        try:
            explained = _explained(self.session, self.name, err)
        except Exception:  # noqa: BLE001 - the original error matters more
            explained = None
        self.delete()
        if explained is not None:
            raise explained from err
        return False

    def delete(self, keep_endpoint: bool = False) -> dict:
        """Delete it all (``keep_endpoint``: nothing): ``{"deleted", "model_data_deleted"}``."""
        if not keep_endpoint:
            self.deleted += delete_resources(self.session, self.name)
            if not self.keep_model_data:
                self.model_data_deleted = delete_uploaded(self.session, self.model_data_url)
            logger.info("deleted %s", self.deleted)
        return {"deleted": self.deleted, "model_data_deleted": self.model_data_deleted}


def kept_endpoint(session, name: str, instance_type: str, instance_count: int = 1) -> dict:
    """A kept endpoint's cost per hour and day (catalog price) and the command that deletes it."""
    usd, price = instance_cost(instance_type, "hosting", 1, instance_count, session.region)
    return {
        "usd_per_hour": usd, "usd_per_day": usd * 24 if usd is not None else None,
        "price": price.describe() if price else "no hosting price in pt2aws/sizing/instances.json",
        "cleanup_command": f"pt2aws cleanup --prefix {name} --region {session.region} --yes",
    }  # fmt: skip


def deployment_record(session, sent: dict, *, image: dict, archive: dict, local_predictions,
                      deployed: bool, answer=None, load_test=None, deleted=(),
                      model_data_deleted=False, left=None) -> dict:  # fmt: skip
    """``deploy/deploy.json``, JSON-ready, read from ``sent`` (:func:`requests`; ``image``:
    :func:`~pt2aws.aws.images.serving_image`; ``left``: ``billable_resources`` after clean-up;
    ``kept``: :func:`kept_endpoint` when an endpoint is left)."""
    model, variant = sent["CreateModel"], sent["CreateEndpointConfig"]["ProductionVariants"][0]
    name, left, labels = model["ModelName"], left or {}, [p["label"] for p in local_predictions]
    kept = left.get("endpoints") and kept_endpoint(
        session, name, variant["InstanceType"], variant["InitialInstanceCount"]
    )
    return {
        "target": session.target, "region": session.region,
        "instance_type": variant["InstanceType"],
        "image": image["image"], "image_uri": model["PrimaryContainer"]["Image"],
        "image_support": image["support"],
        "network_isolation": model["EnableNetworkIsolation"],
        "role_arn": model["ExecutionRoleArn"],
        "archive_bytes": archive["bytes"], "archive_valid": True,
        "endpoint_name": name, "model_data_url": model["PrimaryContainer"]["ModelDataUrl"],
        "requests": sent, "deployed": deployed,
        "local_predictions": local_predictions, "answer": answer,
        "answer_source": session.answered_by(name) if deployed else "not deployed",
        "matches_local": None if answer is None else [a["label"] for a in answer] == labels,
        "load_test": load_test,
        "deleted": [list(pair) for pair in deleted], "model_data_deleted": model_data_deleted,
        "left": left, "resources_left": sum(len(v) for v in left.values()),
        "kept": kept or None,
    }  # fmt: skip


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
    if load := record.get("load_test"):
        ms = load["latency_ms"] or {}
        lines.append(
            f"load test: {load['requests']} requests ({load['errors']} failed) in "
            f"{load['seconds']:.1f} s, {load['concurrency']} in flight: "
            f"{load['throughput_per_s']:.1f} inferences/s, p50 {ms.get('p50_ms', 0):.1f} ms, "
            f"p90 {ms.get('p90_ms', 0):.1f} ms"
        )
    lines.append(
        f"deleted {record['deleted']}; S3 model deleted: {record['model_data_deleted']}; "
        f"resources left with this name: {record['resources_left']}"
    )
    if kept := record.get("kept"):
        cost = "unknown" if kept["usd_per_hour"] is None else f"{kept['usd_per_hour']:.4f} USD/h"
        lines += [
            f"KEPT: {record['endpoint_name']} costs {cost} until deleted ({kept['price']})",
            f"delete it with: {kept['cleanup_command']}",
        ]
    return "\n".join(lines)
