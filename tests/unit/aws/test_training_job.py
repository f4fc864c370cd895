"""Tests of :mod:`pt2aws.aws.training_job`: the SageMaker training job, on the emulator."""

from __future__ import annotations

import json

import pytest

from pt2aws.aws import training_job
from pt2aws.config import TrainConfig
from pt2aws.train.loop import parse_args

BUCKET = "sagemaker-us-east-1-123456789012"


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    """One multi-node job created against the moto server; yields (job, describe, s3 keys)."""
    from pt2aws.emulator.server import Emulator

    cfg = TrainConfig(profile="smoke", max_steps=20, bf16="on", torch_compile="on")
    with Emulator() as emulator:
        session = emulator.session()
        job = training_job.launch_training_job(
            session,
            cfg,
            work_dir=tmp_path_factory.mktemp("sm-job"),
            instance_type="ml.p4d.24xlarge",
            instance_count=2,
            processes_per_node=8,
            pytorch_version="2.8.0",
            max_runtime_s=7200,
        )
        described = session.client("sagemaker").describe_training_job(TrainingJobName=job.name)
        s3 = session.client("s3")
        prefix = f"pt2aws-train/{job.name}/input/"
        keys = [
            o["Key"][len(prefix) :]
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
            for o in page.get("Contents", [])
        ]

        def read(key):
            return s3.get_object(Bucket=BUCKET, Key=prefix + key)["Body"].read().decode()

        files = {
            name: read(f"sm_drivers/{name}")
            for name in ("distributed.json", "sourcecode.json", "sm_train.sh")
        }
        files["requirements.txt"] = read("code/requirements.txt")
        files["train_entry.py"] = read("code/train_entry.py")
        yield cfg, job, described, keys, files


def test_job_request_names_image_compute_and_distribution(launched):
    _, job, described, _, files = launched
    assert described["TrainingJobName"] == job.name and job.name.startswith("pt2aws-train-")
    spec = described["AlgorithmSpecification"]
    assert spec["TrainingImage"] == (
        "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.8.0-gpu-py312"
    )
    assert described["ResourceConfig"]["InstanceType"] == "ml.p4d.24xlarge"
    assert described["ResourceConfig"]["InstanceCount"] == 2
    assert described["StoppingCondition"]["MaxRuntimeInSeconds"] == 7200
    assert described["OutputDataConfig"]["S3OutputPath"] == f"s3://{BUCKET}/pt2aws-train"
    assert job.model_artifact_s3 == f"s3://{BUCKET}/pt2aws-train/{job.name}/output/model.tar.gz"
    # distribution: SageMaker's torchrun driver with 8 processes per node, on both nodes
    assert json.loads(files["distributed.json"]) == {"process_count_per_node": 8, "smp": None}
    assert "distributed_drivers/torchrun_driver.py" in files["sm_train.sh"]
    assert "install_requirements.py requirements.txt" in files["sm_train.sh"]
    # entry point: our launcher, which calls pt2aws.train.main
    source = json.loads(files["sourcecode.json"])
    assert source["entry_script"] == "train_entry.py"
    assert source["requirements"] == "requirements.txt"
    assert "from pt2aws.train import main" in files["train_entry.py"]
    assert "transformers==5.24.0" in files["requirements.txt"].splitlines()
    assert not any(line.startswith("torch") for line in files["requirements.txt"].splitlines())


def test_job_channels_hold_code_and_prepared_data(launched):
    _, job, described, keys, _ = launched
    channels = {
        c["ChannelName"]: c["DataSource"]["S3DataSource"]["S3Uri"]
        for c in described["InputDataConfig"]
    }
    assert set(channels) == {"train", "code", "sm_drivers"}
    assert channels["train"] == f"s3://{BUCKET}/pt2aws-train/{job.name}/input/train/data.jsonl"
    assert {"code/train_entry.py", "code/pt2aws/train/loop.py", "train/data.jsonl"} <= set(keys)
    assert not any("__pycache__" in k for k in keys if k.startswith("code/"))


def test_job_hyperparameters_parse_back_into_the_same_config(launched):
    """What the container's torchrun driver passes to train_entry.py is our TrainConfig."""
    import dataclasses

    from sagemaker.train.container_drivers.common.utils import hyperparameters_to_cli_args

    cfg, _, described, _, _ = launched
    hyper = described["HyperParameters"]
    assert hyper["output_dir"] == "/opt/ml/model"
    assert hyper["dataset"] == "/opt/ml/input/data/train/data.jsonl"
    assert (hyper["max_steps"], hyper["bf16"], hyper["torch_compile"]) == ("20", "on", "on")
    parsed = parse_args(hyperparameters_to_cli_args(hyper))
    expected = dataclasses.replace(
        cfg,
        output_dir="/opt/ml/model",
        dataset="/opt/ml/input/data/train/data.jsonl",
        checkpoint_dir="/opt/ml/checkpoints",
        resume="auto",
        encoding="utf-8",  # the prepared channel file is UTF-8 JSON Lines
    )
    assert parsed == expected


def test_job_checkpoints_sync_to_s3_and_stay_out_of_the_model(launched):
    _, job, described, _, _ = launched
    hyper = described["HyperParameters"]
    assert (hyper["checkpoint_dir"], hyper["resume"]) == ("/opt/ml/checkpoints", "auto")
    assert described["CheckpointConfig"] == {
        "S3Uri": f"s3://{BUCKET}/pt2aws-train/{job.name}/checkpoints",
        "LocalPath": "/opt/ml/checkpoints",
    }


def test_cost_bound_is_runtime_times_instances_times_price():
    bound = training_job.training_cost_bound("ml.p4d.24xlarge", 2, 7200)
    assert bound["usd_per_hour"] == 37.688  # the catalog's UNVERIFIED figure
    assert bound["instance_hours"] == 4.0
    assert bound["usd"] == pytest.approx(4 * 37.688, abs=0.005)
    assert bound["price_verified"] is False
    assert bound["formula"] == "2 h x 2 x 37.688 USD/h"
    unknown = training_job.training_cost_bound("ml.g6e.xlarge", 1, 3600)
    assert unknown["usd"] is None and unknown["formula"].endswith("(no price known)")
    eu = training_job.training_cost_bound("ml.p4d.24xlarge", 1, 3600, "eu-west-1")
    assert "the catalog has no figure for eu-west-1" in eu["price"]
