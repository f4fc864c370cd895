"""F1 (macro, or per class in ``labels`` order with ``average=None``; unseen: 0) for ``evaluate``."""

import datasets
import evaluate
from sklearn.metrics import f1_score


class F1(evaluate.Metric):
    def _info(self):
        ids = datasets.Value("int32")
        return evaluate.MetricInfo(
            description="F1 score, macro average or per class.",
            citation="Pedregosa et al., Scikit-learn: Machine Learning in Python, JMLR 12, 2011.",
            features=datasets.Features({"predictions": ids, "references": ids}),
        )

    def _compute(self, predictions, references, labels=None, average="macro"):
        score = f1_score(references, predictions, labels=labels, average=average, zero_division=0)
        return {"f1": float(score) if average else [float(s) for s in score]}
