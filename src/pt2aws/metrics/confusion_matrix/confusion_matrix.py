"""Confusion matrix as a Hugging Face ``evaluate`` metric module, shipped with pt2aws."""

import datasets
import evaluate
from sklearn.metrics import confusion_matrix


class ConfusionMatrix(evaluate.Metric):
    """Counts: rows are true classes, columns predicted classes, in ``labels`` order."""

    def _info(self):
        return evaluate.MetricInfo(
            description="Confusion matrix (rows = references, columns = predictions).",
            citation="Pedregosa et al., Scikit-learn: Machine Learning in Python, JMLR 12, 2011.",
            inputs_description="predictions, references: class ids (int); labels.",
            features=datasets.Features(
                {"predictions": datasets.Value("int32"), "references": datasets.Value("int32")}
            ),
        )

    def _compute(self, predictions, references, labels=None):
        matrix = confusion_matrix(references, predictions, labels=labels)
        return {"confusion_matrix": matrix.tolist()}
