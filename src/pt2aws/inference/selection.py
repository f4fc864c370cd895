"""``variant="auto"``: choose the predictor variant by measuring it on the machine that serves.

The rule (:func:`choose_by_measurement`): on a sample of validation texts, time each candidate
variant that runs natively here (batch 32, median of interleaved repeats) and measure how often
its label equals fp32 eager's; keep the fastest whose agreement is at least
:data:`~pt2aws.metrics.agreement.AGREEMENT_TARGET` (99%). A variant other than ``eager`` must
beat eager by :data:`MARGIN` (5%): less is within the run-to-run noise of a shared machine, and
eager is the simpler model to serve. So ``auto`` is never slower than eager on the machine where
it chose (within that noise), which a choice from the hardware alone could not promise: bf16 on
an AVX512-BF16 CPU without AMX ran slower than fp32 eager (issue 12).

**Where the endpoint chooses.** Agreement is a property of the model and the variant: it is
measured once, on the whole validation split, when the archive is packaged
(:func:`measure_agreement`), and recorded in it. Speed is a property of the machine: the archive
is usually packaged on an x86 notebook instance while the endpoint runs on Graviton, where bf16
fast math, oneDNN/ACL and the int8 kernels rank the variants differently. So the endpoint
**re-measures at start-up on its own hardware**: it calls :func:`choose_by_measurement` with the
variants the archive records as agreeing (``candidates``) on the few validation texts the
archive carries, before ``/ping`` answers healthy. That costs seconds at start-up (plus a
torch.compile for ``int8``); it is paid once per instance, and it is what keeps the promise above
on the machine that actually serves.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import torch

from pt2aws.inference.variants import VariantChoice, supported_variants
from pt2aws.metrics.agreement import AGREEMENT_TARGET

logger = logging.getLogger(__name__)

#: What ``auto`` times unless told otherwise. ``compile`` (fp32) is left out: on CPU its
#: one-off compile rarely pays back (0.94x eager in the training A/B on 2 cores).
AUTO_CANDIDATES = ("eager", "bf16", "int8", "int8-legacy")

#: How much faster than eager (fraction) a variant must be for ``auto`` to prefer it.
MARGIN = 0.05
#: A real-time endpoint mostly answers single requests: ``auto`` never picks a variant whose
#: batch-1 median latency is more than this many times eager's (bf16 through oneDNN on a CPU
#: without AMX built kernels per new shape: 180 ms p50 against eager's 1.7 ms, 2026-12-01).
MAX_LATENCY_RATIO = 2.0


def measure_agreement(
    model_dir: str, texts: Sequence[str], variant: str, *, device: str = "cpu"
) -> float:
    """Share of ``texts`` whose label under ``variant`` equals fp32 eager's (1.0 = all).

    For the packaging step: run it on the validation split and record the result in the
    archive, so the endpoint only considers variants that keep the model's answers.

    Args:
        model_dir: a saved model directory (``save_pretrained``).
        texts: the texts to compare on (the validation split).
        variant: one of :data:`~pt2aws.inference.variants.VARIANTS`.
        device: where both models run.

    Raises:
        ValueError: unknown variant, one that cannot run on ``device``, or no texts.
    """
    from pt2aws.inference.predictor import Predictor
    from pt2aws.metrics.agreement import label_agreement

    reference = Predictor(model_dir, device=device).predict_ids(texts)
    fast = Predictor(model_dir, device=device, variant=variant)
    # the uncompiled module: compiling changes speed, not the quantized numerics, and costs
    # tens of seconds on a small CPU
    fast.model = fast.module
    return label_agreement(reference, fast.predict_ids(texts))


def _first_line(err: BaseException, limit: int = 200) -> str:
    """The first line of ``str(err)`` (compiler errors run to pages), at most ``limit`` chars."""
    text = str(err).strip().splitlines()
    return (text[0] if text else "")[:limit]


def fastest_agreeing(rows: Sequence[dict], min_agreement: float | None = None) -> dict:
    """The row with the highest ``samples_per_s`` among those with ``agreement >= min_agreement``.

    Args:
        rows: rows with ``variant``, ``samples_per_s`` and ``agreement`` (rows without either
            are ignored).
        min_agreement: default :data:`pt2aws.metrics.agreement.AGREEMENT_TARGET` (0.99).

    Raises:
        ValueError: no row qualifies.
    """
    floor = AGREEMENT_TARGET if min_agreement is None else min_agreement
    good = [
        r
        for r in rows
        if r.get("samples_per_s") and r.get("agreement") is not None and r["agreement"] >= floor
    ]
    if not good:
        raise ValueError(f"no variant keeps >= {floor:.0%} label agreement with fp32 eager")
    return max(good, key=lambda r: r["samples_per_s"])


def pick_variant(
    rows: Sequence[dict], margin: float = MARGIN, max_latency_ratio: float = MAX_LATENCY_RATIO
) -> VariantChoice:
    """The ``auto`` rule applied to measured rows (see the module docstring).

    Args:
        rows: rows with ``variant``, ``samples_per_s`` and ``agreement`` (and ``p50_ms``, the
            batch-1 median latency, when measured); one is ``eager``.
        margin: how much faster than eager (fraction) another variant must be.
        max_latency_ratio: a variant whose ``p50_ms`` exceeds eager's by more than this factor
            is left out (single requests matter on a real-time endpoint).

    Raises:
        ValueError: no ``eager`` row.
    """
    eager = next((r for r in rows if r["variant"] == "eager"), None)
    if eager is None:
        raise ValueError("choosing a variant needs the eager row: it is the reference")
    limit = (eager.get("p50_ms") or 0) * max_latency_ratio
    responsive = [r for r in rows if not limit or not r.get("p50_ms") or r["p50_ms"] <= limit]
    best = fastest_agreeing(responsive)
    gain = best["samples_per_s"] / eager["samples_per_s"]
    if best["variant"] == "eager" or gain < 1 + margin:
        runner_up = f"; best other: {best['variant']} at {gain:.2f}x" if best is not eager else ""
        return VariantChoice("eager", f"no variant beats eager by {margin:.0%} here{runner_up}")
    return VariantChoice(
        best["variant"],
        f"{gain:.2f}x eager's batch-32 throughput here, "
        f"{best['agreement']:.1%} label agreement (>= {AGREEMENT_TARGET:.0%})",
    )


def compare_variants(
    model_dir: str,
    texts: Sequence[str],
    variants: Sequence[str] = ("eager", "int8", "bf16"),
    *,
    latency_calls: int = 10,
    repeats: int = 3,
    device: str | None = None,
) -> dict:
    """Time each predictor variant beside fp32 eager and measure its label agreement.

    ``eager`` is always measured: it is the reference. A variant that does not run natively
    here is skipped with the reason :func:`pt2aws.inference.variants.variant_support` gives
    (e.g. bf16 on a CPU without bf16 instructions, where it runs emulated and slowly).

    A variant that fails to build or to answer its first batch here (for example
    ``torch.compile`` without a working C++ compiler) is skipped too, its error as the reason, and
    logged: only ``eager`` failing raises.

    Args:
        model_dir: a saved model directory (``save_pretrained``).
        texts: texts for the batch-32 throughput and the agreement.
        variants: names from :data:`pt2aws.inference.variants.VARIANTS`.
        latency_calls: batch-1 calls per variant (the first ``latency_calls`` texts).
        repeats: timed throughput passes per variant (median reported; interleaved).
        device: ``"cpu"``, ``"cuda"`` or ``None`` (CUDA when available).

    Returns:
        ``{"rows", "skipped": {variant: reason}, "best": str, "auto": {"variant", "reason"}}``.
        Each row holds :func:`compare_predictors`' keys plus ``setup_s`` (load, quantize or
        compile, and a first pass over ``texts``; seconds) and ``variant_reason``. ``best`` is
        the fastest variant whose agreement is at least
        :data:`pt2aws.metrics.agreement.AGREEMENT_TARGET` (``eager`` at worst); ``auto`` what
        the ``auto`` rule picks from these rows
        (:func:`pick_variant`: another variant must beat eager by 5%).
    """
    from pt2aws.inference.measure import compare_predictors
    from pt2aws.inference.predictor import Predictor

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    runnable, skipped = supported_variants(device, list(dict.fromkeys(["eager", *variants])))
    predictors, setup_s = {}, {}
    for variant in runnable:
        started = time.perf_counter()
        try:
            predictors[variant] = Predictor(model_dir, variant=variant, device=device)
            predictors[variant].predict_ids(texts)  # compile / first-call costs out of timings
        except Exception as err:
            if variant == "eager":
                raise  # the reference: nothing to compare with
            # a candidate that cannot be built here (a compiler error, a kernel this CPU lacks)
            # is left out with the reason: the endpoint must still start on what does work
            predictors.pop(variant, None)
            skipped[variant] = f"failed to build here: {type(err).__name__}: {_first_line(err)}"
            logger.warning("variant %s left out: %s", variant, skipped[variant])
            continue
        setup_s[variant] = time.perf_counter() - started
    rows = compare_predictors(predictors, texts, latency_calls=latency_calls, repeats=repeats)
    for row in rows:
        row.update(
            setup_s=setup_s[row["variant"]],
            variant_reason=predictors[row["variant"]].variant_reason,
        )
    auto = pick_variant(rows)
    return {
        "rows": rows,
        "skipped": skipped,
        "best": fastest_agreeing(rows)["variant"],
        "auto": {"variant": auto.variant, "reason": auto.reason},
    }


def choose_by_measurement(
    model_dir: str,
    texts: Sequence[str],
    *,
    candidates: Sequence[str] = AUTO_CANDIDATES,
    device: torch.device | str | None = None,
    repeats: int = 5,
    verbose: bool = True,
) -> tuple[VariantChoice, list[dict]]:
    """Time the candidate variants here and pick one by the ``auto`` rule (module docstring).

    Args:
        model_dir: a saved model directory (``save_pretrained``).
        texts: a sample of validation texts (128 is plenty; timings use all of them).
        candidates: variants to consider; ``eager`` is always added (it is the reference) and
            those that do not run natively on ``device`` are left out with their reason.
        device: ``None``: CUDA when available, else CPU.
        repeats: interleaved timed passes per variant (median reported; 5, because one busy
            neighbour process can slow a single pass several-fold on a small machine).
        verbose: print the table, what was not timed and why, and the choice.

    Returns:
        ``(choice, rows)``: rows as from :func:`compare_variants`.
    """
    from pt2aws.inference.measure import format_table

    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    runnable, left_out = supported_variants(device, list(dict.fromkeys(["eager", *candidates])))
    result = compare_variants(
        model_dir, texts, runnable, latency_calls=min(8, len(texts)), repeats=repeats,
        device=str(device),
    )  # fmt: skip
    choice = pick_variant(result["rows"])
    left_out.update(result["skipped"])  # those that failed to build here
    if verbose:
        print(format_table(result["rows"], baseline="eager"))
        for variant, why in left_out.items():
            print(f"{variant}: not timed ({why})")
        print(f"auto: {choice.variant} ({choice.reason})", flush=True)
    return choice, result["rows"]


#: Variants whose agreement the archive records (``eager`` is the reference: always 1.0).
RECORDED_VARIANTS = ("int8", "int8-legacy", "bf16")
#: Validation texts the archive carries for the endpoint's start-up measurement.
SAMPLE_TEXTS = 64


def variant_report(
    model_dir: str,
    validation_texts: Sequence[str],
    variants: Sequence[str] = RECORDED_VARIANTS,
    *,
    sample: int = SAMPLE_TEXTS,
) -> dict:
    """What the archive records for the endpoint: each variant's agreement with fp32 eager.

    Agreement is measured on ``validation_texts`` (the whole validation split, or a few hundred
    of its texts) on this machine's CPU; a variant this CPU cannot run natively is still
    measured (bf16 runs emulated: slow but exact enough for agreement). The endpoint later
    times only ``eligible`` variants, on ``sample``, on its own hardware (module docstring).

    Returns:
        ``{"target": 0.99, "texts": int, "agreement": {variant: float}, "eligible": [variant],
        "sample": [str], "measured_on": str}`` (JSON-serialisable; ``variants.json`` in the
        archive).

    Raises:
        ValueError: no validation texts.
    """
    import warnings

    from pt2aws.system import cpu_name

    texts = [t for t in validation_texts if t.strip()]
    if not texts:
        raise ValueError("variant_report needs validation texts (the split is empty)")
    agreement = {}
    for variant in variants:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "bf16 is emulated": expected here
            agreement[variant] = round(measure_agreement(model_dir, texts, variant), 6)
    return {
        "target": AGREEMENT_TARGET,
        "texts": len(texts),
        "agreement": agreement,
        "eligible": [v for v, a in agreement.items() if a >= AGREEMENT_TARGET],
        "sample": texts[:sample],
        "measured_on": cpu_name(),
    }


def serving_variant(model_dir: str, model: torch.nn.Module, requested: str) -> tuple:
    """The variant an endpoint serves (``PT2AWS_VARIANT``), built from the loaded fp32 model.

    ``auto``: among the variants ``variants.json`` in the archive records as keeping 99%
    agreement, the fastest on this machine by :func:`choose_by_measurement` on the archive's
    sample texts (eager when the archive has no record). A named variant is built as asked.

    Args:
        model_dir: the extracted archive (``/opt/ml/model``).
        model: the fp32 model ``model_fn`` loaded (eval mode, CPU).
        requested: ``auto`` or one of :data:`~pt2aws.inference.variants.VARIANTS`.

    Returns:
        ``(callable model, variant, reason)``.

    Raises:
        ValueError: an unknown variant, or one that cannot run on this CPU.
    """
    import json
    from pathlib import Path

    from pt2aws.inference.variants import VARIANTS, build_variant, variant_support

    reason = "PT2AWS_VARIANT"
    if requested == "auto":
        record = Path(model_dir) / "variants.json"
        if not record.is_file():
            return model, "eager", "auto: the archive records no variant agreement (variants.json)"
        report = json.loads(record.read_text())
        choice, _ = choose_by_measurement(
            model_dir, report["sample"], candidates=report["eligible"]
        )
        requested, reason = choice.variant, f"auto, measured at start-up: {choice.reason}"
    if requested not in VARIANTS:
        raise ValueError(f"PT2AWS_VARIANT={requested!r}: use auto or one of {', '.join(VARIANTS)}")
    native, why = variant_support(requested, "cpu")
    if not native:
        raise ValueError(f"PT2AWS_VARIANT={requested}: {why}")
    _, call = build_variant(model, requested, torch.device("cpu"))
    return call, requested, reason
