"""Tests of :mod:`pt2aws.aws.autoscaling`."""

import pytest
from support.emulator import NOTHING, deploy_on_emulator

from pt2aws.aws import autoscaling, session


def test_autoscaling_is_set_and_removed(emulator, model_url):
    scaling = autoscaling.AutoScaling(
        min_instances=1, max_instances=3, target_invocations_per_instance=500
    )
    with deploy_on_emulator(emulator, model_url, "pt2aws-scale", autoscaling=scaling) as d:
        client = emulator.session().client("application-autoscaling")
        (target,) = client.describe_scalable_targets(ServiceNamespace="sagemaker")[
            "ScalableTargets"
        ]
        assert (target["ResourceId"], target["MinCapacity"], target["MaxCapacity"]) == (
            "endpoint/pt2aws-scale/variant/AllTraffic",
            1,
            3,
        )
        (policy,) = client.describe_scaling_policies(ServiceNamespace="sagemaker")[
            "ScalingPolicies"
        ]
        tracking = policy["TargetTrackingScalingPolicyConfiguration"]
        assert policy["PolicyType"] == "TargetTrackingScaling"
        assert tracking["TargetValue"] == 500.0
        assert (
            tracking["PredefinedMetricSpecification"]["PredefinedMetricType"]
            == "SageMakerVariantInvocationsPerInstance"
        )
    assert ("scalable_target", "endpoint/pt2aws-scale/variant/AllTraffic") in d.deleted
    assert client.describe_scaling_policies(ServiceNamespace="sagemaker")["ScalingPolicies"] == []
    assert session.billable_resources(emulator.session()) == NOTHING


def test_autoscaling_config_is_validated():
    with pytest.raises(ValueError, match="min_instances"):
        autoscaling.AutoScaling(min_instances=3, max_instances=2)
    assert autoscaling.scalable_resource_id("e") == "endpoint/e/variant/AllTraffic"
