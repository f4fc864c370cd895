"""Target-tracking autoscaling of a SageMaker endpoint variant (Application Auto Scaling).

The metric ``SageMakerVariantInvocationsPerInstance`` is invocations per minute per instance
(AWS docs, "Automatic scaling of Amazon SageMaker AI models"); the cooldowns are those of the
huggingface/notebooks ``13_deploy_and_autoscaling_transformers`` example.
"""

from __future__ import annotations

from dataclasses import dataclass

from pt2aws.aws.session import AwsSession

SCALABLE_DIMENSION = "sagemaker:variant:DesiredInstanceCount"


@dataclass
class AutoScaling:
    """Target-tracking autoscaling settings of an endpoint variant.

    Attributes:
        min_instances: instances the variant never goes below (>= 1).
        max_instances: instances the variant never goes above.
        target_invocations_per_instance: invocations per minute per instance to hold.
        scale_in_cooldown_s: seconds between scale-in steps.
        scale_out_cooldown_s: seconds between scale-out steps.
    """

    min_instances: int = 1
    max_instances: int = 2
    target_invocations_per_instance: float = 600.0
    scale_in_cooldown_s: int = 300
    scale_out_cooldown_s: int = 60

    def __post_init__(self):
        if not 1 <= self.min_instances <= self.max_instances:
            raise ValueError(
                f"need 1 <= min_instances ({self.min_instances}) <= max_instances "
                f"({self.max_instances})"
            )
        if self.target_invocations_per_instance <= 0:
            raise ValueError("target_invocations_per_instance must be > 0 (per minute)")


def scalable_resource_id(endpoint_name: str, variant: str = "AllTraffic") -> str:
    """Application Auto Scaling id of an endpoint variant: ``endpoint/<name>/variant/<variant>``."""
    return f"endpoint/{endpoint_name}/variant/{variant}"


def enable_autoscaling(
    session: AwsSession, endpoint_name: str, config: AutoScaling, variant: str = "AllTraffic"
) -> str:
    """Register the variant as a scalable target and attach a target-tracking policy.

    Returns:
        The scalable target's resource id.
    """
    client = session.client("application-autoscaling")
    resource_id = scalable_resource_id(endpoint_name, variant)
    client.register_scalable_target(
        ServiceNamespace="sagemaker",
        ResourceId=resource_id,
        ScalableDimension=SCALABLE_DIMENSION,
        MinCapacity=config.min_instances,
        MaxCapacity=config.max_instances,
    )
    client.put_scaling_policy(
        PolicyName=f"{endpoint_name}-invocations",
        ServiceNamespace="sagemaker",
        ResourceId=resource_id,
        ScalableDimension=SCALABLE_DIMENSION,
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


def disable_autoscaling(session: AwsSession, endpoint_name: str) -> list[str]:
    """Delete the scaling policies and deregister every scalable variant of ``endpoint_name``.

    Returns:
        The resource ids deregistered.
    """
    client = session.client("application-autoscaling")
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
