"""Notebook 02's record, ``inference/metrics.json``, read by :mod:`pt2aws.sizing.serving_cost`,
:mod:`pt2aws.report` and the notebook tests."""

from __future__ import annotations

import os


def inference_record(*, test_metrics: dict, measured, auto, agreement_texts: int, runtime: dict,
                     cpu: str, budget_s: float | None = None, handler_agrees: bool | None = None,
                     endpoint: dict | None = None) -> dict:  # fmt: skip
    """Every key always present (None where a part did not run): the test split's ``accuracy``,
    ``f1`` (macro), ``f1_per_class``, ``confusion_matrix`` (rows true), ``num_examples``,
    ``majority_baseline_accuracy``; ``variants`` (``measured.rows``, a
    :class:`~pt2aws.inference.selection.Measured`), ``left_out``, ``budget_s``,
    ``agreement_texts``, ``best_variant`` (the fastest keeping 99%) with its
    ``throughput_samples_per_second`` and ``latency_p50_ms``, ``auto_variant`` (``auto``'s
    choice), ``runtime``, ``cpu``, ``fp32_matmul`` (``"fp32"``, or ``"bf16 (<name>=<mode>)"``
    where oneDNN's fast math runs fp32 products in bf16), ``handler_agrees``, ``endpoint``."""
    from pt2aws.inference.selection import fastest_agreeing

    best = fastest_agreeing(measured.rows)
    keys = ("accuracy", "f1", "f1_per_class", "confusion_matrix", "num_examples",
            "majority_baseline_accuracy")  # fmt: skip
    env = {**os.environ, **(runtime.get("env") or {})}
    fast = [f"bf16 ({name}={env[name].upper()})"
            for name in ("ONEDNN_DEFAULT_FPMATH_MODE", "DNNL_DEFAULT_FPMATH_MODE")
            if env.get(name, "").upper() in ("BF16", "ANY")]  # fmt: skip
    return {
        **{k: test_metrics[k] for k in keys},
        "variants": measured.rows,
        "left_out": dict(measured.skipped),
        "budget_s": budget_s,
        "agreement_texts": {"split": "validation", "count": agreement_texts},
        "best_variant": best["variant"],
        "throughput_samples_per_second": float(best["samples_per_s"]),
        "latency_p50_ms": float(best["p50_ms"]),
        "auto_variant": {"variant": auto.variant, "reason": auto.reason, "left_out": auto.left_out},
        "runtime": runtime,
        "cpu": cpu,
        "fp32_matmul": (fast or ["fp32"])[0],
        "handler_agrees": handler_agrees,
        "endpoint": endpoint,
    }
