"""Texts in, class probabilities out: batching by length around any built variant.

Every variant (:mod:`pt2aws.inference.variants`) is a callable ``model(**encoding)`` whose result
has ``.logits`` (a ``transformers`` model, a ``torch.compile`` of one, or an ONNX Runtime session
behind :class:`pt2aws.inference.ort.OrtClassifier`). :func:`batched_proba` runs one over texts
sorted by length, so each batch pads little; :class:`BatchedClassifier` is a built variant with
its tokenizer, the "predictor" interface that :mod:`pt2aws.inference.measure` times
(``predict_ids`` and ``batch_size``). :class:`pt2aws.inference.predictor.Predictor` adds loading,
labels and long-text windows on top of the same function.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch


def length_sorted_batches(texts: Sequence, batch_size: int) -> list[list[int]]:
    """Positions of ``texts`` in batches of ``batch_size``, shortest first (by ``len``), so each
    batch pads little."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]


def encoded_batches(
    tokenizer, texts: Sequence[str], batch_size: int, max_length: int, tensors="pt"
):
    """``(positions, encoding)`` per :func:`length_sorted_batches` batch: the texts at those
    positions tokenized, truncated to ``max_length`` tokens and padded to the batch's longest
    (``tensors``: ``"pt"`` torch or ``"np"`` numpy arrays)."""
    for idx in length_sorted_batches(texts, batch_size):
        enc = tokenizer(
            [texts[i] for i in idx],
            truncation=True,
            max_length=max_length,
            padding=True,
            return_tensors=tensors,
        )
        yield idx, enc


@torch.inference_mode()
def batched_proba(
    model: Callable,
    tokenizer,
    texts: Sequence[str],
    *,
    batch_size: int,
    max_length: int,
    num_labels: int,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """Class probabilities of ``texts`` under ``model``, float32 ``(len(texts), num_labels)``,
    in input order (texts truncated to ``max_length`` tokens, batched shortest first).

    Raises:
        TypeError: ``texts`` is a single string.
    """
    if isinstance(texts, str):
        raise TypeError("pass a list of texts; wrap a single text in [ ]")
    probs = torch.empty(len(texts), num_labels)
    for idx, enc in encoded_batches(tokenizer, texts, batch_size, max_length):
        probs[idx] = model(**enc.to(device)).logits.float().softmax(-1).cpu()
    return probs


class BatchedClassifier:
    """A built variant with its tokenizer: what :mod:`pt2aws.inference.measure` times.

    Args:
        model: the variant's callable (``model(**encoding).logits``).
        tokenizer: the model's tokenizer (shared by every variant of one model).
        variant: the variant's name, for tables.
        max_length: tokens per text (truncation).
        num_labels: classes.
        batch_size: texts per call (the timing functions set it to 32 and restore it).
        device: where ``model`` runs.
    """

    def __init__(
        self,
        model: Callable,
        tokenizer,
        *,
        variant: str,
        max_length: int,
        num_labels: int,
        batch_size: int = 32,
        device: torch.device | str = "cpu",
    ):
        self.model, self.tokenizer, self.variant = model, tokenizer, variant
        self.max_length, self.num_labels = max_length, num_labels
        self.batch_size, self.device = batch_size, torch.device(device)

    @classmethod
    def of(cls, call: Callable, model, tokenizer, variant: str, device="cpu") -> BatchedClassifier:
        """``call`` (a built variant of the ``transformers`` ``model``) with the model's tokenizer,
        its token limit (:func:`pt2aws.modeling.model_max_tokens`) and its labels."""
        from pt2aws.modeling import model_max_tokens

        return cls(
            call,
            tokenizer,
            variant=variant,
            max_length=model_max_tokens(model.config, tokenizer),
            num_labels=model.config.num_labels,
            device=device,
        )

    def predict_proba(self, texts: Sequence[str]) -> torch.Tensor:
        """Class probabilities, float32 ``(len(texts), num_labels)``, in input order."""
        return batched_proba(
            self.model,
            self.tokenizer,
            texts,
            batch_size=self.batch_size,
            max_length=self.max_length,
            num_labels=self.num_labels,
            device=self.device,
        )

    def predict_ids(self, texts: Sequence[str]) -> list[int]:
        """Predicted label ids, one per text, in order."""
        return self.predict_proba(texts).argmax(-1).tolist()
