"""``auto``: the fastest variant that keeps labels, measured where it serves. Agreement is
recorded where the archive is packaged (:func:`variant_report`, ``variants.json``); the endpoint
times the ``eligible`` ones at start-up (:func:`serving_variant`), as notebook 02 does here."""

from __future__ import annotations

import gc
import json
import logging
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from pt2aws.env.machine import cpu_name
from pt2aws.inference.measure import compare_predictors, format_table
from pt2aws.inference.variants import (
    COMPILED_VARIANTS,
    ORT_VARIANTS,
    Classifier,
    build_variant,
    load_fp32,
    require_variant,
    runnable_variants,
)
from pt2aws.metrics.agreement import AGREEMENT_TARGET, label_agreement

logger = logging.getLogger(__name__)

#: What ``auto`` weighs against eager, recorded at packaging and timed where it serves
#: (``compile``'s one-off compile rarely pays back on a CPU).
AUTO_CANDIDATES = ("bf16", "int8", "ort-fp32", "ort-int8")
#: How much faster than eager another variant must be (a shared machine's run-to-run noise).
MARGIN = 0.05
#: Largest batch-1 median latency, as a multiple of eager's, that ``auto`` accepts.
MAX_LATENCY_RATIO = 2.0
#: Batch-1 calls and batch-32 rounds per candidate: medians a slow spell does not move.
AUTO_LATENCY_CALLS, AUTO_REPEATS = 30, 5
#: Validation texts the archive carries for the endpoint's start-up measurement.
SAMPLE_TEXTS = 64


@dataclass
class Choice:
    """The variant ``auto`` picks, why, and ``{variant: why}`` for each one left out."""

    variant: str
    reason: str
    left_out: dict[str, str] = field(default_factory=dict)


def fastest_agreeing(rows: Sequence[dict], min_agreement: float = AGREEMENT_TARGET) -> dict:
    """The row with the most ``samples_per_s`` of those with ``agreement >= min_agreement``;
    ValueError if none."""
    good = [r for r in rows if r["agreement"] >= min_agreement]
    if not good:
        raise ValueError(f"no variant keeps >= {min_agreement:.0%} label agreement with fp32 eager")
    return max(good, key=lambda r: r["samples_per_s"])


@dataclass
class Measured:
    """``rows`` (:func:`~.measure.compare_predictors`' plus ``setup_s``: build and first batch),
    ``skipped`` (``{variant: why}``) and the ``built`` predictors."""

    rows: list[dict]
    skipped: dict[str, str]
    built: dict[str, Classifier] = field(repr=False)

    def choice(self, left_out: dict[str, str] | None = None) -> Choice:
        """The ``auto`` rule: the fastest row at batch 32 with 99% agreement and a batch-1 p50
        within :data:`MAX_LATENCY_RATIO` of eager's, if :data:`MARGIN` faster than eager; the
        reason names each row failing a test and each ``left_out`` or skipped variant, with why.
        ValueError: no eager row."""
        eager = next((r for r in self.rows if r["variant"] == "eager"), None)
        if eager is None:
            raise ValueError("choosing a variant needs the eager row: it is the reference")
        why, others = {**(left_out or {}), **self.skipped}, [r for r in self.rows if r is not eager]
        for r in others:
            if r["agreement"] < AGREEMENT_TARGET:
                why[r["variant"]] = f"{r['agreement']:.1%} label agreement < {AGREEMENT_TARGET:.0%}"
            elif r["p50_ms"] > MAX_LATENCY_RATIO * eager["p50_ms"]:
                calls = min(r["calls"], eager["calls"])
                why[r["variant"]] = (f"batch-1 p50 {r['p50_ms']:.1f} ms > {MAX_LATENCY_RATIO:g}x "
                                     f"eager's {eager['p50_ms']:.1f} ms (medians of {calls} calls)")  # fmt: skip
        best = max((r for r in others if r["variant"] not in why),
                   key=lambda r: r["samples_per_s"], default=None)  # fmt: skip
        gain = best["samples_per_s"] / eager["samples_per_s"] if best else 0.0
        if gain >= 1 + MARGIN:
            choice = Choice(best["variant"], f"{gain:.2f}x eager's batch-32 throughput here, "
                            f"{best['agreement']:.1%} label agreement (>= {AGREEMENT_TARGET:.0%})")  # fmt: skip
        else:
            other = f"; best other: {best['variant']} at {gain:.2f}x" if best else ""
            choice = Choice("eager", f"no variant beats eager by {MARGIN:.0%} here{other}")
        if why:
            choice.reason += "; left out: " + "; ".join(f"{v} ({w})" for v, w in why.items())
        choice.left_out = why
        return choice


def measure_variants(model, tokenizer, texts: Sequence[str], variants: Sequence[str], *,
                     model_dir: str | None = None, latency_calls: int = AUTO_LATENCY_CALLS,
                     repeats: int = AUTO_REPEATS, device="cpu", include_slow: bool = False,
                     budget_s: float | None = None, log: Callable[[str], None] | None = None,
                     ) -> Measured:  # fmt: skip
    """Build ``eager`` and ``variants`` from the fp32 ``model``, time them in rounds
    (:func:`~.measure.compare_predictors`: the two fastest again when close).
    What cannot run or runs slowly (unless ``include_slow``) or fails to build is skipped with
    why (eager's failure raises); ``budget_s`` is shared equally, builds counted; ``log`` gets
    a line per build and per round."""
    say = log or (lambda line: None)
    runnable, skipped = runnable_variants(["eager", *variants], device, include_slow=include_slow)
    share = budget_s / len(runnable) if budget_s else None
    built, setup = {}, {}
    for variant in runnable:
        t0 = time.perf_counter()
        try:
            module, call = build_variant(model, variant, device, keep_fp32=True,
                                         model_dir=model_dir, tokenizer=tokenizer)  # fmt: skip
            predictor = Classifier(call, tokenizer, model.config, variant=variant, module=module,
                                   device=device)  # fmt: skip
            predictor.predict_ids(texts[:32])  # compile and first-call costs
        except Exception as err:
            if variant == "eager":
                raise
            first = (str(err).strip().splitlines() or [""])[0][:200]
            skipped[variant] = f"failed to build here: {type(err).__name__}: {first}"
            logger.warning("variant %s left out: %s", variant, skipped[variant])
            continue
        built[variant], setup[variant] = predictor, time.perf_counter() - t0
        say(f"{variant}: built in {setup[variant]:.1f} s")
    say(f"timing {len(built)} variants: {latency_calls} batch-1 calls and {repeats} batch-32 "
        "passes each, in rounds" + (f"; {share:.0f} s each at most" if share else ""))  # fmt: skip
    rows = compare_predictors(built, texts, latency_calls=latency_calls, repeats=repeats,
                              spent=setup, share_s=share, log=say)  # fmt: skip
    for row in rows:
        row["setup_s"] = setup[row["variant"]]
    return Measured(rows, skipped, built)


def choose_by_measurement(model, tokenizer, texts: Sequence[str], *, model_dir: str | None = None,
                          candidates: Sequence[str] = AUTO_CANDIDATES, device="cpu",
                          left_out: dict[str, str] | None = None) -> tuple[Choice, Classifier]:  # fmt: skip
    """:func:`measure_variants` of ``candidates`` on ``texts`` (64-128 are plenty), then
    :meth:`Measured.choice` (``left_out``: dropped beforehand, with why); the others are freed."""
    measured = measure_variants(model, tokenizer, texts, candidates, model_dir=model_dir,
                                device=device, log=print)  # fmt: skip
    choice = measured.choice(left_out)
    print(format_table(measured.rows), f"auto: {choice.variant} ({choice.reason})", sep="\n")
    kept = measured.built.pop(choice.variant)
    measured.built.clear()
    if choice.variant not in COMPILED_VARIANTS:
        torch._dynamo.reset()  # the losers' compiled graphs hold their weights
    gc.collect()
    return choice, kept


def serving_variant(model_dir: str, model, requested: str, tokenizer) -> tuple:
    """``(callable model, variant, reason)`` an endpoint serves (``PT2AWS_VARIANT``), from the
    fp32 model: ``auto`` measures ``variants.json``'s ``eligible`` (eager without it; ONNX ones
    without their files left out); a named one is built.

    Raises:
        ValueError: unknown, not runnable here (bf16 emulated included), ONNX files missing.
    """
    if requested == "auto":
        record = Path(model_dir) / "variants.json"
        if not record.is_file():
            return model, "eager", "auto: the archive records no variant agreement (variants.json)"
        saved, absent = json.loads(record.read_text()), {}
        if set(saved["eligible"]) & set(ORT_VARIANTS):
            from pt2aws.inference.ort import onnx_files

            try:
                onnx_files(model_dir)
            except FileNotFoundError as err:
                absent = {v: str(err) for v in saved["eligible"] if v in ORT_VARIANTS}
        choice, kept = choose_by_measurement(
            model, tokenizer, saved["sample"], model_dir=model_dir, device="cpu", left_out=absent,
            candidates=[v for v in saved["eligible"] if v not in absent],
        )  # fmt: skip
        return kept.model, choice.variant, f"auto, measured at start-up: {choice.reason}"
    slow = require_variant(requested, "cpu", name="PT2AWS_VARIANT=")
    if slow and requested == "bf16":  # bf16 emulated: refused, not slow
        raise ValueError(f"PT2AWS_VARIANT=bf16: {slow}")
    if slow:
        print(f"pt2aws handler: PT2AWS_VARIANT={requested}: {slow}", flush=True)
    try:
        call = build_variant(model, requested, "cpu", model_dir=model_dir)[1]
    except FileNotFoundError as err:  # an ONNX variant packaged without its files
        raise ValueError(f"PT2AWS_VARIANT={requested}: {err}") from None
    return call, requested, "PT2AWS_VARIANT"


def variant_report(model_dir: str, validation_texts: Sequence[str],
                   variants: Sequence[str] = AUTO_CANDIDATES, *, sample: int = SAMPLE_TEXTS,
                   measured: str | Path | None = None) -> dict:  # fmt: skip
    """``variants.json``: ``{"target", "texts", "agreement": {variant: float}, "source",
    "eligible", "sample", "measured_on"[, "onnx"]}``, each variant's label agreement with fp32
    eager on the non-empty ``validation_texts``: read from ``measured`` (notebook 02's
    ``inference/metrics.json``, if there and timed on as many texts), else run here uncompiled
    (compiling changes speed, not numerics); ``source`` says which. ONNX variants' files are
    exported into ``model_dir/onnx/`` if missing. ValueError: no texts.
    """
    texts = [t for t in validation_texts if t.strip()]
    if not texts:
        raise ValueError("variant_report needs validation texts (the split is empty)")
    record = json.loads(Path(measured).read_text()) if measured and Path(measured).is_file() else {}
    same_texts = record.get("agreement_texts", {}).get("count") == len(validation_texts)
    known = {r["variant"]: r["agreement"] for r in record.get("variants", [])
             if same_texts and r["variant"] in variants}  # fmt: skip
    model, tokenizer = load_fp32(model_dir)
    todo = [v for v in variants if v not in known]
    reference = Classifier(model, tokenizer, model.config).predict_ids(texts) if todo else None
    for variant in todo:
        with warnings.catch_warnings(action="ignore"):
            module, _ = build_variant(model, variant, keep_fp32=True, model_dir=model_dir,
                                      tokenizer=tokenizer)  # fmt: skip
        labels = Classifier(module, tokenizer, model.config).predict_ids(texts)
        known[variant] = label_agreement(reference, labels)
    agreement = {v: round(known[v], 6) for v in variants}
    report = {"target": AGREEMENT_TARGET, "texts": len(texts), "agreement": agreement,
              "source": {v: "measured here" if v in todo else "notebook 02" for v in variants},
              "eligible": [v for v, a in agreement.items() if a >= AGREEMENT_TARGET],
              "sample": texts[:sample], "measured_on": cpu_name()}  # fmt: skip
    if set(variants) & set(ORT_VARIANTS):
        from pt2aws.inference.ort import EXPORT_RECORD, ONNX_DIR, onnx_files

        onnx_files(model_dir, model, tokenizer)  # exported by notebook 02, or now
        report["onnx"] = json.loads((Path(model_dir) / ONNX_DIR / EXPORT_RECORD).read_text())
    return report
