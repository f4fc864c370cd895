"""A SageMaker training job followed to the end against the emulator: cost bound, status, wait,
stop, and its model brought back into a run folder."""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError

from pt2aws.aws import training_job, training_status
from pt2aws.config import TrainConfig


def _launch(tmp_path, train_dir, seconds: float) -> dict:
    return training_job.launch_on(
        "emulator",
        TrainConfig(profile="smoke", max_steps=5),
        work_dir=tmp_path / "job",
        instance_type="ml.g5.xlarge",
        max_runtime_s=3600,
        emulator_output=train_dir,
        emulator_training_seconds=seconds,
    )


def test_job_is_followed_and_its_model_lands_in_the_run_folder(smoke_train_dir, tmp_path):
    job = _launch(tmp_path, smoke_train_dir, seconds=3)
    assert job["cost_bound"]["usd"] == pytest.approx(1.408, abs=0.005)  # 1 h x 1 x ml.g5.xlarge
    status = training_status.job_status("emulator", job["name"])
    assert status["name"] == job["name"] and status["instance_type"] == "ml.g5.xlarge"
    assert status["status"] in ("InProgress", "Completed")
    done = training_status.wait_for_job(
        "emulator", job["name"], timeout_s=60, poll_s=0.5, progress=False
    )
    assert done["status"] == "Completed"
    assert done["model_artifact_s3"] == job["model_artifact_s3"]
    run_train = tmp_path / "run" / "train"
    (run_train / "model").mkdir(parents=True)
    (run_train / "model" / "stale.bin").write_bytes(b"old")  # replaced, not merged
    (run_train / "sagemaker_job.json").write_text("{}")  # kept
    fetched = training_status.fetch_model("emulator", job["model_artifact_s3"], run_train)
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


def test_running_job_is_stopped_and_waiting_reports_it(smoke_train_dir, tmp_path):
    job = _launch(tmp_path, smoke_train_dir, seconds=600)
    assert training_status.job_status("emulator", job["name"])["status"] == "InProgress"
    with pytest.raises(TimeoutError, match="still InProgress after"):
        training_status.wait_for_job(
            "emulator", job["name"], timeout_s=1.5, poll_s=0.5, progress=False
        )
    assert training_status.stop_job("emulator", job["name"])["status"] == "Stopped"
    with pytest.raises(training_status.TrainingJobError, match="is Stopped"):
        training_status.wait_for_job("emulator", job["name"], timeout_s=5, progress=False)
    with pytest.raises(ClientError, match="in status Stopped"):
        training_status.stop_job("emulator", job["name"])


def test_fetch_before_the_model_exists_says_to_wait(tmp_path):
    missing = "s3://sagemaker-us-east-1-123456789012/pt2aws-train/nope/output/model.tar.gz"
    with pytest.raises(FileNotFoundError, match="wait_for_job first"):
        training_status.fetch_model("emulator", missing, tmp_path / "train")
