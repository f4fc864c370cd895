"""Tests of :mod:`pt2aws.inference.variants`: the fast variants and where each runs."""

import pytest
import torch
from support.compiler import NO_COMPILER
from support.cpu import fake_cpu
from support.texts import TEXTS

from pt2aws.inference import variants
from pt2aws.inference.predictor import Predictor


@pytest.mark.parametrize(
    ("variant", "tol"), [("int8", 0.02), ("int8-legacy", 0.02), ("bf16", 0.03)]
)
def test_fast_variants_stay_close_to_fp32_eager(
    smoke_model_dir, eager_probs, int8_predictor, variant, tol
):
    fast = int8_predictor if variant == "int8" else Predictor(str(smoke_model_dir), variant=variant)
    assert fast.variant == variant
    probs = fast.predict_proba(TEXTS)
    assert probs.dtype == torch.float32 and probs.shape == eager_probs.shape
    diff = (probs - eager_probs).abs().max().item()
    assert diff < tol, f"{variant}: max |dp| {diff:.4f}"
    # labels agree wherever fp32's own margin exceeds the tolerance
    confident = (eager_probs.max(-1).values - 0.5).abs() > tol
    agree = probs.argmax(-1)[confident] == eager_probs.argmax(-1)[confident]
    assert bool(agree.all())


def test_int8_legacy_variant_quantizes_every_linear(smoke_model_dir):
    fast = Predictor(str(smoke_model_dir), variant="int8-legacy")
    from torch.ao.nn.quantized.dynamic import Linear as DynamicInt8Linear

    modules = list(fast.module.modules())
    assert sum(isinstance(m, DynamicInt8Linear) for m in modules) >= 2 * 6  # 2 layers x 6+
    assert not any(type(m) is torch.nn.Linear for m in modules)


def test_int8_torchao_keeps_the_classifier_in_fp32(int8_predictor):
    from torchao.quantization import Int8Tensor

    linears = {n: m for n, m in int8_predictor.module.named_modules() if type(m) is torch.nn.Linear}
    int8 = [n for n, m in linears.items() if isinstance(m.weight, Int8Tensor)]
    fp32 = [n for n, m in linears.items() if not isinstance(m.weight, Int8Tensor)]
    assert len(int8) >= 2 * 6  # every encoder Linear of the 2 layers
    assert fp32 and all(n.startswith("classifier") for n in fp32)
    assert type(int8_predictor.model).__name__ == "OptimizedModule"  # compiled: fused quant ops


@pytest.mark.slow
def test_compile_variant_matches_eager(smoke_model_dir, eager_probs):
    compiled = Predictor(str(smoke_model_dir), variant="compile", batch_size=32)
    assert type(compiled.model).__name__ == "OptimizedModule"
    probs = compiled.predict_proba(TEXTS)
    assert (probs - eager_probs).abs().max().item() < 1e-4


def test_variant_errors_are_clear(smoke_model_dir):
    with pytest.raises(ValueError, match="choose one of"):
        Predictor(str(smoke_model_dir), variant="fp8")
    with pytest.raises(ValueError, match="CPU only"):
        Predictor(str(smoke_model_dir), variant="int8", device="cuda")


@pytest.mark.parametrize(
    ("model", "arch", "hardware", "environ", "expected"),
    [
        ("x86 AMX", "x86_64", {"avx512f", "amx_bf16", "amx_tile"}, None, "bf16"),
        ("Graviton3", "aarch64", {"asimd", "sve", "bf16"}, None, "bf16"),
        ("Graviton2", "aarch64", {"asimd", "asimddp"}, None, "eager"),
        ("old x86", "x86_64", {"avx2"}, None, "eager"),
        (
            "capped x86",
            "x86_64",
            {"avx512f", "avx512_bf16"},
            {"ONEDNN_MAX_CPU_ISA": "AVX2"},
            "eager",
        ),
    ],
)
def test_supported_variants_per_cpu(monkeypatch, model, arch, hardware, environ, expected):
    """bf16 is a candidate only where the CPU computes it natively; the reason names the CPU."""
    from pt2aws import env
    from pt2aws.inference.selection import AUTO_CANDIDATES
    from pt2aws.inference.variants import supported_variants

    monkeypatch.setattr(env, "cpu_features", fake_cpu(model, arch, hardware, environ))
    runnable, left_out = supported_variants("cpu", AUTO_CANDIDATES)
    assert ("bf16" in runnable) is (expected == "bf16")
    assert {"eager", "int8", "int8-legacy"} <= set(runnable)
    if expected == "eager":
        assert model in left_out["bf16"]


def test_variant_support_reasons():
    from pt2aws.inference.variants import variant_support

    assert variant_support("eager", "cpu")[0] and variant_support("int8", "cpu")[0]
    ok, why = variant_support("int8", "cuda")
    assert not ok and "CPU only" in why
    with pytest.raises(ValueError, match="choose one of"):
        variant_support("fp8", "cpu")


def test_compiler_check_finds_this_machines_compiler_and_headers():
    variants.compiler_missing.cache_clear()
    assert variants.compiler_missing() is None  # the dev machines have g++ and Python.h


def test_compiler_check_names_what_is_missing(monkeypatch):
    from torch._inductor import cpp_builder, exc

    def no_cxx():
        raise exc.InvalidCxxCompiler()

    monkeypatch.setattr(cpp_builder, "get_cpp_compiler", no_cxx)
    variants.compiler_missing.cache_clear()
    try:
        why = variants.compiler_missing()
    finally:
        variants.compiler_missing.cache_clear()
    assert "needs a C++ compiler" in why and "install g++" in why and "int8-legacy" in why


def test_compiled_variants_are_not_supported_without_a_compiler(no_compiler):
    for variant in ("int8", "compile"):
        ok, why = variants.variant_support(variant, "cpu")
        assert not ok and why == NO_COMPILER
    for variant in ("eager", "bf16", "int8-legacy"):  # need no compiler
        assert variants.variant_support(variant, "cpu")[1] != NO_COMPILER
