"""``variant="auto"``: choose the predictor variant by measuring it on the machine that serves.

The rule (:func:`choose_by_measurement`): on a sample of validation texts, time each candidate
variant that runs natively here (batch 32, median of interleaved repeats) and measure how often
its label equals fp32 eager's; keep the fastest whose agreement is at least
:data:`~pt2aws.metrics.agreement.AGREEMENT_TARGET` (99%). A variant other than ``eager`` must
beat eager by :data:`MARGIN` (5%): less is within the run-to-run noise of a shared machine, and
eager is the simpler model to serve. So ``auto`` is never slower than eager on the machine where
it chose (within that noise), which a choice from the hardware alone could not promise: bf16 on
an AVX512-BF16 CPU without AMX ran slower than fp32 eager (issue 12).

**One model in memory.** Every candidate is built from the one fp32 model already loaded
(:func:`measure_variants`): ``eager`` is that model, ``compile`` and the ONNX Runtime variants
leave its weights alone, and only ``bf16`` and ``int8``, which convert weights in place, work
on a copy; once chosen, the losers are freed (:meth:`Measured.keep_only`).

**Where the endpoint chooses.** Agreement is a property of the model and the variant: it is
measured once, on validation texts, when the archive is packaged
(:func:`pt2aws.inference.archive_record.variant_report`), and recorded in it. Speed is a property of the machine: the archive
is usually packaged on an x86 notebook instance while the endpoint runs on Graviton, where bf16
fast math, oneDNN/ACL and the int8 kernels rank the variants differently. So the endpoint
**re-measures at start-up on its own hardware**: it calls :func:`choose_by_measurement` with the
variants the archive records as agreeing (``candidates``) on the few validation texts the
archive carries, before ``/ping`` answers healthy. That costs seconds at start-up (plus a
torch.compile for ``int8``); it is paid once per worker, and it is what keeps the promise above
on the machine that actually serves.
"""

from __future__ import annotations

import gc
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

# what the archive records (variants.json): notebook 03 and the tests import these from here
from pt2aws.inference.archive_record import (  # noqa: F401
    RECORDED_VARIANTS,
    SAMPLE_TEXTS,
    agreements,
    measure_agreement,
    variant_report,
)
from pt2aws.inference.batching import BatchedClassifier
from pt2aws.inference.variants import (
    COMPILED_VARIANTS,
    ORT_VARIANTS,
    VARIANTS,
    VariantChoice,
    build_variant,
    load_fp32,
    supported_variants,
    variant_support,
)
from pt2aws.metrics.agreement import AGREEMENT_TARGET

logger = logging.getLogger(__name__)

#: What ``auto`` times unless told otherwise. ``compile`` (fp32) is left out: on CPU its
#: one-off compile rarely pays back (0.94x eager in the training A/B on 2 cores).
AUTO_CANDIDATES = ("eager", "bf16", "int8", "int8-legacy", "ort-fp32", "ort-int8")

#: How much faster than eager (fraction) a variant must be for ``auto`` to prefer it.
MARGIN = 0.05
#: A real-time endpoint mostly answers single requests: ``auto`` never picks a variant whose
#: batch-1 median latency is more than this many times eager's (bf16 through oneDNN on a CPU
#: without AMX built kernels per new shape: 180 ms p50 against eager's 1.7 ms, 2026-12-01).
MAX_LATENCY_RATIO = 2.0


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


@dataclass
class Measured:
    """Variants of one fp32 model, built, timed and compared (:func:`measure_variants`).

    Attributes:
        rows: one per built variant, :func:`pt2aws.inference.measure.compare_predictors`' keys
            plus ``setup_s`` (build, quantize or compile, and a first pass over the texts;
            seconds).
        skipped: ``{variant: reason}`` for those not run natively here or failing to build.
        built: ``{variant: (module, callable)}`` (:func:`~.variants.build_variant`).
    """

    rows: list[dict]
    skipped: dict[str, str]
    built: dict[str, tuple] = field(repr=False)

    def keep_only(self, variant: str) -> tuple:
        """Free every built variant but ``variant`` (and Dynamo's compiled code when
        ``variant`` is not compiled); returns its ``(module, callable)``."""
        kept = self.built[variant]
        self.built = {variant: kept}
        if variant not in COMPILED_VARIANTS:
            torch._dynamo.reset()  # the losers' compiled graphs hold their weights
        gc.collect()
        return kept


def measure_variants(
    model: torch.nn.Module,
    tokenizer,
    texts: Sequence[str],
    variants: Sequence[str],
    *,
    model_dir: str | None = None,
    latency_calls: int = 10,
    repeats: int = 3,
    device: str | torch.device = "cpu",
    include_emulated: bool = False,
) -> Measured:
    """Build each variant from the one fp32 ``model``, time them side by side, compare labels.

    ``eager`` is always measured (it is ``model`` itself, the reference). A variant that does
    not run natively here is skipped with :func:`~.variants.variant_support`'s reason; one that
    fails to build or to answer its first batch (e.g. ``torch.compile`` without a working C++
    compiler) is skipped with its error, and logged: only ``eager`` failing raises.

    Args:
        model: the fp32 model (eval mode, CPU); left as it is (variants that convert weights
            in place convert a copy).
        tokenizer: its tokenizer, shared by every variant.
        texts: texts for the batch-32 throughput and the agreement.
        variants: names from :data:`~pt2aws.inference.variants.VARIANTS`.
        model_dir: the model's folder (where the ONNX Runtime variants' files are, or are
            exported to).
        latency_calls: batch-1 calls per variant (the first ``latency_calls`` texts).
        repeats: timed throughput passes per variant (median reported; interleaved).
        device: where they run.
        include_emulated: also run variants this CPU only emulates (bf16 without native
            bf16), when they are asked for.

    Returns:
        A :class:`Measured`.
    """
    from pt2aws.inference.measure import compare_predictors

    device = str(device)
    runnable, skipped = supported_variants(
        device, list(dict.fromkeys(["eager", *variants])), include_emulated=include_emulated
    )
    built, classifiers, setup_s = {}, {}, {}
    for variant in runnable:
        started = time.perf_counter()
        try:
            module, call = build_variant(
                model, variant, device, keep_fp32=True, model_dir=model_dir, tokenizer=tokenizer
            )
            classifier = BatchedClassifier.of(call, model, tokenizer, variant, device)
            classifier.predict_ids(texts)  # compile / first-call costs out of the timings
        except Exception as err:
            if variant == "eager":
                raise  # the reference: nothing to compare with
            # a candidate that cannot be built here (a compiler error, a kernel this CPU lacks,
            # an archive without its ONNX files) is left out with the reason: an endpoint must
            # still start on what does work
            skipped[variant] = f"failed to build here: {type(err).__name__}: {_first_line(err)}"
            logger.warning("variant %s left out: %s", variant, skipped[variant])
            continue
        built[variant], classifiers[variant] = (module, call), classifier
        setup_s[variant] = time.perf_counter() - started
    rows = compare_predictors(classifiers, texts, latency_calls=latency_calls, repeats=repeats)
    for row in rows:
        row["setup_s"] = setup_s[row["variant"]]
    return Measured(rows, skipped, built)


def compare_variants(
    model_dir: str,
    texts: Sequence[str],
    variants: Sequence[str] = ("eager", "int8", "bf16"),
    *,
    latency_calls: int = 10,
    repeats: int = 3,
    device: str | None = None,
    include_emulated: bool = False,
) -> dict:
    """Notebook 02's table: the model in ``model_dir`` loaded once and each variant built from
    it, timed beside fp32 eager, with its label agreement (:func:`measure_variants`).

    Args:
        model_dir: a saved model directory (``save_pretrained``).
        texts: texts for the batch-32 throughput and the agreement.
        variants: names from :data:`pt2aws.inference.variants.VARIANTS`.
        latency_calls: batch-1 calls per variant (the first ``latency_calls`` texts).
        repeats: timed throughput passes per variant (median reported; interleaved).
        device: ``"cpu"``, ``"cuda"`` or ``None`` (CUDA when available).
        include_emulated: also time variants in ``variants`` this CPU only emulates (notebook
            02's ``TIME_EMULATED``).

    Returns:
        ``{"rows", "skipped": {variant: reason}, "best": str, "auto": {"variant", "reason"}}``:
        :class:`Measured`'s rows; ``best`` the fastest variant whose agreement is at least
        :data:`pt2aws.metrics.agreement.AGREEMENT_TARGET` (``eager`` at worst); ``auto`` what
        the ``auto`` rule picks from these rows (:func:`pick_variant`).
    """
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    model, tokenizer = load_fp32(model_dir)
    measured = measure_variants(
        model, tokenizer, texts, variants, model_dir=model_dir, latency_calls=latency_calls,
        repeats=repeats, device=device, include_emulated=include_emulated,
    )  # fmt: skip
    auto = pick_variant(measured.rows)
    return {
        "rows": measured.rows,
        "skipped": measured.skipped,
        "best": fastest_agreeing(measured.rows)["variant"],
        "auto": {"variant": auto.variant, "reason": auto.reason},
    }


@dataclass
class Selection:
    """What ``auto`` chose, and the chosen variant built (:func:`choose_by_measurement`).

    Attributes:
        choice: the variant and the reason.
        rows: the measured rows (:class:`Measured`).
        left_out: ``{variant: reason}`` for candidates not timed.
        module: the chosen variant's uncompiled module (or ONNX Runtime session wrapper).
        model: what to call for predictions.
    """

    choice: VariantChoice
    rows: list[dict]
    left_out: dict[str, str]
    module: object = field(repr=False)
    model: Callable = field(repr=False)


def choose_by_measurement(
    model: torch.nn.Module,
    tokenizer,
    texts: Sequence[str],
    *,
    model_dir: str | None = None,
    candidates: Sequence[str] = AUTO_CANDIDATES,
    device: torch.device | str | None = None,
    repeats: int = 5,
    verbose: bool = True,
) -> Selection:
    """Time the candidate variants of the loaded ``model`` here and keep the one the ``auto``
    rule picks (module docstring); the others are freed.

    Args:
        model: the fp32 model (eval mode, CPU), loaded once; every candidate is built from it.
        tokenizer: its tokenizer.
        texts: a sample of validation texts (128 is plenty; timings use all of them).
        model_dir: the model's folder (the ONNX Runtime variants' files).
        candidates: variants to consider; ``eager`` is always added (it is the reference) and
            those that do not run natively on ``device`` are left out with their reason.
        device: ``None``: CUDA when available, else CPU.
        repeats: interleaved timed passes per variant (median reported; 5, because one busy
            neighbour process can slow a single pass several-fold on a small machine).
        verbose: print the table, what was not timed and why, and the choice.

    Returns:
        A :class:`Selection`.
    """
    from pt2aws.inference.measure import format_table

    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    measured = measure_variants(
        model, tokenizer, texts, candidates, model_dir=model_dir,
        latency_calls=min(8, len(texts)), repeats=repeats, device=device,
    )  # fmt: skip
    choice = pick_variant(measured.rows)
    module, call = measured.keep_only(choice.variant)
    if verbose:
        print(format_table(measured.rows, baseline="eager"))
        for variant, why in measured.skipped.items():
            print(f"{variant}: not timed ({why})")
        print(f"auto: {choice.variant} ({choice.reason})", flush=True)
    return Selection(choice, measured.rows, measured.skipped, module, call)


def serving_variant(
    model_dir: str, model: torch.nn.Module, requested: str, tokenizer=None
) -> tuple:
    """The variant an endpoint serves (``PT2AWS_VARIANT``), built from the loaded fp32 model.

    ``auto``: among the variants ``variants.json`` in the archive records as keeping 99%
    agreement, the fastest on this machine by :func:`choose_by_measurement` on the archive's
    sample texts (eager when the archive has no record); an ONNX Runtime variant whose files
    the archive lacks is left out with the reason. A named variant is built as asked. Nothing
    is exported here: the files come with the archive.

    Args:
        model_dir: the extracted archive (``/opt/ml/model``).
        model: the fp32 model ``model_fn`` loaded (eval mode, CPU).
        requested: ``auto`` or one of :data:`~pt2aws.inference.variants.VARIANTS`.
        tokenizer: the tokenizer ``model_fn`` loaded (``auto`` measures with it; default:
            loaded from ``model_dir``).

    Returns:
        ``(callable model, variant, reason)``.

    Raises:
        ValueError: an unknown variant, one that cannot run on this CPU, or an ONNX Runtime
            variant without its files in the archive.
    """
    if requested == "auto":
        record = Path(model_dir) / "variants.json"
        if not record.is_file():
            return model, "eager", "auto: the archive records no variant agreement (variants.json)"
        report = json.loads(record.read_text())
        candidates, absent = _with_files(model_dir, report["eligible"])
        for variant, why in absent.items():
            print(f"{variant}: not timed ({why})")
        if tokenizer is None:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(model_dir)
        selection = choose_by_measurement(
            model, tokenizer, report["sample"], model_dir=model_dir, candidates=candidates,
            device="cpu",
        )  # fmt: skip
        choice = selection.choice
        return selection.model, choice.variant, f"auto, measured at start-up: {choice.reason}"
    if requested not in VARIANTS:
        raise ValueError(f"PT2AWS_VARIANT={requested!r}: use auto or one of {', '.join(VARIANTS)}")
    native, why = variant_support(requested, "cpu")
    if not native:
        raise ValueError(f"PT2AWS_VARIANT={requested}: {why}")
    _, absent = _with_files(model_dir, [requested])
    if absent:
        raise ValueError(f"PT2AWS_VARIANT={requested}: {absent[requested]}")
    _, call = build_variant(model, requested, "cpu", model_dir=model_dir)
    return call, requested, "PT2AWS_VARIANT"


def _with_files(model_dir: str, variants: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """``variants`` split into those an archive can serve and the ONNX Runtime ones whose files
    it lacks (or holds for other weights), with the reason."""
    wanted = [v for v in variants if v in ORT_VARIANTS]
    if not wanted:
        return list(variants), {}
    from pt2aws.inference.ort import onnx_files

    try:
        onnx_files(model_dir)
    except FileNotFoundError as err:
        return [v for v in variants if v not in ORT_VARIANTS], {v: str(err) for v in wanted}
    return list(variants), {}
