"""Tests of :mod:`pt2aws.sizing.workload`: the model's shape and parameter count."""

from __future__ import annotations

import pytest
from support.roberta_base import EMBEDDINGS, ROBERTA_BASE, H

from pt2aws.sizing import catalog, strategy, workload


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
    with pytest.raises(ValueError, match="choose one of"):
        strategy.training_memory("roberta-base", precision="fp8")
    with pytest.raises(KeyError, match="not in the catalog"):
        catalog.get_instance("x9.huge")
    with pytest.raises(ValueError, match="train_examples"):
        workload.Workload("roberta-base", train_examples=0)
    with pytest.raises(ValueError, match="choose one of mixed, bf16, fp32"):
        workload.Workload("roberta-base", precision="fp8")
    assert set(workload.PRECISIONS) == set(strategy.STATE_BYTES_PER_PARAM)
    assert set(workload.PRECISIONS) == set(strategy.INFERENCE_BYTES_PER_PARAM)


def test_tiny_roberta_count_matches_the_model_modeling_builds():
    from types import SimpleNamespace

    from pt2aws.modeling import TINY_ROBERTA_SIZES, build_tiny_roberta, count_parameters

    class Tokenizer(SimpleNamespace):  # what build_tiny_roberta reads, at the largest vocabulary
        def __len__(self):
            return TINY_ROBERTA_SIZES["vocab_size"]

    tokenizer = Tokenizer(model_max_length=128, pad_token_id=1, bos_token_id=0, eos_token_id=2)
    model = build_tiny_roberta(tokenizer, ["negative", "positive"])
    assert count_parameters(model) == workload.model_spec("tiny-roberta").parameters
