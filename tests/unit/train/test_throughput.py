"""Training FLOPs as the field counts them, one function for the run's MFU and notebook 00's sizing."""

from __future__ import annotations

import pytest
import torch

from pt2aws.train.throughput import non_embedding_parameters, summary, training_flops_per_token


def _minilm_on_meta():
    from transformers import AutoModelForSequenceClassification, BertConfig

    config = BertConfig(
        hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536
    )
    with torch.device("meta"):
        return AutoModelForSequenceClassification.from_config(config), config


def test_flops_per_token_leave_out_the_embeddings_and_add_attention():
    model, config = _minilm_on_meta()
    total = sum(p.numel() for p in model.parameters())
    n = non_embedding_parameters(model)
    assert total == 22_713_986 and n == 10_796_162  # word embeddings alone are 51.6%
    per_token = training_flops_per_token(n, 6, 384, 64)
    assert per_token == 6 * 10_796_162 + 12 * 6 * 384 * 64 == pytest.approx(6.65e7, rel=1e-3)
    assert 6 * total / per_token == pytest.approx(2.05, abs=0.01)  # 6 x all parameters: 2.05x


def test_sizing_counts_training_flops_with_the_same_function():
    from pt2aws.sizing.ranking import rank_training, training_flops
    from pt2aws.sizing.workload import Workload, model_spec

    model, _ = _minilm_on_meta()
    spec = model_spec("minilm-l6")  # closed form, no model built
    assert spec.non_embedding_parameters == non_embedding_parameters(model)
    per_token = training_flops_per_token(spec.non_embedding_parameters, 6, 384, 64)
    assert training_flops(spec, Workload("minilm-l6", 1000, 64, 2)) == 1000 * 64 * 2 * per_token
    rows = {r["instance"]: r for r in rank_training(Workload("minilm-l6", 3000, 64, 1))}
    cpu, gpu = rows["c7g.xlarge"], rows["g5.xlarge"]
    flops = training_flops(spec, Workload("minilm-l6", 3000, 64, 1))
    assert gpu["time_s"] == pytest.approx(flops / (70e12 * gpu["mfu"]))  # A10G, bf16 peak
    assert cpu["time_s"] == pytest.approx(flops / (cpu["peak_tflops"] * 1e12 * cpu["mfu"]))
    from pt2aws.sizing import catalog

    # CPUs train in fp32 (the recipe's bf16 is off there): their fp32 peak, not the bf16 one
    assert cpu["peak_precision"] == "fp32" and gpu["peak_precision"] == "bf16"
    assert cpu["peak_tflops"] == pytest.approx(catalog.peak_flops("c7g.xlarge")["flops"] / 1e12)


def test_mfu_is_flops_per_token_times_tokens_per_second_over_the_peak():
    from types import SimpleNamespace

    from pt2aws.train.distributed import DistInfo

    model, config = _minilm_on_meta()
    # 3 steps of 32 x 64 real tokens, the first (the warm-up) 1 s, all 3 in 2 s
    monitor = SimpleNamespace(
        counts=[96, 96 * 64, 96 * 64], warm=(1.0, [32, 32 * 64, 32 * 64], 1), runtime_s=2.0,
        steps_done=3,
    )  # fmt: skip
    info = DistInfo()
    speed = summary(monitor, info, model, config, peak_flops=1e12)
    assert speed["train_samples_per_second"] == 64.0
    assert speed["train_tokens_per_second"] == 64 * 64 and speed["pad_fraction"] == 0.0
    assert speed["flops_per_token"] == training_flops_per_token(10_796_162, 6, 384, 64)
    assert speed["mfu"] == pytest.approx(speed["flops_per_token"] * 64 * 64 / 1e12)
    assert summary(monitor, info, model, config, peak_flops=None)["mfu"] is None
    monitor.steps_done = 1  # too short to leave the warm-up out: the whole run counts
    assert summary(monitor, info, model, config, None)["train_samples_per_second"] == 48.0
