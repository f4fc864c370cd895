"""Tests of :mod:`pt2aws.inference.variants`: the variants, where each runs, what is slow here."""

import sys
from pathlib import Path

import pytest
import torch
from support.compiler import NO_COMPILER
from support.cpu import fake_cpu
from support.texts import TEXTS

from pt2aws import env
from pt2aws.inference import variants
from pt2aws.inference.predictor import Predictor

ALL = list(variants.VARIANTS)
CPUS = {  # kernel flag names (/proc/cpuinfo spelling)
    "Zen 5": ("x86_64", {"avx2", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni", "avx512_bf16"}),
    "Ice Lake": ("x86_64", {"avx2", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni"}),
    "Zen 2": ("x86_64", {"avx2", "fma"}),
    "x86 AMX": ("x86_64", {"avx512f", "amx_bf16", "amx_tile", "amx_int8"}),
    "Graviton3": ("aarch64", {"asimd", "sve", "bf16", "asimddp", "i8mm"}),
    "Graviton2": ("aarch64", {"asimd", "asimddp"}),
}  # fmt: skip


@pytest.mark.parametrize(
    ("cpu", "slow"),
    [("Zen 5", []), ("Ice Lake", ["bf16"]), ("Zen 2", ["bf16", "int8"]), ("x86 AMX", []),
     ("Graviton3", []), ("Graviton2", ["bf16"])],
)  # fmt: skip
def test_what_a_cpu_runs_slowly_is_left_out_with_the_reason(monkeypatch, cpu, slow):
    monkeypatch.setattr(env, "cpu_features", fake_cpu(cpu, *CPUS[cpu]))
    kept, left_out = variants.runnable_variants(ALL)
    assert sorted(left_out) == sorted(slow) and kept == [v for v in ALL if v not in slow]
    # ort-int8 (ONNX Runtime's MLAS) has AVX2/NEON int8 kernels
    assert {"eager", "ort-int8", "ort-fp32"} <= set(kept)
    if "int8" in left_out:
        assert left_out["int8"].startswith(f"no int8 dot products ({cpu} has no")
        assert (
            left_out["int8"].endswith(variants.INT8_SLOW_PATH)
            and "emulated" not in left_out["int8"]
        )
    if "bf16" in left_out:
        assert left_out["bf16"].startswith(f"no native bf16 ({cpu} has no")
        assert left_out["bf16"].endswith("bf16 is emulated")
    assert variants.runnable_variants(ALL, include_slow=True) == (ALL, {})
    assert variants.slow_here(ALL, "cuda") == {}  # a GPU emulates none of these


def test_the_caps_count_as_a_weaker_cpu(monkeypatch):
    caps = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    monkeypatch.setattr(env, "cpu_features", fake_cpu("Zen 5", *CPUS["Zen 5"], caps))
    assert sorted(variants.slow_here(ALL)) == ["bf16", "int8"]


@pytest.mark.parametrize(("variant", "tol"), [("int8", 0.02), ("bf16", 0.03)])
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
    assert bool((probs.argmax(-1)[confident] == eager_probs.argmax(-1)[confident]).all())


def test_a_slow_variant_runs_with_a_warning_naming_why(smoke_model_dir, monkeypatch):
    monkeypatch.setattr(env, "cpu_features", fake_cpu("Zen 2", *CPUS["Zen 2"]))
    with pytest.warns(UserWarning, match="variant bf16: no native bf16 .*Zen 2"):
        predictor = Predictor(str(smoke_model_dir), variant="bf16")
    assert predictor.variant_reason.startswith("requested; no native bf16")


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
    assert (compiled.predict_proba(TEXTS) - eager_probs).abs().max().item() < 1e-4


def test_variant_errors_are_clear(smoke_model_dir):
    with pytest.raises(ValueError, match="choose one of"):
        Predictor(str(smoke_model_dir), variant="fp8")
    with pytest.raises(ValueError, match="CPU only"):
        Predictor(str(smoke_model_dir), variant="int8", device="cuda")
    assert variants.cannot_run("eager") is None and variants.cannot_run("int8") is None
    assert "CPU only" in variants.cannot_run("int8", "cuda")
    assert "CPU provider" in variants.cannot_run("ort-fp32", "cuda")
    with pytest.raises(ValueError, match="variant 'fp8': choose one of"):
        variants.cannot_run("fp8")


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
    assert "needs a C++ compiler" in why and "install g++" in why and "ort-int8" in why


def test_compiled_variants_are_not_supported_without_a_compiler(no_compiler):
    for variant in ("int8", "compile"):
        assert variants.cannot_run(variant) == NO_COMPILER
    for variant in ("eager", "bf16", "ort-int8"):  # need no compiler
        assert variants.cannot_run(variant) is None
    assert variants.runnable_variants(["eager", "int8"], include_slow=True)[1] == {
        "int8": NO_COMPILER
    }


def test_the_benchmark_leaves_slow_variants_out_unless_asked(monkeypatch, smoke_model_dir):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[3] / "benchmarks"))
    import inference_speed

    monkeypatch.setattr(env, "cpu_features", fake_cpu("Zen 2", *CPUS["Zen 2"]))
    argv = [
        "--model-dir",
        str(smoke_model_dir),
        "--variants",
        "eager,int8,bf16",
        "--no-pipeline",
    ]
    predictors, left_out = inference_speed.build_predictors(
        smoke_model_dir, inference_speed.parse_args(argv)
    )
    assert list(predictors) == ["eager"]
    assert sorted(left_out) == ["bf16", "int8"] and "Zen 2" in left_out["int8"]
    args = inference_speed.parse_args([*argv, "--variants", "eager,bf16", "--include-slow"])
    predictors, left_out = inference_speed.build_predictors(smoke_model_dir, args)
    assert list(predictors) == ["eager", "bf16"] and left_out == {}
    sys.modules.pop("inference_speed", None)
