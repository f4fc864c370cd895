"""The two-process run several training tests read: ``launch_training`` (torchrun, 2 ranks on
gloo, DDP) with 2 x 2 gradient accumulation, rank 1 killed after step 5 and restarted once."""

from __future__ import annotations

import io

import pytest
from support.faults import job_env
from support.training import TINY

from pt2aws.config import TrainConfig
from pt2aws.train.launch import launch_training


@pytest.fixture(scope="session")
def two_process_run(tmp_path_factory):
    """``(cfg, metrics, printed)`` of the killed-and-restarted 2-rank DDP run."""
    out = tmp_path_factory.mktemp("ddp") / "train"
    cfg = TrainConfig(
        **TINY,
        output_dir=str(out),
        per_device_train_batch_size=2,
        gradient_accumulation_steps=2,
        save_steps=3,
        resume="auto",
    )
    stream = io.StringIO()
    env = job_env(5)  # rank 1 dies after step 5 (tests/support/faults.py)
    metrics = launch_training(cfg, nproc_per_node=2, max_restarts=1, stream=stream, env=env)
    return cfg, metrics, stream.getvalue()
