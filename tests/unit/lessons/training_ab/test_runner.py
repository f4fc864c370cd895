"""Tests of :mod:`pt2aws.lessons.training_ab.runner`."""

from __future__ import annotations

import json

import pytest

from pt2aws.lessons.training_ab import runner as training
from pt2aws.lessons.training_ab import variants as ab_variants
from pt2aws.train.progress import ProgressReporter


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


def test_a_run_stopped_at_its_budget_reports_the_steps_it_did(capsys):
    settings = ab_variants.BenchSettings(batch_size=32, warmup_steps=4, max_steps=12)
    reporter = ProgressReporter(total=12, mode="lines")
    for step in range(1, 8):  # 7 of 12 steps done, 2 s per step after a 10 s first step
        reporter.update(step, loss=0.7, train_time_s=10.0 + 2.0 * (step - 1))
    partial = training.read_partial_run("loading...\n" + capsys.readouterr().out, settings)
    assert partial["steps"] == 7 and partial["stopped_at_budget"] is True
    # steady state: steps 5-7 after the 4 warm-up steps, 3 x 32 samples in 6 s
    assert partial["samples_per_s"] == pytest.approx(3 * 32 / 6.0)
    assert partial["warmup_s"] == pytest.approx(16.0) and partial["final_loss"] == 0.7
    assert training.read_partial_run("no steps yet\n", settings) is None
    # too few steps to leave the warm-up out: the rate over all steps done
    few = training.read_partial_run(
        '@pt2aws-progress {"step": 2, "total": 12, "train_time_s": 8.0}', settings
    )
    assert few["samples_per_s"] == pytest.approx(2 * 32 / 8.0)


def test_each_run_gets_a_fair_share_of_the_training_budget_left(monkeypatch, tmp_path):
    shares = []

    def fake_run(variant, settings, output_dir, stream=None, time_limit_s=None):
        shares.append(time_limit_s)
        return {"samples_per_s": 10.0, "steps": 12, "train_s": 5.0}  # each trains 5 s

    monkeypatch.setattr(training, "run_variant", fake_run)
    chosen = ab_variants.default_variants(compile=False, trainer=False)  # 3 variants
    settings = ab_variants.BenchSettings(repeats=2, budget_s=60.0)
    result = training.run_ab(settings, tmp_path, chosen)
    # (60 - 5 x runs done) / runs left: what one run leaves goes to the next ones
    assert shares == pytest.approx([10.0, 11.0, 12.5, 15.0, 20.0, 35.0])
    assert "budget 60 s of training" in training.format_table(result)


def test_a_tiny_budget_stops_the_run_after_one_step_with_what_it_measured(tmp_path):
    """A real process: its share of a 0.01 s budget is spent by the first step."""
    settings = ab_variants.notebook_settings("smoke", budget_s=0.01)
    chosen = [v for v in ab_variants.default_variants() if v.name == "baseline"]
    result = training.run_ab(settings, tmp_path, chosen)
    assert result["failed"] == {}
    (row,) = result["rows"]
    assert (row["steps"], row["stopped_at_budget"]) == (1, 1)  # 1 of 8 steps, then stopped
    assert row["samples_per_s"] > 0 and row["tokens_per_s"] is None
    assert "| 1 (budget) |" in training.format_table(result)
    assert not list(tmp_path.glob("*/*/model"))  # a stopped run's folder is not kept
