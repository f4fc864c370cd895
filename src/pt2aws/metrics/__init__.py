"""Accuracy, F1 and the confusion matrix through Hugging Face ``evaluate``, offline: the modules
(``evaluate.Metric`` over scikit-learn) ship beside this file, not fetched from the hub."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from pathlib import Path

#: The metric modules shipped here (folder name = module name).
SHIPPED = ("accuracy", "f1", "confusion_matrix")


@cache
def load_metric(name: str):
    """The ``evaluate`` module ``name`` loaded from this package; ValueError if not shipped."""
    if name not in SHIPPED:
        raise ValueError(f"metric {name!r} is not shipped with pt2aws; choose from {SHIPPED}")
    import evaluate

    return evaluate.load(str(Path(__file__).parent / name))


def classification_metrics(
    references: Sequence[int], predictions: Sequence[int], label_names: Sequence[str]
) -> dict:
    """``{"accuracy", "f1" (macro), "f1_per_class", "confusion_matrix" (rows true), "num_examples"}``;
    ValueError when ``references`` and ``predictions`` differ in length or are empty."""
    data = {"predictions": list(map(int, predictions)), "references": list(map(int, references))}
    if len(data["references"]) != len(data["predictions"]) or not data["references"]:
        raise ValueError(f"need as many predictions as references (> 0), got {len(predictions)}")
    labels = list(range(len(label_names)))
    per_class = load_metric("f1").compute(**data, labels=labels, average=None)["f1"]
    matrix = load_metric("confusion_matrix").compute(**data, labels=labels)
    return {
        "accuracy": load_metric("accuracy").compute(**data)["accuracy"],
        "f1": load_metric("f1").compute(**data, labels=labels, average="macro")["f1"],
        "f1_per_class": dict(zip(label_names, per_class)),
        "confusion_matrix": matrix["confusion_matrix"],
        "num_examples": len(data["references"]),
    }
