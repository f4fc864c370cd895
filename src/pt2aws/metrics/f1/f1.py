"""F1 (macro and per class) as a Hugging Face ``evaluate`` metric module, shipped with pt2aws."""

import datasets
import evaluate
from sklearn.metrics import f1_score


class F1(evaluate.Metric):
    """F1 = 2PR / (P + R) per class; ``average="macro"`` is their unweighted mean.

    ``labels`` fixes the classes (and the order of per-class scores); classes absent from both
    predictions and references score 0 (``zero_division=0``).
    """

    def _info(self):
        return evaluate.MetricInfo(
            description="F1 score, macro average or per class.",
            citation="Pedregosa et al., Scikit-learn: Machine Learning in Python, JMLR 12, 2011.",
            inputs_description="predictions, references: class ids (int); labels; average.",
            features=datasets.Features(
                {"predictions": datasets.Value("int32"), "references": datasets.Value("int32")}
            ),
        )

    def _compute(self, predictions, references, labels=None, average="macro"):
        score = f1_score(references, predictions, labels=labels, average=average, zero_division=0)
        return {"f1": float(score) if average else [float(s) for s in score]}
