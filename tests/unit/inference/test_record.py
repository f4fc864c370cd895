"""Notebook 02's record (``inference/metrics.json``): built by the package, schema defined once."""

from __future__ import annotations

import json

from pt2aws.inference import record
from pt2aws.inference.selection import Measured

KEYS = ("accuracy", "f1", "f1_per_class", "confusion_matrix", "num_examples",
        "majority_baseline_accuracy", "variants", "left_out", "budget_s",
        "agreement_texts", "best_variant", "throughput_samples_per_second", "latency_p50_ms",
        "auto_variant", "runtime", "cpu", "fp32_matmul", "handler_agrees", "endpoint")  # fmt: skip


def _measured():
    row = {"p50_ms": 2.0, "p90_ms": 3.0, "p99_ms": 4.0, "max_ms": 4.0, "calls": 10,
           "agreement_texts": 1000}  # fmt: skip
    rows = [{"variant": "eager", **row, "samples_per_s": 100.0, "agreement": 1.0},
            {"variant": "ort-int8", **row, "p50_ms": 1.0, "samples_per_s": 300.0, "agreement": 0.996},
            {"variant": "int8", **row, "samples_per_s": 400.0, "agreement": 0.98}]  # fmt: skip
    return Measured(rows, {"bf16": "no native bf16"}, {})


def _record(**overrides):
    metrics = {"accuracy": 0.86, "f1": 0.85, "f1_per_class": {"negative": 0.84, "positive": 0.86},
               "confusion_matrix": [[5, 1], [1, 5]], "num_examples": 12,
               "majority_baseline_accuracy": 0.5}  # fmt: skip
    measured = _measured()
    kwargs = dict(
        test_metrics=metrics,
        measured=measured,
        auto=measured.choice(),
        agreement_texts=256,
        runtime={"env": {"LRU_CACHE_CAPACITY": "1024"}, "torch_threads": 2},
        cpu="Test CPU; no native bf16",
        budget_s=120.0,
        handler_agrees=True,
    )
    return record.inference_record(**{**kwargs, **overrides})


def test_the_record_has_every_key_and_the_best_variants_figures():
    rec = _record()
    assert tuple(rec) == KEYS
    assert rec["best_variant"] == "ort-int8" and rec["auto_variant"]["variant"] == "ort-int8"
    assert rec["auto_variant"]["left_out"] == {
        "bf16": "no native bf16",
        "int8": "98.0% label agreement on 1,000 texts < 99%",
    }
    assert rec["throughput_samples_per_second"] == 300.0 and rec["latency_p50_ms"] == 1.0
    assert rec["agreement_texts"] == {"split": "validation", "count": 256}
    assert rec["left_out"] == {"bf16": "no native bf16"}
    assert rec["endpoint"] is None and rec["fp32_matmul"] == "fp32" and rec["budget_s"] == 120.0
    json.dumps(rec)  # JSON-serialisable
    for key in KEYS:  # the docstring states every key
        assert f"``{key}``" in record.inference_record.__doc__


def test_bf16_fast_math_is_recorded(monkeypatch):
    rec = _record(runtime={"env": {"DNNL_DEFAULT_FPMATH_MODE": "BF16", "OMP_NUM_THREADS": "4"}})
    assert rec["fp32_matmul"] == "bf16 (DNNL_DEFAULT_FPMATH_MODE=BF16)"
    monkeypatch.setenv("ONEDNN_DEFAULT_FPMATH_MODE", "any")  # set before the kernel started
    assert _record(runtime={})["fp32_matmul"] == "bf16 (ONEDNN_DEFAULT_FPMATH_MODE=ANY)"
    monkeypatch.setenv("ONEDNN_DEFAULT_FPMATH_MODE", "STRICT")
    assert _record(runtime={"env": {"DNNL_DEFAULT_FPMATH_MODE": "STRICT"}})["fp32_matmul"] == "fp32"


def test_cost_table_and_report_read_the_record(tmp_path):
    """The readers of inference/metrics.json find what they read in a built record."""
    from pt2aws.report import _inference
    from pt2aws.sizing.serving_cost import batched_vs_single

    rec = _record()
    (tmp_path / "metrics.json").write_text(json.dumps(rec))
    load = {"requests": 1, "throughput_per_s": 1.0}
    assert "batched ort-int8" in batched_vs_single(tmp_path / "metrics.json", load, "custom")
    assert "batched eager" in batched_vs_single(tmp_path / "metrics.json", load, "dlc")
    lines = "\n".join(_inference(rec))
    assert "ort-int8: 300.0 samples/s" in lines and "| test accuracy | 0.8600 |" in lines
