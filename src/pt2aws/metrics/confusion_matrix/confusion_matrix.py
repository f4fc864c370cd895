"""Confusion matrix (rows true, columns predicted, in ``labels`` order) as an ``evaluate`` module."""

import datasets
import evaluate
from sklearn.metrics import confusion_matrix


class ConfusionMatrix(evaluate.Metric):
    def _info(self):
        ids = datasets.Value("int32")
        return evaluate.MetricInfo(
            description="Confusion matrix (rows = references, columns = predictions).",
            citation="Pedregosa et al., Scikit-learn: Machine Learning in Python, JMLR 12, 2011.",
            features=datasets.Features({"predictions": ids, "references": ids}),
        )

    def _compute(self, predictions, references, labels=None):
        matrix = confusion_matrix(references, predictions, labels=labels)
        return {"confusion_matrix": matrix.tolist()}
