"""Notebook 02's record, ``inference/metrics.json``: its schema, defined once.

Notebook 02 measures; :func:`inference_record` assembles what it measured into one JSON object,
and :func:`write_record` saves it in the run folder (``RunDir.inference_metrics``). Readers:
:mod:`pt2aws.sizing.serving_cost` (the variant an endpoint serves and its batch-32 throughput),
:mod:`pt2aws.report` (the run's summary) and the notebook tests.

Schema (every key always present; ``None`` where a part did not run)::

    # test-set quality, pt2aws.metrics.classification_metrics on the test split
    "accuracy": float, "f1": float (macro), "f1_per_class": {label: float},
    "confusion_matrix": [[int]] (rows true, columns predicted), "num_examples": int,
    "majority_baseline_accuracy": float,
    # the variants, pt2aws.inference.selection.compare_variants
    "variants": [row], one per variant timed: "variant", "p50_ms", "p90_ms", "p99_ms",
        "max_ms", "mean_ms", "calls" (batch-1 latency; p99 only means a p99 from >= 100
        calls), "samples_per_s", "runs_samples_per_s" (batch 32), "agreement" (share of
        labels equal to fp32 eager's on the agreement texts), "setup_s",
    "agreement_texts": {"split": "validation", "count": int} (the texts notebook 03's archive
        records agreement on, variants.json),
    "skipped": {variant: reason} (could not run here), "left_out": {variant: reason} (this CPU
        emulates it: not timed unless asked),
    "best_variant": str (fastest with agreement >= 0.99), "auto_variant": {"variant", "reason"},
    "throughput_samples_per_second": float, "latency_p50_ms": float (the best variant's),
    # the machine
    "runtime": pt2aws.inference.runtime.apply_runtime_settings()'s record,
    "cpu": str (what the CPU does natively, as measured),
    "fp32_matmul": str ("fp32", or "bf16 (DNNL_DEFAULT_FPMATH_MODE=BF16)": then "fp32" rows
        computed their matrix products in bf16),
    # the handler and the serving stack
    "handler_agrees": bool | None, "endpoint": serving check summary | None.
"""

from __future__ import annotations

from pathlib import Path

#: Keys every record has (the schema above).
KEYS = (
    "accuracy",
    "f1",
    "f1_per_class",
    "confusion_matrix",
    "num_examples",
    "majority_baseline_accuracy",
    "variants",
    "agreement_texts",
    "skipped",
    "left_out",
    "best_variant",
    "auto_variant",
    "throughput_samples_per_second",
    "latency_p50_ms",
    "runtime",
    "cpu",
    "fp32_matmul",
    "handler_agrees",
    "endpoint",
)


def fp32_matmul_mode(env: dict[str, str]) -> str:
    """How oneDNN computes fp32 matrix products under ``env``: ``"fp32"``, or ``"bf16
    (DNNL_DEFAULT_FPMATH_MODE=BF16)"`` where that fast-math mode is set (the Graviton guide's
    setting on Graviton3+: "may introduce a drop in accuracy", oneDNN's fpmath-mode page)."""
    for name in ("ONEDNN_DEFAULT_FPMATH_MODE", "DNNL_DEFAULT_FPMATH_MODE"):
        mode = (env.get(name) or "").upper()
        if mode in ("BF16", "ANY"):
            return f"bf16 ({name}={mode})"
    return "fp32"


def inference_record(
    *,
    test_metrics: dict,
    majority_baseline: float,
    comparison: dict,
    agreement_texts: int,
    runtime: dict,
    cpu: str,
    left_out: dict[str, str] | None = None,
    handler_agrees: bool | None = None,
    endpoint: dict | None = None,
) -> dict:
    """Notebook 02's record (module docstring: the schema).

    Args:
        test_metrics: :func:`pt2aws.metrics.classification_metrics` on the test split.
        majority_baseline: the majority-class accuracy on the test split.
        comparison: :func:`pt2aws.inference.selection.compare_variants`' result.
        agreement_texts: how many validation texts ``comparison`` measured on.
        runtime: :func:`pt2aws.inference.runtime.apply_runtime_settings`' record.
        cpu: a one-line description of the CPU (``cpu_features().description``).
        left_out: variants this CPU emulates, left out of ``comparison`` with the reason.
        handler_agrees: the in-process handler's labels equal the Predictor's.
        endpoint: the serving check's summary (:mod:`pt2aws.standins.serving_check`).

    Returns:
        The record, JSON-serialisable.

    Raises:
        ValueError: ``comparison`` has no row for its best variant.
    """
    rows = {r["variant"]: r for r in comparison["rows"]}
    best = comparison["best"]
    if best not in rows:
        raise ValueError(f"best variant {best!r} has no row among {sorted(rows)}")
    record = {
        **{k: test_metrics[k] for k in ("accuracy", "f1", "f1_per_class", "confusion_matrix")},
        "num_examples": test_metrics["num_examples"],
        "majority_baseline_accuracy": majority_baseline,
        "variants": comparison["rows"],
        "agreement_texts": {"split": "validation", "count": agreement_texts},
        "skipped": dict(comparison.get("skipped") or {}),
        "left_out": dict(left_out or {}),
        "best_variant": best,
        "auto_variant": dict(comparison["auto"]),
        "throughput_samples_per_second": float(rows[best]["samples_per_s"]),
        "latency_p50_ms": float(rows[best]["p50_ms"]),
        "runtime": runtime,
        "cpu": cpu,
        "fp32_matmul": fp32_matmul_mode(runtime.get("env") or {}),
        "handler_agrees": handler_agrees,
        "endpoint": endpoint,
    }
    return record


def write_record(path: str | Path, record: dict) -> Path:
    """Save ``record`` (:func:`inference_record`) as JSON at ``path``; returns ``path``.

    Raises:
        ValueError: ``record`` lacks keys of the schema.
    """
    from pt2aws.rundir import write_json

    missing = [k for k in KEYS if k not in record]
    if missing:
        raise ValueError(f"inference record lacks {missing}: build it with inference_record()")
    write_json(path, record)
    return Path(path)
