"""Tests of :mod:`pt2aws.sizing.workload`: the model's shape and parameter count, memory per
device and the plan that fits."""

from __future__ import annotations

import pytest
from support.roberta_base import EMBEDDINGS, ROBERTA_BASE, H

from pt2aws.sizing import catalog, workload


def test_roberta_base_parameter_count_matches_hand_count():
    assert ROBERTA_BASE == 124_647_170
    spec = workload.model_spec("roberta-base")
    assert spec.parameters == ROBERTA_BASE
    assert (spec.hidden_size, spec.num_layers, spec.num_heads) == (768, 12, 12)
    assert spec.embedding_parameters == EMBEDDINGS - 2 * H  # the LayerNorm multiplies
    assert workload.model_spec("FacebookAI/roberta-base") == spec
    # a transformers config works too, and RobertaConfig() defaults differ only in embeddings
    from transformers import RobertaConfig

    default = workload.model_spec(RobertaConfig(num_labels=2))
    assert default.parameters - ROBERTA_BASE == (512 - 514) * H + (2 - 1) * H
    assert workload.model_spec("roberta-large").parameters == 355_361_794


def test_a_bare_count_gets_an_estimated_shape():
    spec = workload.model_spec("70B")
    assert (spec.num_layers, spec.hidden_size, spec.num_heads, spec.parameters) == (
        71,
        9088,
        71,
        7e10,
    )
    assert workload.model_spec(350e6) == workload.ModelSpec.from_parameters(350e6)
    assert (
        workload.model_spec("350m").name == "350m"
        and workload.model_spec("350m").parameters == 350e6
    )


def test_bad_input_errors_name_the_fix():
    with pytest.raises(ValueError, match="roberta-base"):
        workload.model_spec("gpt-unknown")
    with pytest.raises(KeyError, match="not in the catalog"):
        catalog.get_instance("x9.huge")
    with pytest.raises(ValueError, match="train_examples"):
        workload.Workload("roberta-base", train_examples=0)
    with pytest.raises(ValueError, match="micro_batch >= 1"):
        workload.Workload("roberta-base", micro_batch=0)
    with pytest.raises(ValueError, match="choose one of mixed, bf16, fp32"):
        workload.Workload("roberta-base", precision="fp8")


def test_tiny_roberta_count_matches_the_model_modeling_builds():
    from types import SimpleNamespace

    from pt2aws.modeling import TINY_ROBERTA_SIZES, build_tiny_roberta, count_parameters

    class Tokenizer(SimpleNamespace):  # what build_tiny_roberta reads, at the largest vocabulary
        def __len__(self):
            return TINY_ROBERTA_SIZES["vocab_size"]

    tokenizer = Tokenizer(model_max_length=128, pad_token_id=1, bos_token_id=0, eos_token_id=2)
    model = build_tiny_roberta(tokenizer, ["negative", "positive"])
    assert count_parameters(model) == workload.model_spec("tiny-roberta").parameters


ROBERTA = workload.model_spec("roberta-base")
P4D = catalog.get_instance("p4d.24xlarge")


def test_roberta_base_fits_one_gpu_and_is_small():
    plan = workload.plan_training(ROBERTA, catalog.get_instance("g5.xlarge"), 32, 128)
    assert plan["nodes"] == 1 and plan["strategy"] == "single device"
    assert plan["memory_per_device_bytes"] < 24e9 * 0.9
    assert workload.workload_class(ROBERTA)["class"] == "small"


def test_70b_does_not_fit_one_p4d_and_needs_nodes():
    # 16 B/param x 70e9 = 1.12 TB of state; one p4d holds 8 x 40 GB x 0.9 = 288 GB.
    spec = workload.model_spec("70B")
    assert (spec.num_layers, spec.hidden_size, spec.num_heads) == (71, 9088, 71)
    assert 16 * spec.parameters > 8 * 40e9 * 0.9
    plan = workload.plan_training(spec, P4D, micro_batch=1, seq_len=2048)
    # with recomputation, activations = 2*s*b*h*L + one layer = 2,642,935,808 + 2,121,793,536;
    # k nodes need 1.12e12/(8k) + 4.76e9 <= 36e9: k = 4 gives 39.8e9 (no), k = 5 gives 32.8e9
    assert plan["nodes"] == 5 and plan["recompute"] is True
    assert "FSDP over 5 nodes" in plan["strategy"]
    assert plan["memory_per_device_bytes"] == pytest.approx(1.12e12 / 40 + 4_764_729_344)
    # pure bf16 (8 B/param = 560 GB) does not fit one p4d either: 70e9/k + 4.76e9 <= 36e9 -> k = 3
    assert workload.plan_training(spec, P4D, 1, 2048, precision="bf16")["nodes"] == 3
    assert workload.workload_class(spec, 1, 2048)["class"] == "big"
    assert workload.workload_class(workload.model_spec("2000B"), 1, 2048)["class"] == "huge"
    # no multi-node plan without EFA: g6e.xlarge cannot hold it alone
    assert workload.plan_training(spec, catalog.get_instance("g6e.xlarge"), 1, 2048) is None


def test_training_memory_roberta_base_by_hand():
    mem = workload.training_memory(ROBERTA, micro_batch=32, seq_len=128, precision="mixed")
    assert mem["weights"] == 4 * ROBERTA_BASE
    assert mem["gradients"] == 4 * ROBERTA_BASE
    assert mem["optimizer"] == 8 * ROBERTA_BASE  # AdamW m and v in fp32
    # Korthikanti et al.: s*b*h*(34 + 5*a*s/h) per layer = 128*32*768*(34 + 10) = 138,412,032
    assert mem["activations"] == 12 * 128 * 32 * 768 * 44 == 1_660_944_384
    assert mem["total"] == 16 * ROBERTA_BASE + 1_660_944_384
    pure = workload.training_memory(ROBERTA, 32, 128, precision="bf16")
    assert pure["weights"] + pure["gradients"] + pure["optimizer"] == 8 * ROBERTA_BASE
    sharded = workload.training_memory(ROBERTA, 32, 128, shards=8)
    assert sharded["optimizer"] == 8 * ROBERTA_BASE / 8
    recompute = workload.training_memory(ROBERTA, 32, 128, recompute=True)
    assert recompute["activations"] == 2 * 128 * 32 * 768 * 12 + 128 * 32 * 768 * 44


def test_inference_memory_by_hand():
    mem = workload.inference_memory(ROBERTA, seq_len=128)
    assert mem["weights"] == 2 * ROBERTA_BASE
    assert mem["activations"] == 128 * 1 * 768 * 44
    assert mem["total"] == 2 * ROBERTA_BASE + 4_325_376
