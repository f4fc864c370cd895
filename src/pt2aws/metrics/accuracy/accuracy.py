"""Accuracy as a Hugging Face ``evaluate`` metric module, shipped with pt2aws (loads offline).

The ``evaluate`` wheel ships no metric scripts; ``evaluate.load("accuracy")`` fetches one from the
hub and fails offline (stack notes, section 5). This file is the same metric, loaded from disk.
"""

import datasets
import evaluate
from sklearn.metrics import accuracy_score


class Accuracy(evaluate.Metric):
    """Fraction of predictions equal to the references (scikit-learn ``accuracy_score``)."""

    def _info(self):
        return evaluate.MetricInfo(
            description="Accuracy: correct predictions / all predictions.",
            citation="Pedregosa et al., Scikit-learn: Machine Learning in Python, JMLR 12, 2011.",
            inputs_description="predictions, references: class ids (int).",
            features=datasets.Features(
                {"predictions": datasets.Value("int32"), "references": datasets.Value("int32")}
            ),
        )

    def _compute(self, predictions, references):
        return {"accuracy": float(accuracy_score(references, predictions))}
