import json

import torch

from pt2aws.train.flags import (
    choose_bf16,
    choose_compile,
    choose_fused_adamw,
    choose_pad_to_multiple,
)


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
    assert metrics["flags"]["fused_adamw"]["enabled"] is True  # torch 2.13 fuses AdamW on CPU
    assert metrics["flags"]["pad_to_multiple_of_8"]["enabled"] is False  # eager CPU: longest
    assert all(lr >= 0 for lr in (r["learning_rate"] for r in log))


def test_saved_model_reloads_strictly_with_label_names(smoke_model_dir):
    from safetensors.torch import load_file
    from transformers import AutoModelForSequenceClassification

    keys = load_file(smoke_model_dir / "model.safetensors").keys()
    assert not any("_orig_mod" in k or k.startswith("module.") for k in keys)
    model = AutoModelForSequenceClassification.from_pretrained(smoke_model_dir)
    assert model.config.id2label == {0: "negative", 1: "positive"}


def test_flag_choices_on_cpu_have_reasons():
    cpu = torch.device("cpu")
    assert choose_bf16(cpu, "auto").enabled is False
    assert choose_bf16(cpu, "on").enabled is True
    assert choose_compile(cpu, "auto").enabled is False
    assert "compil" in choose_compile(cpu, "auto").reason
    assert choose_compile(cpu, "on").enabled is True
    fused = choose_fused_adamw(cpu, "auto")
    assert fused.enabled is True and "supports" in fused.reason
    assert choose_fused_adamw(cpu, "off").enabled is False
    # eager CPU pads each batch to its longest text; GPUs and compiled models to a multiple of 8
    assert choose_pad_to_multiple(cpu, compiled=False).enabled is False
    assert choose_pad_to_multiple(cpu, compiled=True).enabled is True
    assert choose_pad_to_multiple(torch.device("cuda"), compiled=False).enabled is True


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
        ]
    )
    log = [json.loads(line) for line in (tmp_path / "train_log.jsonl").read_text().splitlines()]
    first, last = log[0]["loss"], sum(r["loss"] for r in log[-3:]) / 3
    assert last < first - 0.05, f"loss did not fall: {first:.3f} -> {last:.3f}"
    assert metrics["eval_accuracy"] > 0.6


def test_new_flags_on_cpu_and_bad_values_name_the_fix():
    import pytest

    from pt2aws.config import TrainConfig
    from pt2aws.train.flags import choose_fp16, choose_tf32

    cpu = torch.device("cpu")
    assert choose_tf32(cpu, "auto").enabled is False
    with pytest.raises(ValueError, match="Ampere"):
        choose_tf32(cpu, "on")
    assert choose_fp16(cpu, "auto", choose_bf16(cpu, "auto")).enabled is False
    with pytest.raises(ValueError, match="torch_compile_mode"):
        TrainConfig(torch_compile_mode="fastest")
    with pytest.raises(ValueError, match="--resume"):
        TrainConfig(resume="no/such/step-000001.pt")
    assert TrainConfig(output_dir="x/train").checkpoint_dir == "x/train/checkpoints"
