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
from pt2aws.metrics.agreement import AGREEMENT_TARGET, judge_agreement, label_agreement, percent

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
    """The fastest (``samples_per_s``) row with ``agreement >= min_agreement``; ValueError: none."""
    good = [r for r in rows if r["agreement"] >= min_agreement]
    if not good:
        raise ValueError(f"no variant keeps >= {min_agreement:.0%} label agreement with fp32 eager")
    return max(good, key=lambda r: r["samples_per_s"])


@dataclass
class Measured:
    """``rows`` (:func:`~.measure.compare_predictors`' plus ``setup_s``: build and first batch),
    ``skipped`` (``{variant: why}``), the ``built`` predictors and ``available``: the texts there
    are for agreement (None: each row's ``agreement_texts`` are all there are)."""

    rows: list[dict]
    skipped: dict[str, str]
    built: dict[str, Classifier] = field(repr=False)
    available: int | None = None

    def agreement(self, row: dict) -> tuple[bool | None, str]:
        """:func:`~pt2aws.metrics.agreement.judge_agreement` of ``row``'s agreement."""
        texts = row["agreement_texts"]
        return judge_agreement(round(row["agreement"] * texts), texts,
                               all_texts=self.available is None or texts >= self.available)  # fmt: skip

    def choice(self, left_out: dict[str, str] | None = None,
               packaged: dict[str, str] | None = None) -> Choice:  # fmt: skip
        """The ``auto`` rule: the fastest row at batch 32 that keeps 99% agreement
        (:meth:`agreement`) and a batch-1 p50 within :data:`MAX_LATENCY_RATIO` of eager's, if
        :data:`MARGIN` faster than eager; the reason names each row failing a test and each
        ``left_out`` or skipped variant, with why. ``packaged`` (``{variant: why}``, the
        archive's agreement on many texts): those rows' agreement here only leaves out a variant
        clearly below the target. ValueError: no eager row."""
        eager = next((r for r in self.rows if r["variant"] == "eager"), None)
        if eager is None:
            raise ValueError("choosing a variant needs the eager row: it is the reference")
        why, others = {**(left_out or {}), **self.skipped}, [r for r in self.rows if r is not eager]
        agreeing, packaged = {}, packaged or {}
        for r in others:
            keeps, said = self.agreement(r)
            if r["variant"] in packaged:  # decided on many texts; a few here only catch a break
                texts = r["agreement_texts"]
                keeps = judge_agreement(round(r["agreement"] * texts), texts, all_texts=False)[0]
                said = (f"{packaged[r['variant']]} at packaging; here {percent(r['agreement'])} "
                        f"on {texts:,} texts, " + ("clearly below" if keeps is False else
                                                    "only a clear failure would leave it out"))  # fmt: skip
                keeps = keeps is not False
            agreeing[r["variant"]] = said
            if not keeps:
                why[r["variant"]] = said
            elif r["p50_ms"] > MAX_LATENCY_RATIO * eager["p50_ms"]:
                calls = min(r["calls"], eager["calls"])
                why[r["variant"]] = (f"batch-1 p50 {r['p50_ms']:.1f} ms > {MAX_LATENCY_RATIO:g}x "
                                     f"eager's {eager['p50_ms']:.1f} ms (medians of {calls} calls)")  # fmt: skip
        best = max((r for r in others if r["variant"] not in why),
                   key=lambda r: r["samples_per_s"], default=None)  # fmt: skip
        gain = best["samples_per_s"] / eager["samples_per_s"] if best else 0.0
        if gain >= 1 + MARGIN:
            choice = Choice(best["variant"], f"{gain:.2f}x eager's batch-32 throughput here, "
                            f"{agreeing[best['variant']]}")  # fmt: skip
        else:
            other = f"; best other: {best['variant']} at {gain:.2f}x" if best else ""
            choice = Choice("eager", f"no variant beats eager by {MARGIN:.0%} here{other}")
        if why:
            choice.reason += "; left out: " + "; ".join(f"{v} ({w})" for v, w in why.items())
        choice.left_out = why
        return choice


def settle_agreement(measured: Measured, pool: Sequence[str], log=None) -> None:
    """Measure again on all of ``pool`` (the validation texts there are, the timed ones first)
    the agreement of each row whose timed texts cannot tell 99% from 98%
    (:meth:`Measured.agreement` None), in place; ``log`` gets a line for each."""
    pool = [t for t in pool if t.strip()]
    measured.available = max(len(pool), *(r["agreement_texts"] for r in measured.rows))
    undecided = [r for r in measured.rows if r["variant"] != "eager"
                 and measured.agreement(r)[0] is None]  # fmt: skip
    if not undecided:
        return
    reference = measured.built["eager"].predict_ids(pool)
    for row in undecided:
        before = measured.agreement(row)[1]
        ids = measured.built[row["variant"]].predict_ids(pool)
        row |= {"agreement": label_agreement(reference, ids), "agreement_texts": len(pool)}
        if log:
            log(f"{row['variant']}: {before}: measured again on all {len(pool):,} validation "
                f"texts: {measured.agreement(row)[1]}")  # fmt: skip


def measure_variants(model, tokenizer, texts: Sequence[str], variants: Sequence[str], *,
                     model_dir: str | None = None, latency_calls: int = AUTO_LATENCY_CALLS,
                     repeats: int = AUTO_REPEATS, device="cpu", include_slow: bool = False,
                     budget_s: float | None = None, log: Callable[[str], None] | None = None,
                     pool: Sequence[str] | None = None) -> Measured:  # fmt: skip
    """Build ``eager`` and ``variants`` from the fp32 ``model``, time them in rounds
    (:func:`~.measure.compare_predictors`: the two fastest again when close).
    What cannot run or runs slowly (unless ``include_slow``) or fails to build is skipped with
    why (eager's failure raises); ``budget_s`` is shared equally, builds counted; ``log`` gets
    a line per build and per round. ``pool``: all the validation texts (``texts`` first), to
    settle an agreement ``texts`` cannot (:func:`settle_agreement`, outside the budget)."""
    say = log or (lambda line: None)
    runnable, skipped = runnable_variants(["eager", *variants], device, include_slow=include_slow)
    share = budget_s / len(runnable) if budget_s else None
    built, setup = {}, {}
    for variant in runnable:
        t0 = time.perf_counter()
        try:
            module, call = build_variant(model, variant, device, keep_fp32=True,
                                         model_dir=model_dir, tokenizer=tokenizer, texts=texts)  # fmt: skip
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
        how = getattr(call, "settings", None)
        say(f"{variant}: built in {setup[variant]:.1f} s" + (f" ({how})" if how else ""))
    say(f"timing {len(built)} variants: {latency_calls} batch-1 calls and {repeats} batch-32 "
        "passes each, in rounds" + (f"; {share:.0f} s each at most" if share else ""))  # fmt: skip
    rows = compare_predictors(built, texts, latency_calls=latency_calls, repeats=repeats,
                              spent=setup, share_s=share, log=say)  # fmt: skip
    for row in rows:
        row["setup_s"] = setup[row["variant"]]
    measured = Measured(rows, skipped, built)
    if pool is not None:
        settle_agreement(measured, pool, log=say)
    return measured


def choose_by_measurement(model, tokenizer, texts: Sequence[str], *, model_dir: str | None = None,
                          candidates: Sequence[str] = AUTO_CANDIDATES, device="cpu",
                          left_out: dict[str, str] | None = None, pool: Sequence[str] | None = None,
                          packaged: dict[str, str] | None = None) -> tuple[Choice, Classifier]:  # fmt: skip
    """:func:`measure_variants` of ``candidates`` on ``texts`` (64-128 time well; ``pool``: to
    settle agreement), then :meth:`Measured.choice` (``left_out``: dropped beforehand, with why;
    ``packaged``: agreement decided at packaging); the others are freed."""
    measured = measure_variants(model, tokenizer, texts, candidates, model_dir=model_dir,
                                device=device, log=print, pool=pool)  # fmt: skip
    choice = measured.choice(left_out, packaged)
    print(format_table(measured.rows), f"auto: {choice.variant} ({choice.reason})", sep="\n")
    kept = measured.built.pop(choice.variant)
    measured.built.clear()
    if choice.variant not in COMPILED_VARIANTS:
        torch._dynamo.reset()  # the losers' compiled graphs hold their weights
    gc.collect()
    return choice, kept


def serving_variant(model_dir: str, model, requested: str, tokenizer) -> tuple:
    """``(callable model, variant, reason)`` an endpoint serves (``PT2AWS_VARIANT``), from the
    fp32 model: ``auto`` times ``variants.json``'s ``eligible`` (agreement decided at packaging
    on many texts; the 64 of its ``sample`` only leave out one clearly broken on this machine;
    eager without the file; ONNX ones without their files left out); a named one is built.
    ValueError: unknown, not runnable here (bf16 emulated included), ONNX files missing."""
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
        candidates = [v for v in saved["eligible"] if v not in absent]
        packaged = {v: saved.get("why", {}).get(v, "eligible in variants.json") for v in candidates}
        choice, kept = choose_by_measurement(
            model, tokenizer, saved["sample"], model_dir=model_dir, device="cpu", left_out=absent,
            candidates=candidates, packaged=packaged,
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
    """``variants.json``: ``{"target", "texts", "agreement", "agreement_texts", "left_out",
    "source", "why", "eligible", "sample", "measured_on"[, "onnx"]}``. Not measured, left out
    (the endpoint does not consider them): what notebook 02 left out (``measured``: its
    ``inference/metrics.json``), without it what ``auto`` cannot choose here. The others' label
    agreement with fp32 eager on the non-empty ``validation_texts`` (all: about 750 tell 99%
    from 98%): 02's where its texts decide, else measured here uncompiled (the same numerics);
    ``source`` says which, ``why`` the verdict and count. ONNX files are exported into
    ``model_dir/onnx/`` if missing. ValueError: no texts."""
    texts = [t for t in validation_texts if t.strip()]
    if not texts:
        raise ValueError("variant_report needs validation texts (the split is empty)")
    record = json.loads(Path(measured).read_text()) if measured and Path(measured).is_file() else {}
    left_out = {v: w for v, w in record.get("left_out", {}).items() if v in variants} if record \
        else runnable_variants(variants)[1]  # fmt: skip
    how = "left out by notebook 02" if record else "left out here"
    judge = Measured([], {}, {}, available=len(texts)).agreement
    timed = record.get("agreement_texts", {}).get("count")
    rows = [{"agreement_texts": timed, **r} for r in record.get("variants", [])]
    known = {r["variant"]: r for r in rows
             if r["variant"] in variants and r["agreement_texts"] and judge(r)[0] is not None}  # fmt: skip
    model, tokenizer = load_fp32(model_dir)
    todo = [v for v in variants if v not in known and v not in left_out]
    reference = Classifier(model, tokenizer, model.config).predict_ids(texts) if todo else None
    for variant in todo:
        with warnings.catch_warnings(action="ignore"):
            module, _ = build_variant(model, variant, keep_fp32=True, model_dir=model_dir,
                                      tokenizer=tokenizer, texts=texts)  # fmt: skip
        ids = Classifier(module, tokenizer, model.config).predict_ids(texts)
        share = label_agreement(reference, ids)
        known[variant] = {"agreement": share, "agreement_texts": len(texts)}
    verdicts = {v: judge(known[v]) for v in variants if v in known}
    report = {"target": AGREEMENT_TARGET, "texts": len(texts),
              "agreement": {v: round(known[v]["agreement"], 6) for v in verdicts},
              "agreement_texts": {v: known[v]["agreement_texts"] for v in verdicts},
              "left_out": left_out, "source": {v: how if v in left_out else "measured here"
                                              if v in todo else "notebook 02" for v in variants},
              "why": {v: verdicts[v][1] if v in verdicts else left_out[v] for v in variants},
              "eligible": [v for v in verdicts if verdicts[v][0]],
              "sample": texts[:sample], "measured_on": cpu_name()}  # fmt: skip
    if set(variants) & set(ORT_VARIANTS) - set(left_out):
        from pt2aws.inference.ort import EXPORT_RECORD, ONNX_DIR, onnx_files

        onnx_files(model_dir, model, tokenizer, texts=texts)  # exported by notebook 02, or now
        report["onnx"] = json.loads((Path(model_dir) / ONNX_DIR / EXPORT_RECORD).read_text())
    return report
