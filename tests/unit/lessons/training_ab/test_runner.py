"""Tests of :mod:`pt2aws.lessons.training_ab.runner`."""

from __future__ import annotations

import json

import pytest

from pt2aws.lessons.training_ab import runner as training
from pt2aws.lessons.training_ab import variants as ab_variants


def test_summary_takes_medians_and_ratios():
    variants = [v for v in ab_variants.default_variants() if not v.length_bucketing]
    speeds = {
        "baseline": [10.0, 12.0, 11.0],
        "+compile": [20.0, 22.0, 21.0],
        "+bf16": [9.0, 9.0, 9.0],
        "+fused": [11.0, 11.0, 11.0],
        "recipe": [30.0, 33.0, 36.0],
        "Trainer baseline": [10.0, 10.0, 10.0],
        "Trainer recipe": [24.0, 24.0, 24.0],
    }
    runs = {
        name: [
            {"samples_per_s": s, "final_loss": 0.5 + i, "peak_memory_bytes": 2**20}
            for i, s in enumerate(values)
        ]
        for name, values in speeds.items()
    }
    rows = {r["variant"]: r for r in training.summarize(variants, runs)}
    assert rows["baseline"]["samples_per_s"] == 11.0
    assert rows["recipe"]["samples_per_s"] == 33.0
    assert rows["recipe"]["vs_baseline"] == pytest.approx(3.0)
    assert rows["recipe"]["vs_trainer"] == pytest.approx(33.0 / 24.0)
    assert rows["baseline"]["vs_trainer"] == pytest.approx(1.1)
    assert rows["+bf16"]["vs_trainer"] is None
    assert rows["baseline"]["final_loss"] == 1.5
    table = training.format_table(
        {
            "settings": vars(ab_variants.BenchSettings(repeats=3)),
            "device": "cpu",
            "torch": "x",
            "rows": list(rows.values()),
            "failed": {"recipe+bucketing": "recipe+bucketing failed (exit 1):\nboom"},
        }
    )
    assert "| recipe | 33.0 | n/a | 3.00x | 1.38x |" in table
    assert "FAILED recipe+bucketing: recipe+bucketing failed (exit 1)" in table


def test_read_run_reads_steady_state_metrics_and_the_final_loss(tmp_path):
    metrics = {
        "train_samples_per_second": 16.0,
        "train_tokens_per_second": 400.0,
        "warmup_time_s": 5.0,
        "peak_memory_bytes": 2**20,
        "train_steps": 12,
    }
    (tmp_path / "metrics.json").write_text(json.dumps(metrics))
    log = [{"step": i, "loss": 1.0 / i} for i in range(1, 13)]
    (tmp_path / "train_log.jsonl").write_text("\n".join(json.dumps(r) for r in log))
    got = training.read_run(tmp_path)
    assert got["samples_per_s"] == pytest.approx(16.0)
    assert got["tokens_per_s"] == pytest.approx(400.0)
    assert got["warmup_s"] == pytest.approx(5.0)
    assert got["steps"] == 12 and got["num_compiles"] is None
    # final loss: mean of the last FINAL_LOSS_STEPS = 10 logged losses (steps 3..12)
    assert got["final_loss"] == pytest.approx(sum(1.0 / i for i in range(3, 13)) / 10)
