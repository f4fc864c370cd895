"""Variants a CPU only emulates are left out by default, with the reason (issue 16)."""

from __future__ import annotations

import pytest
from support.cpu import fake_cpu

from pt2aws import env
from pt2aws.inference import variants

ALL = ["eager", "compile", "bf16", "int8", "int8-legacy", "ort-fp32", "ort-int8"]

CPUS = {  # kernel flag names (/proc/cpuinfo spelling)
    "Zen 5": {"avx2", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni", "avx512_bf16"},
    "Ice Lake": {"avx2", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni"},
    "Zen 2": {"avx2", "fma"},
}


@pytest.mark.parametrize(
    ("cpu", "left_out"),
    [("Zen 5", []), ("Ice Lake", ["bf16"]), ("Zen 2", ["bf16", "int8"])],
)
def test_default_variants_leave_out_what_the_cpu_emulates(monkeypatch, cpu, left_out):
    monkeypatch.setattr(env, "cpu_features", fake_cpu(cpu, "x86_64", CPUS[cpu]))
    kept, reasons = variants.default_variants(ALL)
    assert sorted(reasons) == sorted(left_out)
    assert kept == [v for v in ALL if v not in left_out]
    # int8-legacy (fbgemm) and ort-int8 (MLAS) have AVX2/NEON int8 kernels: never left out
    assert {"eager", "int8-legacy", "ort-int8", "ort-fp32"} <= set(kept)
    if "int8" in reasons:
        assert reasons["int8"].startswith("no int8 dot-product instructions (CPU: Zen 2 has no")
        assert reasons["int8"].endswith(variants.INT8_SLOW_PATH)
        assert (
            "no fast path without VNNI/AMX" in reasons["int8"] and "emulated" not in reasons["int8"]
        )
    if "bf16" in reasons:
        assert reasons["bf16"].startswith(f"no native bf16 (CPU: {cpu} has no")
        assert reasons["bf16"].endswith("bf16 is emulated")


def test_the_caps_count_as_a_weaker_cpu(monkeypatch):
    caps = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    monkeypatch.setattr(env, "cpu_features", fake_cpu("Zen 5", "x86_64", CPUS["Zen 5"], caps))
    assert sorted(variants.emulated_variants(ALL)) == ["bf16", "int8"]


def test_emulated_variants_are_timed_when_asked_and_a_gpu_emulates_none(monkeypatch):
    monkeypatch.setattr(env, "cpu_features", fake_cpu("Zen 2", "x86_64", CPUS["Zen 2"]))
    assert variants.default_variants(ALL, include_emulated=True) == (ALL, {})
    assert variants.emulated_variants(ALL, "cuda") == {}


def test_the_benchmark_leaves_them_out_unless_asked(monkeypatch, smoke_model_dir):
    import sys
    from pathlib import Path

    bench = Path(__file__).resolve().parents[3] / "benchmarks"
    monkeypatch.syspath_prepend(str(bench))
    import inference_speed

    monkeypatch.setattr(env, "cpu_features", fake_cpu("Zen 2", "x86_64", CPUS["Zen 2"]))
    argv = ["--model-dir", str(smoke_model_dir), "--variants", "eager,int8,bf16,int8-legacy",
            "--no-pipeline"]  # fmt: skip
    predictors, skipped, left_out = inference_speed.build_predictors(
        smoke_model_dir, inference_speed.parse_args(argv)
    )
    assert list(predictors) == ["eager", "int8-legacy"] and skipped == {}
    assert sorted(left_out) == ["bf16", "int8"] and "Zen 2" in left_out["int8"]
    predictors, _, left_out = inference_speed.build_predictors(
        smoke_model_dir, inference_speed.parse_args([*argv, "--variants", "eager,bf16",
                                                      "--include-emulated"])
    )  # fmt: skip
    assert list(predictors) == ["eager", "bf16"] and left_out == {}
    sys.modules.pop("inference_speed", None)
