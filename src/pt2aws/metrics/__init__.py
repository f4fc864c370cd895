"""Test-set metrics with scikit-learn (label agreement between variants: :mod:`.agreement`)."""

from __future__ import annotations

from collections.abc import Sequence


def classification_metrics(
    references: Sequence[int], predictions: Sequence[int], label_names: Sequence[str]
) -> dict:
    """``{"accuracy", "f1" (macro), "f1_per_class" (a class never seen: 0), "confusion_matrix"
    (rows true, columns predicted), "num_examples"}`` over class ids ``0..len(label_names)-1``;
    ValueError when ``references`` and ``predictions`` differ in length or are empty."""
    from sklearn.metrics import accuracy_score, confusion_matrix, f1_score

    refs, preds = list(map(int, references)), list(map(int, predictions))
    if len(refs) != len(preds) or not refs:
        raise ValueError(f"need as many predictions as references (> 0), got {len(preds)}")
    labels = list(range(len(label_names)))
    per_class = f1_score(refs, preds, labels=labels, average=None, zero_division=0)
    return {
        "accuracy": float(accuracy_score(refs, preds)),
        "f1": float(per_class.mean()),  # macro: the unweighted mean over the classes
        "f1_per_class": dict(zip(label_names, map(float, per_class))),
        "confusion_matrix": confusion_matrix(refs, preds, labels=labels).tolist(),
        "num_examples": len(refs),
    }
