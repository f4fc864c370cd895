"""Tests of :mod:`pt2aws.sizing.strategy`."""

from __future__ import annotations

import pytest

from pt2aws.sizing import strategy, workload


def test_roberta_base_fits_one_gpu_and_is_small():
    plan = strategy.plan_training("roberta-base", "g5.xlarge", micro_batch=32, seq_len=128)
    assert plan["nodes"] == 1 and plan["strategy"] == "single device"
    assert plan["memory_per_device_bytes"] < 24e9 * 0.9
    assert strategy.workload_class("roberta-base")["class"] == "small"


def test_70b_does_not_fit_one_p4d_and_needs_nodes():
    # 16 B/param x 70e9 = 1.12 TB of state; one p4d holds 8 x 40 GB x 0.9 = 288 GB.
    spec = workload.model_spec("70B")
    assert (spec.num_layers, spec.hidden_size, spec.num_heads) == (71, 9088, 71)
    assert 16 * spec.parameters > 8 * 40e9 * 0.9
    plan = strategy.plan_training(spec, "p4d.24xlarge", micro_batch=1, seq_len=2048)
    # with recomputation, activations = 2*s*b*h*L + one layer = 2,642,935,808 + 2,121,793,536;
    # k nodes need 1.12e12/(8k) + 4.76e9 <= 36e9: k = 4 gives 39.8e9 (no), k = 5 gives 32.8e9
    assert plan["nodes"] == 5 and plan["recompute"] is True
    assert "FSDP over 5 nodes" in plan["strategy"]
    assert plan["memory_per_device_bytes"] == pytest.approx(1.12e12 / 40 + 4_764_729_344)
    # pure bf16 (8 B/param = 560 GB) does not fit one p4d either: 70e9/k + 4.76e9 <= 36e9 -> k = 3
    assert strategy.plan_training(spec, "p4d.24xlarge", 1, 2048, precision="bf16")["nodes"] == 3
    assert strategy.workload_class(spec, 1, 2048)["class"] == "big"
    assert strategy.workload_class("2000B", 1, 2048)["class"] == "huge"
    # no multi-node plan without EFA: g6e.xlarge cannot hold it alone
    assert strategy.plan_training(spec, "g6e.xlarge", 1, 2048) is None
