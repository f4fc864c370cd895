"""Timing inference: batch-1 latency, batch-32 throughput, label agreement, the table.

The measuring primitives that ``variant="auto"`` (:mod:`pt2aws.inference.selection`, also at
an endpoint's start-up), notebook 02, :mod:`pt2aws.sizing.serving_cost` and ``benchmarks/`` share.
All timings are wall-clock ``time.perf_counter`` seconds on whatever else the machine is doing,
so compare rows measured in the same run only.

Definitions:

* latency at batch 1: one text per call, after ``warmup`` calls; p50/p90/p99 over the calls, ms
  (:func:`percentile`: linear interpolation between the closest ranks, numpy's default; the
  endpoint load test, :func:`pt2aws.aws.invoke.load_test`, uses the same definition).
* throughput at batch 32: all texts in batches of 32, repeated; median samples/s over repeats.
  When several predictors are compared (:func:`compare_predictors`) the repeats are interleaved
  (each predictor once, then again), so a slow patch of a shared machine hits all alike.
* agreement: the share of texts whose label equals fp32 eager's.

A "predictor" here is anything with ``predict_ids(texts) -> list[int]`` and a ``batch_size``
attribute: :class:`pt2aws.inference.predictor.Predictor`, a built variant
(:class:`pt2aws.inference.batching.BatchedClassifier`, ONNX Runtime's included) or
``PipelinePredictor`` (the HF pipeline, ``benchmarks/peers/pipeline.py``). :func:`measure_endpoint` times a running
endpoint's requests the same way.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence

#: The latency percentiles every table and record reports.
LATENCY_PERCENTILES = (50, 90, 99)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values``, by linear interpolation between the two
    closest ranks: position ``(n - 1) * q / 100`` in the sorted values (numpy's default method,
    ``"linear"``; Hyndman and Fan's definition 7). The one percentile definition in pt2aws: the
    predictor tables (:func:`latency_summary`) and the endpoint load test
    (:func:`pt2aws.aws.invoke.load_test`) both use it.

    Args:
        values: the samples, in any order (e.g. per-request latencies in ms).
        q: the percentile, 0 to 100 (50 is the median).

    Raises:
        ValueError: no values, or ``q`` outside 0-100.
    """
    if len(values) == 0 or not 0 <= q <= 100:
        raise ValueError(f"percentile needs at least one value and 0 <= q <= 100, got q={q}")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


#: Calls below which a p99 is not reported as one (the largest calls decide it).
P99_MIN_CALLS = 100


def latency_summary(seconds: Sequence[float]) -> dict:
    """p50/p90/p99 and mean of per-call latencies.

    Args:
        seconds: one wall-clock duration per call, in seconds.

    Returns:
        ``{"p50_ms", "p90_ms", "p99_ms", "mean_ms", "max_ms", "calls"}`` (milliseconds;
        percentiles by :func:`percentile`). Below :data:`P99_MIN_CALLS` calls ``p99_ms`` is in
        effect the maximum (10 calls: 91% of the way from the 9th value to the 10th): tables
        show ``max_ms`` then (:func:`format_table`).

    Raises:
        ValueError: no samples.
    """
    if len(seconds) == 0:
        raise ValueError("latency_summary needs at least one timing")
    ms = [1000.0 * float(s) for s in seconds]
    return {
        **{f"p{q}_ms": percentile(ms, q) for q in LATENCY_PERCENTILES},
        "mean_ms": sum(ms) / len(ms),
        "max_ms": max(ms),
        "calls": len(ms),
    }


def time_calls(fn: Callable[[], object], calls: int, warmup: int = 2) -> list[float]:
    """Run ``fn`` ``warmup`` times untimed, then ``calls`` times; per-call seconds."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def throughput(fn: Callable[[], object], n_samples: int, repeats: int = 3) -> dict:
    """Median samples/s of ``fn`` over ``repeats`` timed runs, after one untimed warm-up run.

    Args:
        fn: processes ``n_samples`` samples per call (e.g. one pass over a list of texts).
        n_samples: samples ``fn`` processes per call.
        repeats: timed calls (wall clock, ``time.perf_counter``).

    Returns:
        ``{"samples_per_s": median, "runs_samples_per_s": [one rate per timed call]}``.
    """
    fn()
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        rates.append(n_samples / (time.perf_counter() - t0))
    return {"samples_per_s": float(statistics.median(rates)), "runs_samples_per_s": rates}


def interleaved_throughput(
    fns: dict[str, Callable[[], object]], n_samples: int, repeats: int = 3
) -> dict[str, dict]:
    """:func:`throughput` of several functions, repeats interleaved (all once, then again).

    Returns:
        ``{name: {"samples_per_s": median, "runs_samples_per_s": [...]}}``.
    """
    for fn in fns.values():
        fn()  # warm-up
    rates: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            rates[name].append(n_samples / (time.perf_counter() - t0))
    return {
        name: {"samples_per_s": float(statistics.median(r)), "runs_samples_per_s": r}
        for name, r in rates.items()
    }


def measure_endpoint(endpoint, text: str, calls: int = 50, warmup: int = 3) -> dict:
    """Request latency and sequential requests/s of a running local endpoint for one text.

    Args:
        endpoint: a started local endpoint with ``invoke(body) -> (status, data, headers)``
            (:class:`pt2aws.standins.torchserve.LocalEndpoint`).
        text: one short review, sent as ``{"inputs": text}`` (``application/json``).

    Returns:
        :func:`latency_summary` keys plus ``requests_per_s`` (one client, back to back).

    Raises:
        RuntimeError: a request did not return HTTP 200.
    """
    import json

    body = json.dumps({"inputs": text})

    def call():
        status, data, _ = endpoint.invoke(body)
        if status != 200:
            raise RuntimeError(f"endpoint answered {status}: {data[:200]!r}")

    lat = time_calls(call, calls, warmup)
    return {
        "variant": "local-endpoint",
        **latency_summary(lat),
        "requests_per_s": float(len(lat) / sum(lat)),
    }


def compare_predictors(
    predictors: dict,
    texts: Sequence[str],
    *,
    reference: str = "eager",
    latency_calls: int = 10,
    repeats: int = 3,
) -> list[dict]:
    """Batch-1 latency, batch-32 throughput (interleaved repeats) and label agreement of each.

    Args:
        predictors: ``{row name: predictor}`` (see the module docstring); one is ``reference``.
        texts: texts for the throughput and the agreement.
        reference: the row whose labels the others are compared with.
        latency_calls: batch-1 calls per predictor (the first ``latency_calls`` texts).
        repeats: timed throughput passes per predictor.

    Returns:
        One row per predictor, in order: ``variant`` (the row name), :func:`latency_summary`'s
        keys, ``samples_per_s``, ``runs_samples_per_s`` and ``agreement``.

    Raises:
        KeyError: ``reference`` is not among ``predictors``.
    """
    from pt2aws.metrics.agreement import label_agreement

    labels = {name: p.predict_ids(texts) for name, p in predictors.items()}
    rows = {}
    for name, p in predictors.items():
        for text in list(texts)[:2]:  # warm-up
            p.predict_ids([text])
        lat = [_time_one(p, text) for text in list(texts)[:latency_calls]]
        rows[name] = {
            "variant": name,
            **latency_summary(lat),
            "agreement": label_agreement(labels[reference], labels[name]),
        }
    sizes = {name: p.batch_size for name, p in predictors.items()}
    try:
        for p in predictors.values():
            p.batch_size = 32
        fns = {name: (lambda p=p: p.predict_ids(texts)) for name, p in predictors.items()}
        for name, thr in interleaved_throughput(fns, len(texts), repeats).items():
            rows[name].update(thr)
    finally:
        for name, p in predictors.items():
            p.batch_size = sizes[name]
    return list(rows.values())


def _time_one(predictor, text: str) -> float:
    t0 = time.perf_counter()
    predictor.predict_ids([text])
    return time.perf_counter() - t0


def format_table(rows: Sequence[dict], baseline: str = "hf-pipeline") -> str:
    """Markdown table of :func:`compare_predictors` rows (and :func:`measure_endpoint`'s).

    Columns: variant, p50/p90 ms at batch 1 and p99 ms (``max ms`` when a row has fewer than
    :data:`P99_MIN_CALLS` calls: a p99 of 10 calls is their maximum), samples/s at batch 32,
    ``x <baseline>`` (ratio to the baseline row's samples/s), label agreement with fp32 eager
    (when a row has it).
    """
    base = next((r["samples_per_s"] for r in rows if r["variant"] == baseline), None)
    few = any(r.get("calls", P99_MIN_CALLS) < P99_MIN_CALLS for r in rows)
    tail, tail_key = ("max ms", "max_ms") if few else ("p99 ms", "p99_ms")
    lines = [
        f"| variant | p50 ms | p90 ms | {tail} | samples/s (batch 32) | x {baseline} | agreement |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        sps = r.get("samples_per_s")
        ratio = f"{sps / base:.2f}" if sps and base else "-"
        agree = f"{r['agreement']:.4f}" if r.get("agreement") is not None else "-"
        sps_s = (
            f"{sps:.1f}"
            if sps
            else (f"{r['requests_per_s']:.1f} req/s" if "requests_per_s" in r else "-")
        )
        last = r.get(tail_key, r["p99_ms"])
        lines.append(
            f"| {r['variant']} | {r['p50_ms']:.1f} | {r['p90_ms']:.1f} | {last:.1f} | "
            f"{sps_s} | {ratio} | {agree} |"
        )
    return "\n".join(lines)
