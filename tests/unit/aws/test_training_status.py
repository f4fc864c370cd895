"""A SageMaker training job followed to the end against the emulator: cost bound, status, wait,
stop, and its model brought back into a run folder."""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError

from pt2aws.aws import training_job, training_status
from pt2aws.config import TrainConfig
from pt2aws.emulator import server as aws_emulator


@pytest.fixture
def session(smoke_train_dir, request):
    """The emulator as notebook 01 starts it: completed jobs bring back a local run folder."""
    seconds = getattr(request, "param", 3)
    on = aws_emulator.start(training_output=smoke_train_dir, training_seconds=seconds)
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
    status = training_status.job_status(session, job["name"])
    assert status["name"] == job["name"] and status["instance_type"] == "ml.g5.xlarge"
    assert status["status"] in ("InProgress", "Completed")
    done = training_status.wait_for_job(session, job["name"], timeout_s=60, progress=False)
    assert done["status"] == "Completed"
    assert done["model_artifact_s3"] == job["model_artifact_s3"]
    run_train = tmp_path / "run" / "train"
    (run_train / "model").mkdir(parents=True)
    (run_train / "model" / "stale.bin").write_bytes(b"old")  # replaced, not merged
    (run_train / "sagemaker_job.json").write_text("{}")  # kept
    fetched = training_status.fetch_model(session, job["model_artifact_s3"], run_train)
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


@pytest.mark.parametrize("session", [600], indirect=True)
def test_running_job_is_stopped_and_waiting_reports_it(session, tmp_path):
    job = _launch(session, tmp_path)
    assert training_status.job_status(session, job["name"])["status"] == "InProgress"
    with pytest.raises(TimeoutError, match="still InProgress after"):
        training_status.wait_for_job(session, job["name"], timeout_s=1.5, progress=False)
    assert training_status.stop_job(session, job["name"])["status"] == "Stopped"
    with pytest.raises(training_status.TrainingJobError, match="is Stopped"):
        training_status.wait_for_job(session, job["name"], timeout_s=5, progress=False)
    with pytest.raises(ClientError, match="in status Stopped"):
        training_status.stop_job(session, job["name"])
    missing = "s3://sagemaker-us-east-1-123456789012/pt2aws-train/nope/output/model.tar.gz"
    with pytest.raises(FileNotFoundError, match="wait_for_job first"):
        training_status.fetch_model(session, missing, tmp_path / "train")
