"""Tests of :mod:`pt2aws.train.loop`: a smoke run, its outputs, and that the model learns."""

import json


def test_smoke_run_writes_model_metrics_and_log(smoke_train_dir):
    metrics = json.loads((smoke_train_dir / "metrics.json").read_text())
    log = [
        json.loads(line) for line in (smoke_train_dir / "train_log.jsonl").read_text().splitlines()
    ]
    assert (smoke_train_dir / "model" / "model.safetensors").is_file()
    assert (smoke_train_dir / "model" / "tokenizer.json").is_file()
    assert (
        metrics["train_steps"] == log[-1]["step"] == 26
    )  # 400 examples / 32 per step = 13 steps x 2 epochs
    assert 0.0 <= metrics["test_accuracy"] <= 1.0
    assert metrics["majority_baseline_accuracy"] == 0.5
    assert len(metrics["history"]) == 2
    assert metrics["train_samples_per_second"] > 0
    assert metrics["flags"]["torch_compile"]["enabled"] is False  # auto on CPU
    fused = metrics["flags"]["fused_adamw"]  # measured here (or read from the cache)
    assert (
        fused["reason"].startswith("measured ")
        and "x the for-loop AdamW's speed" in fused["reason"]
    )
    assert metrics["flags"]["pad_to_multiple_of_8"]["enabled"] is False  # eager CPU: longest
    assert all(lr >= 0 for lr in (r["learning_rate"] for r in log))


def test_saved_model_reloads_strictly_with_label_names(smoke_model_dir):
    from safetensors.torch import load_file
    from transformers import AutoModelForSequenceClassification

    keys = load_file(smoke_model_dir / "model.safetensors").keys()
    assert not any("_orig_mod" in k or k.startswith("module.") for k in keys)
    model = AutoModelForSequenceClassification.from_pretrained(smoke_model_dir)
    assert model.config.id2label == {0: "negative", 1: "positive"}


def test_training_loss_falls_and_model_learns(tmp_path):
    """A few hundred steps of the tiny model beat chance on held-out tweets."""
    from pt2aws.train import loop

    metrics = loop.main(
        [
            "--profile",
            "smoke",
            "--output_dir",
            str(tmp_path),
            "--max_train_samples",
            "800",
            "--num_train_epochs",
            "3",
            "--logging_steps",
            "5",
            "--num_threads",
            "1",  # 2 threads were 5-10x slower on the shared, loaded 2-core test machine
        ]
    )
    log = [json.loads(line) for line in (tmp_path / "train_log.jsonl").read_text().splitlines()]
    first, last = log[0]["loss"], sum(r["loss"] for r in log[-3:]) / 3
    assert last < first - 0.05, f"loss did not fall: {first:.3f} -> {last:.3f}"
    assert metrics["eval_accuracy"] > 0.6


def test_a_bad_label_map_fails_when_the_flags_are_read():
    import pytest

    from pt2aws.data import DataError
    from pt2aws.train.loop import parse_args

    with pytest.raises(DataError, match="--label_map"):
        parse_args(["--profile", "smoke", "--label_map", "positive"])
    assert (
        parse_args(["--label_map", "1=positive,-1=negative"]).label_map == "1=positive,-1=negative"
    )
