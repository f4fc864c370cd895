"""Notebook 00's EC2 route against the local AWS emulator (moto over HTTP): the launch plan (SSM,
EC2 dry run, images), then the commands that train inside the AWS training DLC, sent through SSM
Run Command to an emulated instance; the run folder comes back like a SageMaker job's."""

from __future__ import annotations

import dataclasses
import os
import shlex
import subprocess
import warnings

import pytest
from support.emulator import seed_training_output

from pt2aws.aws import images, training_job
from pt2aws.aws.images import ImageSupportWarning, TrainingImageError
from pt2aws.config import TrainConfig
from pt2aws.emulator import server as aws_emulator
from pt2aws.emulator.server import Emulator
from pt2aws.lessons import ec2
from pt2aws.train.loop import parse_args

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
    assert ec2.lookup_ami(session, DLAMI) == "ami-0123456789abcdef0"
    assert ec2.lookup_ami(session, images.dlami_parameter("c7g.xlarge")).startswith("ami-")
    with pytest.raises(ec2.LaunchPlanError, match="not found"):
        ec2.lookup_ami(session, images.dlami_parameter("g5.xlarge", "1.0"))
    request = ec2.run_instances_request("p4d.24xlarge", "ami-0123456789abcdef0")
    assert request["InstanceType"] == "p4d.24xlarge" and request["MinCount"] == 1
    result = ec2.dry_run(session, request)
    assert result == {
        "would_succeed": True,
        "code": "DryRunOperation",
        "message": result["message"],
    }
    plan = ec2.launch_plan("p4d.24xlarge", 1, session=session)
    assert plan["target"] == "emulator" and plan["ec2"]["ami_id"] == "ami-0123456789abcdef0"
    assert plan["ec2"]["dry_run"]["would_succeed"] is True
    assert "pytorch-training:2.10.0-gpu-py313" in plan["sagemaker_training"]["training_image"]
    assert "pytorch-inference-arm64" in plan["sagemaker_endpoint"]["image_uri"]
    assert plan["sagemaker_endpoint"]["environment"]["DNNL_DEFAULT_FPMATH_MODE"] == "BF16"
    text = ec2.format_launch_plan(plan)
    assert "Launch plan: 1 x p4d.24xlarge" in text and "\n  DLAMI: SSM parameter" in text
    cpu = ec2.format_launch_plan(ec2.launch_plan("c7i.xlarge", 1, session=session))
    assert "AMI (a CPU job needs no DLAMI): SSM parameter" in cpu and "DLAMI:" not in cpu
    # the plan prints each image's patch support itself: no warning repeats a notice
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        arm = ec2.format_launch_plan(ec2.launch_plan("c7g.xlarge", 1, session=session))
    assert "pytorch-inference-arm64 2.6: patch support ended" in arm
    assert [w for w in caught if issubclass(w.category, ImageSupportWarning)] == []


def test_run_instances_request_validation():
    with pytest.raises(ec2.LaunchPlanError, match="InstanceType"):
        ec2.run_instances_request("x9.bogus", "ami-1")
    multi = ec2.run_instances_request("p5.48xlarge", "ami-1", count=2)
    assert multi["NetworkInterfaces"][0]["InterfaceType"] == "efa"
    assert multi["NetworkInterfaces"][0]["SubnetId"] == "subnet-REPLACE"  # the reader's subnet
    assert multi["Placement"]["GroupName"] == "pt2aws-train-cluster" and multi["MaxCount"] == 2
    assert (
        ec2.run_instances_request("trn1.2xlarge", "ami-1")["BlockDeviceMappings"][0]["DeviceName"]
        == "/dev/sda1"
    )


def test_images_per_instance_kind():
    def training_image(instance_type):
        return ec2.launch_plan(instance_type)["sagemaker_training"]["training_image"]

    assert "pytorch-training:2.10.0-cpu-py313" in training_image("c7i.xlarge")
    assert training_image("trn1.32xlarge") is None  # Neuron image
    assert training_image("c7g.xlarge") is None  # not a training type
    serve = ec2.launch_plan("c7i.xlarge", serve_instance="m7g.xlarge")["sagemaker_endpoint"]
    assert serve["image_uri"] is None and serve["instance_type"] == "ml.m7g.xlarge"


def test_a_multi_node_plan_says_how_the_nodes_meet():
    plan = ec2.launch_plan("p4d.24xlarge", 2)
    assert (
        plan["ec2"]["request"]["MinCount"] == 2
        and plan["sagemaker_training"]["instance_count"] == 2
    )
    assert any("--nnodes 2 --node_rank <i>" in step for step in plan["next_steps"])
    assert not any("--nnodes" in step for step in ec2.launch_plan("p4d.24xlarge", 1)["next_steps"])


def test_plan_on_a_started_emulator_and_offline_restores_environment():
    before = os.environ.get("AWS_ENDPOINT_URL")
    session = aws_emulator.start("eu-west-2", model_servers=False)  # a region no test seeded
    try:
        plan = ec2.launch_plan("g6e.xlarge", session=session)  # DLAMIs seeded at start
    finally:
        session.close()
    assert plan["ec2"]["ami_id"] == aws_emulator.PLACEHOLDER_AMI
    assert plan["ec2"]["dry_run"]["code"] == "DryRunOperation"
    assert os.environ.get("AWS_ENDPOINT_URL") == before
    offline = ec2.launch_plan("g6e.xlarge", region="eu-west-1")
    assert offline["ec2"]["ami_id"] is None and offline["ec2"]["dry_run"] is None
    assert (offline["target"], offline["region"]) == ("none", "eu-west-1")


REGISTRY = "763104351884.dkr.ecr.us-east-1.amazonaws.com"
BUNDLE = "s3://bucket/pt2aws-ec2/x/bundle.tar.gz"
OUTPUT = "s3://bucket/pt2aws-ec2/x/output/model.tar.gz"


def _commands(instance_type: str, cfg=None, **kwargs) -> list[str]:
    return ec2.training_commands(
        instance_type,
        cfg or TrainConfig(profile="full"),
        region="us-east-1",
        bundle_s3=BUNDLE,
        output_s3=OUTPUT,
        **kwargs,
    )


def _train_args(commands: list[str]) -> list[str]:
    """The arguments after ``-m pt2aws.train`` in the container's command."""
    (docker,) = [line for line in commands if line.startswith("docker run")]
    inner = shlex.split(docker)[-1]
    train = shlex.split(inner.split(" && ", 1)[1])
    return train[train.index("pt2aws.train") + 1 :]


def test_gpu_instance_runs_torchrun_in_the_dlc_with_gpus_ipc_and_network():
    cfg = TrainConfig(profile="full", bf16="on", max_steps=100)
    commands = _commands("p4d.24xlarge", cfg)
    assert commands[0] == "set -euo pipefail"
    assert f"aws s3 cp {BUNDLE} bundle.tar.gz --region us-east-1" in commands
    assert (
        "aws ecr get-login-password --region us-east-1 | docker login --username AWS "
        f"--password-stdin {REGISTRY}"
    ) in commands
    image = f"{REGISTRY}/pytorch:2.13.0-cu133-amzn2023"
    assert f"docker pull {image}" in commands
    (docker,) = [line for line in commands if line.startswith("docker run")]
    assert docker.startswith(
        "docker run --rm --gpus all --ipc host --network host -v /opt/pt2aws:/workspace "
    )
    assert f" {image} bash -c " in docker and "--privileged" not in docker
    assert "torchrun --nproc_per_node 8 -m pt2aws.train" in docker  # 8 A100s
    assert commands[-1] == f"aws s3 cp model.tar.gz {OUTPUT} --region us-east-1"
    # the container parses exactly this TrainConfig, with its paths inside /workspace
    expected = dataclasses.replace(
        cfg,
        output_dir="/workspace/output/train",
        dataset="/workspace/train/data.jsonl",
        text_column="text",
        label_column="label",
        checkpoint_dir="/workspace/output/checkpoints",
        resume="auto",
        encoding="utf-8",  # the prepared data file is UTF-8 JSON Lines
    )
    assert parse_args(_train_args(commands)) == expected
    script = "\n".join(commands)
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0


def test_cpu_instances_install_docker_and_arm64_has_no_training_dlc():
    cpu = _commands("c7i.xlarge", TrainConfig(profile="smoke"))
    assert any(line.startswith("command -v docker || (dnf install -y docker") for line in cpu)
    (docker,) = [line for line in cpu if line.startswith("docker run")]
    assert "--gpus" not in docker and f"{REGISTRY}/pytorch:2.13.0-cpu-amzn2023" in docker
    assert "torchrun --nproc_per_node 1" in docker
    with pytest.raises(TrainingImageError, match="arm64 CPU instance"):
        _commands("c7g.xlarge")


def test_commands_reach_an_instance_through_ssm_and_the_output_comes_back(
    smoke_train_dir, tmp_path
):
    session = aws_emulator.start(model_servers=False)
    try:
        sent = ec2.run_on(
            session,
            "g5.xlarge",
            TrainConfig(profile="smoke", max_steps=5),
            work_dir=tmp_path / "ec2",
        )
        _check_sent(session, sent)
        # an emulated instance runs nothing: put a run folder where the script would upload it
        seed_training_output(session, sent["output_s3"], smoke_train_dir)
        fetched = training_job.fetch_model(session, sent["output_s3"], tmp_path / "run/train")
    finally:
        session.close()
    assert "model/model.safetensors" in fetched["files"]


def _check_sent(session, sent):
    assert sent["target"] == "emulator"
    assert sent["status"] in ("Pending", "Success")
    assert sent["image_uri"] == f"{REGISTRY}/pytorch:2.13.0-cu133-amzn2023"
    assert sent["bundle_s3"].endswith("/bundle.tar.gz") and sent["output_s3"].endswith(
        "/output/model.tar.gz"
    )
    (instance,) = sent["instance_ids"]
    ssm = session.client("ssm")
    (command,) = ssm.list_commands(CommandId=sent["command_id"])["Commands"]
    assert command["Parameters"]["commands"] == sent["commands"]
    assert command["DocumentName"] == "AWS-RunShellScript"
    assert command["Parameters"]["executionTimeout"] == [str(8 * 3600)]
    invocation = ssm.get_command_invocation(CommandId=sent["command_id"], InstanceId=instance)
    assert invocation["Status"] == "Success"
    bucket, key = sent["bundle_s3"].removeprefix("s3://").split("/", 1)
    assert session.client("s3").head_object(Bucket=bucket, Key=key)


def test_bundle_holds_code_data_and_a_local_model(tmp_path):
    import tarfile

    bundle = ec2.stage_bundle(TrainConfig(profile="local"), tmp_path)
    with tarfile.open(bundle) as tar:
        names = set(tar.getnames())
    assert {"code/pt2aws/train/loop.py", "code/requirements.txt", "train/data.jsonl"} <= names
    assert any(n.startswith("model/") and n.endswith("config.json") for n in names)


def test_aws_needs_instance_ids():
    from pt2aws.aws.session import AwsSession

    with pytest.raises(ValueError, match="needs instance_ids"):
        ec2.run_on(
            AwsSession(region="us-east-1"),
            "p4d.24xlarge",
            TrainConfig(profile="smoke"),
            work_dir="/tmp/x",
        )
