"""Launch plan against the local AWS emulator (moto over HTTP): SSM, EC2 dry run, images."""

from __future__ import annotations

import os
import warnings

import pytest

from pt2aws.aws import images
from pt2aws.aws.images import ImageSupportWarning
from pt2aws.emulator import server as aws_emulator
from pt2aws.emulator.server import Emulator
from pt2aws.lessons.ec2 import plan as ec2_plan

DLAMI = "/aws/service/deeplearning/ami/x86_64/oss-nvidia-driver-gpu-pytorch-2.13-amazon-linux-2023/latest/ami-id"


@pytest.fixture(scope="module")
def emulator():
    with Emulator() as em:
        em.seed_public_parameter(DLAMI, "ami-0123456789abcdef0")
        yield em


def test_dlami_parameter_names():
    assert images.dlami_parameter("p4d.24xlarge") == DLAMI
    with pytest.warns(ImageSupportWarning, match="DLAMI PyTorch 2.9"):
        old = images.dlami_parameter("ml.g5.xlarge", "2.9", "ubuntu-24.04")
    assert old == (
        "/aws/service/deeplearning/ami/x86_64/oss-nvidia-driver-gpu-pytorch-2.9-ubuntu-24.04/latest/ami-id"
    )
    assert images.dlami_parameter("c7g.xlarge").endswith("al2023-ami-kernel-default-arm64")
    assert images.dlami_parameter("c7i.xlarge").endswith("al2023-ami-kernel-default-x86_64")
    assert images.dlami_parameter("trn1.32xlarge") == images.NEURON_DLAMI_PARAMETER


def test_ami_lookup_and_dry_run(emulator):
    session = emulator.session()
    assert ec2_plan.lookup_ami(session, DLAMI) == "ami-0123456789abcdef0"
    assert ec2_plan.lookup_ami(session, images.dlami_parameter("c7g.xlarge")).startswith("ami-")
    with pytest.raises(ec2_plan.LaunchPlanError, match="not found"):
        ec2_plan.lookup_ami(session, images.dlami_parameter("g5.xlarge", "1.0"))
    request = ec2_plan.run_instances_request("p4d.24xlarge", "ami-0123456789abcdef0")
    assert request["InstanceType"] == "p4d.24xlarge" and request["MinCount"] == 1
    result = ec2_plan.dry_run(session, request)
    assert result == {
        "would_succeed": True,
        "code": "DryRunOperation",
        "message": result["message"],
    }
    plan = ec2_plan.launch_plan("p4d.24xlarge", 1, session=session)
    assert plan["target"] == "emulator" and plan["ec2"]["ami_id"] == "ami-0123456789abcdef0"
    assert plan["ec2"]["dry_run"]["would_succeed"] is True
    assert "pytorch-training:2.10.0-gpu-py313" in plan["sagemaker_training"]["training_image"]
    assert "pytorch-inference-arm64" in plan["sagemaker_endpoint"]["image_uri"]
    assert plan["sagemaker_endpoint"]["environment"]["DNNL_DEFAULT_FPMATH_MODE"] == "BF16"
    text = ec2_plan.format_launch_plan(plan)
    assert "Launch plan: 1 x p4d.24xlarge" in text and "\n  DLAMI: SSM parameter" in text
    cpu = ec2_plan.format_launch_plan(ec2_plan.launch_plan("c7i.xlarge", 1, session=session))
    assert "AMI (a CPU job needs no DLAMI): SSM parameter" in cpu and "DLAMI:" not in cpu
    # the plan prints each image's patch support itself: no warning repeats a notice
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        arm = ec2_plan.format_launch_plan(ec2_plan.launch_plan("c7g.xlarge", 1, session=session))
    assert "pytorch-inference-arm64 2.6: patch support ended" in arm
    assert [w for w in caught if issubclass(w.category, ImageSupportWarning)] == []


def test_run_instances_request_validation():
    with pytest.raises(ec2_plan.LaunchPlanError, match="InstanceType"):
        ec2_plan.run_instances_request("x9.bogus", "ami-1")
    multi = ec2_plan.run_instances_request("p5.48xlarge", "ami-1", count=2)
    assert multi["NetworkInterfaces"][0]["InterfaceType"] == "efa"
    assert multi["NetworkInterfaces"][0]["SubnetId"] == "subnet-REPLACE"  # the reader's subnet
    assert multi["Placement"]["GroupName"] == "pt2aws-train-cluster" and multi["MaxCount"] == 2
    assert (
        ec2_plan.run_instances_request("trn1.2xlarge", "ami-1")["BlockDeviceMappings"][0][
            "DeviceName"
        ]
        == "/dev/sda1"
    )


def test_images_per_instance_kind():
    def training_image(instance_type):
        return ec2_plan.launch_plan(instance_type)["sagemaker_training"]["training_image"]

    assert "pytorch-training:2.10.0-cpu-py313" in training_image("c7i.xlarge")
    assert training_image("trn1.32xlarge") is None  # Neuron image
    assert training_image("c7g.xlarge") is None  # not a training type
    serve = ec2_plan.launch_plan("c7i.xlarge", serve_instance="m7g.xlarge")["sagemaker_endpoint"]
    assert serve["image_uri"] is None and serve["instance_type"] == "ml.m7g.xlarge"


def test_plan_on_a_started_emulator_and_offline_restores_environment():
    before = os.environ.get("AWS_ENDPOINT_URL")
    session = aws_emulator.start("eu-west-2", model_servers=False)  # a region no test seeded
    try:
        plan = ec2_plan.launch_plan("g6e.xlarge", session=session)  # DLAMIs seeded at start
    finally:
        session.close()
    assert plan["ec2"]["ami_id"] == aws_emulator.PLACEHOLDER_AMI
    assert plan["ec2"]["dry_run"]["code"] == "DryRunOperation"
    assert os.environ.get("AWS_ENDPOINT_URL") == before
    offline = ec2_plan.launch_plan("g6e.xlarge", region="eu-west-1")
    assert offline["ec2"]["ami_id"] is None and offline["ec2"]["dry_run"] is None
    assert (offline["target"], offline["region"]) == ("none", "eu-west-1")
