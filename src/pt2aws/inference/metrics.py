"""Local, batched predictions from a saved model directory, its fast variants, and evaluation.

Example::

    predictor = Predictor("runs/x/train/model", variant="auto")   # prints the variant and why
    predictor.predict(["What a great phone!", "Worst service ever."])
    # [{"label": "positive", "score": 0.97, "label_id": 1}, {"label": "negative", ...}]

Variants (``Predictor(variant=...)``):

* ``"eager"``: fp32, no compilation; the reference the others are compared with.
* ``"compile"``: ``torch.compile`` (Inductor) of the fp32 model; pays a one-off compile
  (25-55 s cold on 2 cores, see the stack notes) for faster steady-state kernels.
* ``"bf16"``: bf16 weights and activations, where the CPU (AVX512-BF16/AMX on x86, BF16 on
  Graviton3+) or the GPU (Ampere+) computes bf16 natively.
* ``"int8"``: dynamic int8 quantization of every ``nn.Linear`` (CPU only), weights int8,
  activations quantized per batch at run time.
* ``"auto"``: :func:`choose_variant` picks one for the hardware and says why.
"""

from __future__ import annotations

from collections.abc import Sequence


def label_agreement(reference: Sequence[int], other: Sequence[int]) -> float:
    """Fraction of positions where two label sequences agree (1.0 = identical).

    Raises:
        ValueError: the sequences differ in length or are empty.
    """
    if len(reference) != len(other) or not reference:
        raise ValueError(
            f"label_agreement needs two non-empty sequences of equal length, got {len(reference)} "
            f"and {len(other)}"
        )
    return sum(int(a == b) for a, b in zip(reference, other)) / len(reference)


def classification_metrics(
    references: Sequence[int], predictions: Sequence[int], label_names: Sequence[str]
) -> dict:
    """Accuracy, macro F1, per-class F1 and the confusion matrix.

    Returns:
        ``{"accuracy", "f1", "f1_per_class": {name: f1}, "confusion_matrix": [[int]] (rows = true,
        columns = predicted, in label-id order), "num_examples"}``.
    """
    from sklearn.metrics import accuracy_score, confusion_matrix, f1_score

    labels = list(range(len(label_names)))
    per_class = f1_score(references, predictions, labels=labels, average=None, zero_division=0)
    return {
        "accuracy": float(accuracy_score(references, predictions)),
        "f1": float(
            f1_score(references, predictions, labels=labels, average="macro", zero_division=0)
        ),
        "f1_per_class": {name: float(v) for name, v in zip(label_names, per_class)},
        "confusion_matrix": confusion_matrix(references, predictions, labels=labels).tolist(),
        "num_examples": len(references),
    }
