"""Local, batched predictions from a saved model directory, and their evaluation.

Example::

    predictor = Predictor("runs/x/train/model")
    predictor.predict(["What a great phone!", "Worst service ever."])
    # [{"label": "positive", "score": 0.97, "label_id": 1}, {"label": "negative", ...}]
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from pt2aws.modeling import ROBERTA_MAX_TOKENS


class Predictor:
    """Batched text classification with truncation, for CPU or GPU.

    Args:
        model_dir: a directory written by ``save_pretrained`` (model and tokenizer).
        device: ``"cpu"``, ``"cuda"`` or ``None`` (CUDA when available).
        batch_size: texts per forward pass.
        max_length: tokens per text; default: the tokenizer's limit, capped at 512 (RoBERTa's
            real limit; its config lists 514 positions, 2 of them a padding offset).
    """

    def __init__(
        self,
        model_dir: str,
        *,
        device: str | None = None,
        batch_size: int = 32,
        max_length: int | None = None,
    ):
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.model = (
            AutoModelForSequenceClassification.from_pretrained(model_dir).eval().to(self.device)
        )
        self.batch_size = batch_size
        self.max_length = max_length or min(
            int(self.tokenizer.model_max_length), ROBERTA_MAX_TOKENS
        )
        self.label_names = [
            self.model.config.id2label[i] for i in range(self.model.config.num_labels)
        ]

    @torch.inference_mode()
    def predict_proba(self, texts: Sequence[str]) -> torch.Tensor:
        """Class probabilities, float32 tensor of shape ``(len(texts), num_labels)``, input order.

        Texts are sorted by length before batching so each batch pads little.
        """
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        probs = torch.empty(len(texts), len(self.label_names))
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            enc = self.tokenizer(
                [texts[i] for i in idx],
                truncation=True,
                max_length=self.max_length,
                padding=True,
                return_tensors="pt",
            ).to(self.device)
            probs[idx] = self.model(**enc).logits.float().softmax(-1).cpu()
        return probs

    def predict(self, texts: Sequence[str]) -> list[dict]:
        """``[{"label": str, "score": float, "label_id": int}, ...]``, one per text, in order."""
        probs = self.predict_proba(texts)
        scores, ids = probs.max(-1)
        return [
            {"label": self.label_names[int(i)], "score": float(s), "label_id": int(i)}
            for s, i in zip(scores, ids)
        ]


def classification_metrics(
    references: Sequence[int], predictions: Sequence[int], label_names: Sequence[str]
) -> dict:
    """Accuracy, macro F1, per-class F1 and the confusion matrix.

    Returns:
        ``{"accuracy", "f1", "f1_per_class": {name: f1}, "confusion_matrix": [[int]] (rows = true,
        columns = predicted, in label-id order), "num_examples"}``.
    """
    from sklearn.metrics import accuracy_score, confusion_matrix, f1_score

    labels = list(range(len(label_names)))
    per_class = f1_score(references, predictions, labels=labels, average=None, zero_division=0)
    return {
        "accuracy": float(accuracy_score(references, predictions)),
        "f1": float(
            f1_score(references, predictions, labels=labels, average="macro", zero_division=0)
        ),
        "f1_per_class": {name: float(v) for name, v in zip(label_names, per_class)},
        "confusion_matrix": confusion_matrix(references, predictions, labels=labels).tolist(),
        "num_examples": len(references),
    }
