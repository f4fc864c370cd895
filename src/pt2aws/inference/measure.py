"""Timing inference in wall-clock seconds on a shared machine: predictors (``predict_ids(texts)``,
``batch_size``) are compared in rounds, each once per round, and medians are reported."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

import numpy as np

LATENCY_PERCENTILES = (50, 90, 99)
#: Calls below which a table shows the maximum instead of a p99 (the slowest calls decide it).
P99_MIN_CALLS = 100
#: Batch-1 calls and batch-32 passes a predictor keeps when it reaches its share of a budget.
MIN_CALLS, MIN_PASSES = 3, 1
#: The two fastest are measured again when this close (fraction of samples/s).
CLOSE = 0.10


def latency_summary(seconds: Sequence[float]) -> dict:
    """``{"p50_ms", "p90_ms", "p99_ms", "mean_ms", "max_ms", "calls"}`` of per-call seconds;
    ValueError for none."""
    if len(seconds) == 0:
        raise ValueError("latency_summary needs at least one timing")
    ms = 1000.0 * np.asarray(seconds, dtype=float)
    percentiles = {f"p{q}_ms": float(np.percentile(ms, q)) for q in LATENCY_PERCENTILES}
    return percentiles | {"mean_ms": float(ms.mean()), "max_ms": float(ms.max()), "calls": len(ms)}


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def time_calls(fn: Callable[[], object], calls: int) -> list[float]:
    """Seconds per call of ``fn``, ``calls`` times after 2 untimed calls."""
    fn()
    fn()
    return [_timed(fn) for _ in range(calls)]


def compare_predictors(predictors: dict, texts: Sequence[str], *, latency_calls: int = 10,
                       repeats: int = 3, spent: dict | None = None, share_s: float | None = None,
                       log: Callable[[str], None] | None = None) -> list[dict]:  # fmt: skip
    """Label agreement with ``eager``, batch-1 latency and batch-32 throughput of each: a
    pass over ``texts`` and a call (labels, warm-up), then ``latency_calls`` rounds of one-text
    calls and ``repeats`` rounds of batch-32 passes; the two fastest keeping 99% agreement get
    ``repeats`` more when within :data:`CLOSE`. With ``share_s``, a predictor whose seconds
    (``spent``, e.g. its build, plus its calls) reach it stops at :data:`MIN_CALLS` calls and
    :data:`MIN_PASSES` passes. Rows: ``variant``, :func:`latency_summary`'s keys,
    ``samples_per_s`` (median), ``runs_samples_per_s``, ``agreement`` (on ``agreement_texts``),
    ``stopped``, ``seconds``.
    """
    from pt2aws.metrics.agreement import AGREEMENT_TARGET, label_agreement

    say = log or (lambda line: None)
    spent = {name: float((spent or {}).get(name, 0.0)) for name in predictors}
    labels = {}
    for name, p in predictors.items():
        t0 = time.perf_counter()
        labels[name] = p.predict_ids(texts)
        p.predict_ids(texts[:1])  # warm-up at batch 1 (a compiled model may specialise)
        spent[name] += time.perf_counter() - t0
    agreement = {name: label_agreement(labels["eager"], labels[name]) for name in predictors}
    seconds = {name: [] for name in predictors}
    rates = {name: [] for name in predictors}

    def active(name: str, done: int = 0, minimum: int = 0) -> bool:
        return share_s is None or done < minimum or spent[name] < share_s

    for r in range(latency_calls):
        for name, p in predictors.items():
            if active(name, len(seconds[name]), MIN_CALLS):
                one = [texts[r % len(texts)]]
                seconds[name].append(_timed(lambda p=p, one=one: p.predict_ids(one)))
                spent[name] += seconds[name][-1]

    def passes(names: Sequence[str]) -> None:
        for r in range(repeats):
            timed = [name for name in names if active(name, len(rates[name]), MIN_PASSES)]
            if not timed:
                break
            for name in timed:
                took = _timed(lambda p=predictors[name]: p.predict_ids(texts))
                rates[name].append(len(texts) / took)
                spent[name] += took
            rounds = ", ".join(f"{n} {rates[n][-1]:,.0f}/s" for n in timed)
            say(f"  pass {r + 1}/{repeats}: {rounds}")

    sizes = {name: p.batch_size for name, p in predictors.items()}
    try:
        for p in predictors.values():
            p.batch_size = 32
        passes(list(predictors))
        median = {name: statistics.median(rates[name]) for name in predictors}
        good = [n for n in predictors if agreement[n] >= AGREEMENT_TARGET and active(n)]
        top = sorted(good, key=lambda n: -median[n])[:2]
        if len(top) == 2 and median[top[0]] <= (1 + CLOSE) * median[top[1]]:
            say(f"{top[0]} and {top[1]} within {CLOSE:.0%}: measured again")
            passes(top)
    finally:
        for name, p in predictors.items():
            p.batch_size = sizes[name]
    return [
        {
            "variant": name,
            **latency_summary(seconds[name]),
            "samples_per_s": statistics.median(rates[name]),
            "runs_samples_per_s": rates[name],
            "agreement": agreement[name],
            "agreement_texts": len(texts),
            "stopped": None
            if len(seconds[name]) == latency_calls and len(rates[name]) >= repeats
            else "share of the budget reached",
            "seconds": round(spent[name], 1),
        }
        for name in predictors
    ]


def format_table(rows: Sequence[dict], baseline: str = "eager") -> str:
    """A Markdown table of :func:`compare_predictors` rows (max instead of p99 below
    :data:`P99_MIN_CALLS` calls)."""
    base = next((r["samples_per_s"] for r in rows if r["variant"] == baseline), None)
    tail = "max" if any(r["calls"] < P99_MIN_CALLS for r in rows) else "p99"
    lines = [f"| variant | p50 ms | p90 ms | {tail} ms | samples/s (batch 32) | x {baseline} | "
             "agreement |", "|---" * 7 + "|"]  # fmt: skip
    for r in rows:
        ratio = f"{r['samples_per_s'] / base:.2f}" if base else "-"
        lines.append(f"| {r['variant']} | {r['p50_ms']:.1f} | {r['p90_ms']:.1f} | "
                     f"{r[tail + '_ms']:.1f} | {r['samples_per_s']:.1f} | {ratio} | "
                     f"{r['agreement']:.4f} |")  # fmt: skip
    return "\n".join(lines)
