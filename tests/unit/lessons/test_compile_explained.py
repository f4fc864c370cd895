"""Notebook 01's torch.compile lesson: the counts it prints are facts these tests pin down."""

import math

import pytest

from pt2aws.lessons import compile_explained as ce


def test_graph_break_splits_the_step_and_torch_where_keeps_one_graph():
    result = ce.graph_breaks()
    broken, whole = result["with_break"], result["without_break"]
    assert broken["graph_count"] == 2 and broken["graph_break_count"] == 1
    assert "Tensor.item()" in broken["break_reasons"][0]
    assert whole["graph_count"] == 1 and whole["graph_break_count"] == 0


def test_recompiles_per_new_padded_length_and_what_bounds_them():
    rows = {r["setting"]: r for r in ce.recompile_table()}
    compiles = {name: r["compiles"] for name, r in rows.items()}
    assert compiles == {
        "shuffled, pad to longest, static shapes": 3,
        "shuffled, pad to multiple of 8, static": 1,
        "bucketed, pad to longest, static shapes": 6,
        "bucketed, pad to multiple of 8, static": 5,
        "bucketed, pad to longest, dynamic=None": 2,  # one static graph, then one symbolic
    }
    for r in rows.values():
        assert r["batches"] == 6
        if "static" in r["setting"]:  # one graph per distinct (batch, length) shape
            assert r["compiles"] == r["distinct_shapes"]
        assert all(length % 8 == 0 for length in r["padded_lengths"]) == ("of 8" in r["setting"])
    shuffled = rows["shuffled, pad to longest, static shapes"]["pad_fraction"]
    bucketed = rows["bucketed, pad to longest, static shapes"]["pad_fraction"]
    assert bucketed < 0.15 < 0.35 < shuffled  # measured 0.105 vs 0.399


def test_aot_autograd_makes_a_forward_and_a_backward_graph():
    graphs = ce.aot_graphs()
    assert "aten.gelu.default" in graphs["forward"]
    assert "aten.nll_loss_forward" in graphs["forward"]
    assert "aten.gelu_backward.default" in graphs["backward"]
    assert "aten.nll_loss_backward" in graphs["backward"]


def test_inductor_writes_a_fused_cpp_kernel():
    result = ce.inductor_code(max_lines=12)
    assert result["kernels"] and all(k.startswith("cpp_fused") for k in result["kernels"])
    assert any("gelu" in k for k in result["kernels"])
    glimpse = result["glimpse"].splitlines()
    assert len(glimpse) == 12 and glimpse[0].startswith(result["kernels"][0])
    assert 'extern "C"' in result["glimpse"] and result["lines"] > 12


def test_bf16_keeps_fp32_range_but_not_its_precision():
    p = ce.precision()
    fp32, bf16, fp16 = (p["formats"][k] for k in ("float32", "bfloat16", "float16"))
    assert bf16["bits"] == fp16["bits"] == 16
    assert bf16["eps"] == 2**-7 and fp16["eps"] == 2**-10 and fp32["eps"] == 2**-23
    assert bf16["max"] == pytest.approx(fp32["max"], rel=0.01) and fp16["max"] == 65504
    assert p["sum_of_ones"] == {"float32": 1000.0, "bfloat16": 256.0, "float16": 1000.0}
    assert math.isinf(p["exp_12"]["float16"]) and p["exp_12"]["bfloat16"] == 162816.0
    assert p["one_plus_1e-3"] == {"float32": True, "bfloat16": False, "float16": True}


def test_recipe_sources_show_the_lines_the_lesson_names():
    from pt2aws.train import recipe

    prepare = ce.show_source(recipe.prepare_model_and_optimizer)
    assert prepare.index("shard_fsdp(") < prepare.index("torch.compile(") < prepare.index("DDP(")
    assert "torch.autocast" in prepare and "fused=fused_adamw" in prepare
    assert "torch.optim.AdamW(" in prepare
    step = ce.show_source(recipe.train_step)
    assert "no_sync()" in step and "set_requires_gradient_sync(last)" in step
    assert "clip_grad_norm_" in step
    assert ce.show_source(ce.precision).startswith("def precision()")
