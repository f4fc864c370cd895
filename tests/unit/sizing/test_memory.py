"""Tests of :mod:`pt2aws.sizing.memory`."""

from __future__ import annotations

from support.roberta_base import ROBERTA_BASE

from pt2aws.sizing import memory


def test_training_memory_roberta_base_by_hand():
    mem = memory.training_memory("roberta-base", micro_batch=32, seq_len=128, precision="mixed")
    assert mem["weights"] == 4 * ROBERTA_BASE
    assert mem["gradients"] == 4 * ROBERTA_BASE
    assert mem["optimizer"] == 8 * ROBERTA_BASE  # AdamW m and v in fp32
    # Korthikanti et al.: s*b*h*(34 + 5*a*s/h) per layer = 128*32*768*(34 + 10) = 138,412,032
    assert mem["activations"] == 12 * 128 * 32 * 768 * 44 == 1_660_944_384
    assert mem["total"] == 16 * ROBERTA_BASE + 1_660_944_384
    pure = memory.training_memory("roberta-base", 32, 128, precision="bf16")
    assert pure["weights"] + pure["gradients"] + pure["optimizer"] == 8 * ROBERTA_BASE
    sharded = memory.training_memory("roberta-base", 32, 128, shards=8)
    assert sharded["optimizer"] == 8 * ROBERTA_BASE / 8
    recompute = memory.training_memory("roberta-base", 32, 128, recompute=True)
    assert recompute["activations"] == 2 * 128 * 32 * 768 * 12 + 128 * 32 * 768 * 44


def test_inference_memory_by_hand():
    mem = memory.inference_memory("roberta-base", batch=1, seq_len=128)
    assert mem["weights"] == 2 * ROBERTA_BASE
    assert mem["activations"] == 128 * 1 * 768 * 44
    assert mem["total"] == 2 * ROBERTA_BASE + 4_325_376
