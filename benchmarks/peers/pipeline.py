"""The Hugging Face ``pipeline`` peer of ``benchmarks/inference_speed.py``: the reference row.

The timing primitives (latency, throughput, interleaved comparisons, the table, a local
endpoint's requests) are in :mod:`pt2aws.inference.measure`, which ``variant="auto"`` uses on
the serving machine too.
"""

from __future__ import annotations

from collections.abc import Sequence


class PipelinePredictor:
    """The Hugging Face reference, ``pipeline("text-classification")`` on the same model, with
    the predictor interface (its own batching: texts in input order, ``batch_size`` per call).

    Args:
        model_dir: a saved model directory.
        max_length: tokens per text (truncation), as the predictors use.
        device: a pipeline ``device`` (``"cpu"``, ``0``...).
    """

    def __init__(self, model_dir: str, max_length: int, device: int | str = "cpu"):
        from transformers import pipeline

        self.pipe = pipeline(
            "text-classification", model=model_dir, tokenizer=model_dir, device=device
        )
        self.label2id = self.pipe.model.config.label2id
        self.max_length = max_length
        self.batch_size = 1

    def predict_ids(self, texts: Sequence[str]) -> list[int]:
        """Top label id per text, in order."""
        out = self.pipe(
            list(texts), batch_size=self.batch_size, truncation=True, max_length=self.max_length
        )
        return [self.label2id[o["label"]] for o in out]
