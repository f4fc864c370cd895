"""The A/B benchmark's bookkeeping, and that its HF Trainer peer trains on the same batches."""

from __future__ import annotations

import json

import pytest

from pt2aws.bench import trainer_peer, training
from pt2aws.train import loop


def test_variants_cover_each_flag_alone_and_together():
    names = [v.name for v in training.default_variants()]
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
    base = training.default_variants()[0]
    assert (base.bf16, base.torch_compile, base.fused_adamw) == ("off", "off", "off")
    quick = training.default_variants(compile=False, trainer=False)
    assert [v.name for v in quick] == ["baseline", "+bf16", "+fused"]


def test_summary_takes_medians_and_ratios():
    variants = [v for v in training.default_variants() if not v.length_bucketing]
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
            "settings": vars(training.BenchSettings(repeats=3)),
            "device": "cpu",
            "torch": "x",
            "rows": list(rows.values()),
            "skipped": ["recipe+bucketing"],
            "failed": {},
        }
    )
    assert "| recipe | 33.0 | n/a | 3.00x | 1.38x |" in table
    assert "skipped recipe+bucketing" in table


def test_read_run_falls_back_to_the_log(tmp_path):
    (tmp_path / "metrics.json").write_text(json.dumps({"train_samples_per_second": 1.0}))
    log = [{"step": i, "loss": 1.0 / i, "train_time_s": 5.0 + 0.5 * (i - 2)} for i in range(1, 13)]
    log[0]["train_time_s"] = 4.0  # step 1 (compile) took 4 s
    (tmp_path / "train_log.jsonl").write_text("\n".join(json.dumps(r) for r in log))
    got = training.read_run(tmp_path, warmup_steps=2, batch_size=8)
    # steps 3..12: 10 steps x 8 samples in 10 x 0.5 s
    assert got["samples_per_s"] == pytest.approx(16.0)
    assert got["warmup_s"] == pytest.approx(5.0)
    assert got["final_loss"] == pytest.approx(sum(1.0 / i for i in range(3, 13)) / 10)


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
