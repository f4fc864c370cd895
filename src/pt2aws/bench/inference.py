"""Inference peers and the endpoint timing for ``benchmarks/`` and notebook 02.

* :class:`PipelinePredictor`: the Hugging Face ``pipeline`` as the reference row;
* :func:`measure_endpoint`: request latency of a running local endpoint.

The timing primitives themselves (latency, throughput, interleaved comparisons, the table) are
in :mod:`pt2aws.inference.measure`, which ``variant="auto"`` uses on the serving machine too.
"""

from __future__ import annotations

from collections.abc import Sequence

from pt2aws.inference.measure import latency_summary, time_calls


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


def measure_endpoint(endpoint, text: str, calls: int = 50, warmup: int = 3) -> dict:
    """Request latency and sequential requests/s of a running local endpoint for one text.

    Args:
        endpoint: a started :class:`pt2aws.serving.local.LocalEndpoint`.
        text: one short review, sent as ``{"inputs": text}`` (``application/json``).

    Returns:
        :func:`latency_summary` keys plus ``requests_per_s`` (one client, back to back).

    Raises:
        RuntimeError: a request did not return HTTP 200.
    """
    import json

    body = json.dumps({"inputs": text})

    def call():
        status, data, _ = endpoint.invoke(body)
        if status != 200:
            raise RuntimeError(f"endpoint answered {status}: {data[:200]!r}")

    lat = time_calls(call, calls, warmup)
    return {
        "variant": "local-endpoint",
        **latency_summary(lat),
        "requests_per_s": float(len(lat) / sum(lat)),
    }
