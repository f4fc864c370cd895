"""The A/B benchmark's bookkeeping, and that its HF Trainer peer trains on the same batches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pt2aws.lessons.training_ab import runner as training
from pt2aws.lessons.training_ab import trainer_peer
from pt2aws.lessons.training_ab import variants as ab_variants
from pt2aws.train import loop


def test_variants_cover_each_flag_alone_and_together():
    names = [v.name for v in ab_variants.default_variants()]
    assert names == [
        "baseline",
        "+compile",
        "+bf16",
        "+fused",
        "recipe",
        "recipe+bucketing",
        "Trainer baseline",
        "Trainer recipe",
    ]
    base = ab_variants.default_variants()[0]
    assert (base.bf16, base.torch_compile, base.fused_adamw) == ("off", "off", "off")
    quick = ab_variants.default_variants(compile=False, trainer=False)
    assert [v.name for v in quick] == ["baseline", "+bf16", "+fused"]


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


def test_notebook_settings_take_model_length_and_lr_from_the_profile():
    from pt2aws.config import get_profile

    # (steps, warm-up steps (at most a third of the steps), repeats)
    expected = {"smoke": (8, 2, 1), "local": (12, 4, 1), "full": (60, 15, 3)}
    for name, (steps, warmup, repeats) in expected.items():
        profile = get_profile(name)
        got = ab_variants.notebook_settings(name)
        assert (got.model, got.max_length, got.learning_rate) == (
            profile.model_name_or_path,
            profile.max_length,
            profile.learning_rate,
        )
        assert (got.max_steps, got.warmup_steps, got.repeats) == (steps, warmup, repeats)
    assert ab_variants.notebook_settings("local", steps=6, repeats=2).warmup_steps == 2
    with pytest.raises(ValueError, match="profile"):
        ab_variants.notebook_settings("huge")


def test_train_args_pass_every_variant_flag():
    settings = ab_variants.BenchSettings(max_steps=5, warmup_steps=2, num_threads=1)
    bucketing = next(v for v in ab_variants.default_variants() if v.length_bucketing)
    args = settings.train_args(bucketing, Path("/x/run"))
    flags = dict(zip(args[::2], args[1::2]))
    assert flags["--output_dir"] == str(Path("/x/run"))
    assert flags["--length_bucketing"] == "true"
    assert flags["--benchmark_warmup_steps"] == "2"
    assert (flags["--bf16"], flags["--torch_compile"], flags["--fused_adamw"]) == ("on",) * 3
    assert flags["--max_train_samples"] == str(32 * 5)


def test_trainer_peer_trains_on_the_same_batches_as_our_loop(tmp_path):
    """Same data order, init and dropout: per-step losses agree, so speed is compared fairly."""
    from pt2aws.rundir import read_jsonl

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
    ours = [r["loss"] for r in read_jsonl(tmp_path / "ours" / "train_log.jsonl")]
    theirs = [r["loss"] for r in read_jsonl(tmp_path / "trainer" / "train_log.jsonl")]
    assert len(ours) == len(theirs) == 3
    assert theirs == pytest.approx(ours, abs=1e-5)
    assert metrics["train_steps"] == 3
    assert 0.0 < metrics["pad_fraction"] < 1.0
    assert metrics["train_samples_per_second"] > 0
