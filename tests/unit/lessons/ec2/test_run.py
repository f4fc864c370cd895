"""The EC2 route: the commands that train inside the AWS training DLC, sent through SSM Run
Command to an emulated instance; the run folder comes back like a SageMaker job's."""

from __future__ import annotations

import dataclasses
import shlex
import subprocess

import pytest
from support.emulator import seed_training_output

from pt2aws.aws import training_job
from pt2aws.aws.images import TrainingImageError
from pt2aws.config import TrainConfig
from pt2aws.lessons.ec2 import run as ec2_run
from pt2aws.train.loop import parse_args

REGISTRY = "763104351884.dkr.ecr.us-east-1.amazonaws.com"
BUNDLE = "s3://bucket/pt2aws-ec2/x/bundle.tar.gz"
OUTPUT = "s3://bucket/pt2aws-ec2/x/output/model.tar.gz"


def _commands(instance_type: str, cfg=None, **kwargs) -> list[str]:
    return ec2_run.training_commands(
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


def test_multi_node_efa_and_cpu_variants():
    commands = _commands("p5.48xlarge", nodes=2, head_address="10.0.0.1")
    (docker,) = [line for line in commands if line.startswith("docker run")]
    assert "--privileged -e FI_PROVIDER=efa" in docker
    assert "--nnodes 2 --rdzv_id pt2aws --rdzv_backend c10d --rdzv_endpoint 10.0.0.1:29500" in (
        docker
    )
    with pytest.raises(ValueError, match="head_address"):
        _commands("p5.48xlarge", nodes=2)
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
    from pt2aws.emulator import server as aws_emulator

    session = aws_emulator.start(model_servers=False)
    try:
        sent = ec2_run.run_on(
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
    assert sent["document"] == "AWS-RunShellScript" and sent["status"] in ("Pending", "Success")
    assert sent["image_uri"] == f"{REGISTRY}/pytorch:2.13.0-cu133-amzn2023"
    assert sent["bundle_s3"].endswith("/bundle.tar.gz") and sent["output_s3"].endswith(
        "/output/model.tar.gz"
    )
    (instance,) = sent["instance_ids"]
    ssm = session.client("ssm")
    (command,) = ssm.list_commands(CommandId=sent["command_id"])["Commands"]
    assert command["Parameters"]["commands"] == sent["commands"]
    assert command["Parameters"]["executionTimeout"] == [str(8 * 3600)]
    invocation = ssm.get_command_invocation(CommandId=sent["command_id"], InstanceId=instance)
    assert invocation["Status"] == "Success"
    bucket, key = sent["bundle_s3"].removeprefix("s3://").split("/", 1)
    assert session.client("s3").head_object(Bucket=bucket, Key=key)


def test_bundle_holds_code_data_and_a_local_model(tmp_path):
    import tarfile

    bundle = ec2_run.stage_bundle(TrainConfig(profile="local"), tmp_path)
    with tarfile.open(bundle) as tar:
        names = set(tar.getnames())
    assert {"code/pt2aws/train/loop.py", "code/requirements.txt", "train/data.jsonl"} <= names
    assert any(n.startswith("model/") and n.endswith("config.json") for n in names)


def test_aws_needs_instance_ids():
    from pt2aws.aws.session import AwsSession

    with pytest.raises(ValueError, match="needs instance_ids"):
        ec2_run.run_on(
            AwsSession(region="us-east-1"),
            "p4d.24xlarge",
            TrainConfig(profile="smoke"),
            work_dir="/tmp/x",
        )
