"""Tests of :mod:`pt2aws.lessons.trainer_peer`: same batches as our loop."""

from __future__ import annotations

import pytest

from pt2aws.lessons import trainer_peer
from pt2aws.train import loop


def test_trainer_peer_trains_on_the_same_batches_as_our_loop(tmp_path):
    """Same data order, init and dropout: per-step losses agree, so speed is compared fairly."""
    from pt2aws.rundir import RunDir

    common = [
        "--profile",
        "smoke",
        "--max_steps",
        "3",
        "--logging_steps",
        "1",
        "--max_train_samples",
        "96",
        "--max_eval_samples",
        "32",
        "--bf16",
        "off",
        "--torch_compile",
        "off",
        "--fused_adamw",
        "off",
        "--length_bucketing",
        "false",  # the Trainer peer trains on the plain shuffled batches only
    ]
    loop.main([*common, "--output_dir", str(tmp_path / "ours")])
    metrics = trainer_peer.trainer_main([*common, "--output_dir", str(tmp_path / "trainer")])
    ours = [r["loss"] for r in RunDir(tmp_path).read_jsonl(tmp_path / "ours" / "train_log.jsonl")]
    theirs = [
        r["loss"] for r in RunDir(tmp_path).read_jsonl(tmp_path / "trainer" / "train_log.jsonl")
    ]
    assert len(ours) == len(theirs) == 3
    assert theirs == pytest.approx(ours, abs=1e-5)
    assert metrics["train_steps"] == 3
    assert 0.0 < metrics["pad_fraction"] < 1.0
    assert metrics["train_samples_per_second"] > 0
