"""Classification metrics through Hugging Face ``evaluate``, offline.

``evaluate.load("accuracy")`` fetches the metric's script from the hub (the wheel ships none;
stack notes, section 5): pt2aws ships the modules it reports beside this file (``evaluate.Metric``
classes computing with scikit-learn) and loads them from disk, so training, notebook 02 and the
benchmarks compute the same figures the same way, with or without a network.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from pathlib import Path

METRICS_DIR = Path(__file__).parent
#: The metric modules shipped here (folder name = module name).
SHIPPED = ("accuracy", "f1", "confusion_matrix")


@cache
def load_metric(name: str):
    """The ``evaluate`` module ``name`` (one of :data:`SHIPPED`), loaded from this package.

    Raises:
        ValueError: a metric pt2aws does not ship; the message lists the shipped ones.
    """
    if name not in SHIPPED:
        raise ValueError(f"metric {name!r} is not shipped with pt2aws; choose from {SHIPPED}")
    import evaluate

    return evaluate.load(str(METRICS_DIR / name))


def classification_metrics(
    references: Sequence[int], predictions: Sequence[int], label_names: Sequence[str]
) -> dict:
    """Accuracy, macro F1, per-class F1 and the confusion matrix, through ``evaluate``.

    Returns:
        ``{"accuracy", "f1" (macro), "f1_per_class": {name: f1}, "confusion_matrix": [[int]]
        (rows true, columns predicted, in the id order of ``label_names``), "num_examples"}``.

    Raises:
        ValueError: ``references`` and ``predictions`` differ in length, or are empty.
    """
    references, predictions = [int(r) for r in references], [int(p) for p in predictions]
    if len(references) != len(predictions) or not references:
        raise ValueError(
            f"need as many predictions as references (> 0), got {len(predictions)} and "
            f"{len(references)}"
        )
    labels = list(range(len(label_names)))
    data = {"predictions": predictions, "references": references}
    per_class = load_metric("f1").compute(**data, labels=labels, average=None)["f1"]
    return {
        "accuracy": load_metric("accuracy").compute(**data)["accuracy"],
        "f1": load_metric("f1").compute(**data, labels=labels, average="macro")["f1"],
        "f1_per_class": dict(zip(label_names, per_class)),
        "confusion_matrix": load_metric("confusion_matrix").compute(**data, labels=labels)[
            "confusion_matrix"
        ],
        "num_examples": len(references),
    }
