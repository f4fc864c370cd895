"""Accuracy as an ``evaluate`` metric module (scikit-learn ``accuracy_score``), loads offline."""

import datasets
import evaluate
from sklearn.metrics import accuracy_score


class Accuracy(evaluate.Metric):
    def _info(self):
        ids = datasets.Value("int32")
        return evaluate.MetricInfo(
            description="Accuracy: correct predictions / all predictions (class ids).",
            citation="Pedregosa et al., Scikit-learn: Machine Learning in Python, JMLR 12, 2011.",
            features=datasets.Features({"predictions": ids, "references": ids}),
        )

    def _compute(self, predictions, references):
        return {"accuracy": float(accuracy_score(references, predictions))}
