"""What ``model.tar.gz`` records about the variants (``variants.json``): each one's label
agreement with fp32 eager on validation texts, measured when the archive is packaged.

Agreement is a property of the model and the variant, so it is measured once, on the validation
split, where the archive is made (:func:`variant_report`); speed is a property of the machine,
so the endpoint times only the variants recorded as ``eligible``, at start-up, on its own
hardware (:func:`pt2aws.inference.selection.serving_variant`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import torch

from pt2aws.inference.batching import BatchedClassifier
from pt2aws.inference.variants import ORT_VARIANTS, VARIANTS, build_variant, load_fp32
from pt2aws.metrics.agreement import AGREEMENT_TARGET, label_agreement


def agreements(
    model: torch.nn.Module,
    tokenizer,
    texts: Sequence[str],
    variants: Sequence[str],
    *,
    model_dir: str | None = None,
    device: str = "cpu",
) -> dict[str, float]:
    """Share of ``texts`` whose label under each variant equals fp32 eager's (1.0 = all).

    Each variant is built from ``model`` (left fp32) and measured uncompiled: compiling changes
    speed, not the quantized numerics, and costs tens of seconds on a small CPU. fp32 eager's
    labels are computed once.

    Args:
        model: the fp32 model (:func:`pt2aws.inference.variants.load_fp32`).
        tokenizer: its tokenizer.
        texts: the texts to compare on (the validation split).
        variants: names from :data:`~pt2aws.inference.variants.VARIANTS`.
        model_dir: the model's folder (the ONNX Runtime variants' files are exported there).
        device: where the models run.

    Returns:
        ``{variant: agreement}``.

    Raises:
        ValueError: no texts.
    """
    if not texts:
        raise ValueError("agreement needs texts (got none)")
    eager = BatchedClassifier.of(model, model, tokenizer, "eager", device)
    reference = eager.predict_ids(texts)
    out = {}
    for variant in variants:
        module, _ = build_variant(
            model, variant, device, keep_fp32=True, model_dir=model_dir, tokenizer=tokenizer
        )
        fast = BatchedClassifier.of(module, model, tokenizer, variant, device)
        out[variant] = label_agreement(reference, fast.predict_ids(texts))
        del module, fast
    return out


def measure_agreement(
    model_dir: str, texts: Sequence[str], variant: str, *, device: str = "cpu"
) -> float:
    """:func:`agreements` of one ``variant`` of the model saved in ``model_dir``.

    Raises:
        ValueError: unknown variant or no texts.
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant {variant!r}: choose one of {', '.join(VARIANTS)}")
    model, tokenizer = load_fp32(model_dir)
    return agreements(model, tokenizer, texts, [variant], model_dir=model_dir, device=device)[
        variant
    ]


#: Variants whose agreement the archive records (``eager`` is the reference: always 1.0).
RECORDED_VARIANTS = ("int8", "int8-legacy", "bf16", "ort-fp32", "ort-int8")
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

    The model is loaded once; agreement is measured on ``validation_texts`` (the whole
    validation split, or a few hundred of its texts) on this machine's CPU (:func:`agreements`);
    a variant this CPU cannot run natively is still measured (bf16 runs emulated: slow but exact
    enough for agreement). Recording an ONNX Runtime variant exports its files into
    ``model_dir/onnx/`` (:func:`pt2aws.inference.ort.onnx_files`), which
    :func:`pt2aws.aws.artifact.package` then ships. The endpoint later times only ``eligible``
    variants, on ``sample``, on its own hardware (module docstring).

    Returns:
        ``{"target": 0.99, "texts": int, "agreement": {variant: float}, "eligible": [variant],
        "sample": [str], "measured_on": str}`` (JSON-serialisable; ``variants.json`` in the
        archive), plus ``"onnx"`` (the export record) when an ONNX Runtime variant is recorded.

    Raises:
        ValueError: no validation texts.
    """
    import warnings

    from pt2aws.env.machine import cpu_name

    texts = [t for t in validation_texts if t.strip()]
    if not texts:
        raise ValueError("variant_report needs validation texts (the split is empty)")
    model, tokenizer = load_fp32(model_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "bf16 is emulated": expected here
        measured = agreements(model, tokenizer, texts, variants, model_dir=model_dir)
    agreement = {v: round(a, 6) for v, a in measured.items()}
    report = {
        "target": AGREEMENT_TARGET,
        "texts": len(texts),
        "agreement": agreement,
        "eligible": [v for v, a in agreement.items() if a >= AGREEMENT_TARGET],
        "sample": texts[:sample],
        "measured_on": cpu_name(),
    }
    if set(variants) & set(ORT_VARIANTS):
        from pt2aws.inference.ort import EXPORT_RECORD, ONNX_DIR

        report["onnx"] = json.loads((Path(model_dir) / ONNX_DIR / EXPORT_RECORD).read_text())
    return report
