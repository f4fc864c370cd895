"""Accuracy as a Hugging Face ``evaluate`` metric module, shipped with pt2aws (loads offline)."""

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
