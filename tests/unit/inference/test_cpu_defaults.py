"""Variants a CPU only emulates are left out by default, with the reason (issue 16)."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import pytest

from pt2aws.inference import variants


@dataclass(frozen=True)
class Cap:
    available: bool
    reason: str

    def __bool__(self):
        return self.available


def cpu(int8_dot: bool, bf16: bool, name: str = "Test CPU"):
    """A faked ``cpu_features()`` answer."""
    return SimpleNamespace(
        int8_dot=Cap(int8_dot, f"{name} {'has' if int8_dot else 'has no'} AVX512-VNNI"),
        bf16_native=Cap(bf16, f"{name} {'has' if bf16 else 'has no'} AVX512-BF16"),
        description=name,
    )


ALL = ["eager", "compile", "bf16", "int8", "int8-legacy", "ort-fp32", "ort-int8"]


@pytest.mark.parametrize(
    ("int8_dot", "bf16", "left_out"),
    [
        (True, True, []),  # e.g. Sapphire Rapids, Graviton3, this Zen 5
        (True, False, ["bf16"]),  # e.g. Ice Lake, Graviton2
        (False, False, ["bf16", "int8"]),  # e.g. Haswell..Skylake client, Zen 2/3
    ],
)
def test_default_variants_leave_out_what_the_cpu_emulates(int8_dot, bf16, left_out):
    kept, reasons = variants.default_variants(ALL, features=cpu(int8_dot, bf16))
    assert sorted(reasons) == sorted(left_out)
    assert kept == [v for v in ALL if v not in left_out]
    # int8-legacy (fbgemm) and ort-int8 (MLAS) have AVX2/NEON int8 kernels: never left out
    assert {"eager", "int8-legacy", "ort-int8", "ort-fp32"} <= set(kept)
    if "int8" in reasons:
        assert reasons["int8"].startswith("no int8 dot-product instructions (Test CPU has no")
    if "bf16" in reasons:
        assert "no native bf16 (Test CPU has no AVX512-BF16)" in reasons["bf16"]


def test_emulated_variants_are_timed_when_asked():
    kept, reasons = variants.default_variants(
        ALL, include_emulated=True, features=cpu(False, False)
    )
    assert kept == ALL and reasons == {}


def test_this_cpu_is_read_through_cpu_features(monkeypatch):
    monkeypatch.setattr(variants, "cpu_features", lambda: cpu(False, True, "Fake AVX2"))
    assert list(variants.emulated_variants(["int8", "bf16", "eager"])) == ["int8"]


def test_the_benchmark_leaves_them_out_unless_asked(monkeypatch, smoke_model_dir):
    import sys
    from pathlib import Path

    bench = Path(__file__).resolve().parents[3] / "benchmarks"
    monkeypatch.syspath_prepend(str(bench))
    import inference_speed

    monkeypatch.setattr(variants, "cpu_features", lambda: cpu(False, False, "Fake AVX2"))
    args = inference_speed.parse_args(
        ["--model-dir", str(smoke_model_dir), "--variants", "eager,int8,bf16,int8-legacy",
         "--no-pipeline"]
    )  # fmt: skip
    predictors, skipped, left_out = inference_speed.build_predictors(smoke_model_dir, args)
    assert list(predictors) == ["eager", "int8-legacy"] and skipped == {}
    assert sorted(left_out) == ["bf16", "int8"] and "Fake AVX2" in left_out["int8"]
    sys.modules.pop("inference_speed", None)
