"""Quality of predictions: label agreement between two variants, and test-set metrics."""

from __future__ import annotations

from collections.abc import Sequence

#: The share of labels a fast variant must keep equal to fp32 eager's to be served or chosen
#: (this project's rule, issue 12).
AGREEMENT_TARGET = 0.99


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
