"""Sequence length from the data, and the record of training length versus serving length.

Training pads every batch to its longest text, so the cost of a step grows with ``max_length``
while the accuracy gained by reading the last percent of very long texts is small.
:func:`choose_max_length` therefore takes the 99th percentile of the training texts' token
lengths (with length-bucketed batches a long cap costs little: only the batches of long texts
reach it; on the local profile's tweets the 95th percentile, 56 tokens, cut 3.3% of the texts
and test accuracy fell by about 0.01 against 64 tokens, which cut 0.6%), rounds it up to a multiple of 8 (tensor-core and vector friendly shapes, and the
multiple the training collator pads to) and caps it at the model's limit; it reports the
fraction of texts the choice cuts.

Serving is a different question: a model trained on the first 64 tokens of each text still
reads longer texts well (its position embeddings were pretrained to 512), so serving reads up to
the model's limit, not the training length (see :func:`pt2aws.modeling.model_max_tokens`), and
flags each text it had to cut. :func:`sequence_length_record` writes both down with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

#: Percentile of training-text token lengths that :func:`choose_max_length` covers by default.
DEFAULT_PERCENTILE = 99.0
#: ``max_length`` is a multiple of this (the training collator's ``pad_to_multiple_of``).
LENGTH_MULTIPLE = 8


@dataclass(frozen=True)
class LengthChoice:
    """A ``max_length`` chosen from tokenized training texts, with what it costs.

    Attributes:
        max_length: the choice, in tokens, special tokens included.
        percentile: the percentile of text lengths it covers before rounding (e.g. 95.0).
        percentile_tokens: that percentile's length in tokens, before rounding and capping.
        model_max_tokens: the model's limit that caps the choice.
        num_texts: texts measured.
        longest: the longest text, in tokens.
        fraction_truncated: share of the texts longer than ``max_length`` (cut in training).
    """

    max_length: int
    percentile: float
    percentile_tokens: int
    model_max_tokens: int
    num_texts: int
    longest: int
    fraction_truncated: float

    def describe(self) -> str:
        """One line for logs and notebooks, e.g. ``max_length 64 tokens: ...``."""
        capped = self.percentile_tokens > self.model_max_tokens
        why = (
            f"capped at the model's limit of {self.model_max_tokens}"
            if capped
            else f"rounded up to a multiple of {LENGTH_MULTIPLE}"
        )
        return (
            f"max_length {self.max_length} tokens: the {self.percentile:g}th percentile of "
            f"{self.num_texts:,} training texts is {self.percentile_tokens} tokens, {why}; it "
            f"cuts {self.fraction_truncated:.1%} of them (the longest has {self.longest:,})"
        )

    def to_dict(self) -> dict:
        """The fields as a JSON-serialisable dict, plus ``description``."""
        return {**asdict(self), "description": self.describe()}


def token_lengths(tokenizer, texts: Sequence[str], *, batch_size: int = 1024) -> list[int]:
    """Tokens per text, special tokens included, without truncation.

    Args:
        tokenizer: a Hugging Face tokenizer.
        texts: the texts.
        batch_size: texts tokenized per call (bounds memory on large datasets).
    """
    lengths: list[int] = []
    for start in range(0, len(texts), batch_size):
        batch = list(texts[start : start + batch_size])
        ids = tokenizer(batch, truncation=False, verbose=False)["input_ids"]
        lengths.extend(len(x) for x in ids)
    return lengths


def choose_max_length(
    tokenizer,
    texts: Sequence[str],
    *,
    model_max_tokens: int,
    percentile: float = DEFAULT_PERCENTILE,
    minimum: int = LENGTH_MULTIPLE,
) -> LengthChoice:
    """``max_length`` from the data: a percentile of token lengths, rounded up, capped.

    Args:
        tokenizer: the model's tokenizer (a Hugging Face tokenizer).
        texts: the training texts (a sample of a few thousand is enough).
        model_max_tokens: the model's limit (:func:`pt2aws.modeling.model_max_tokens`; 512
            for RoBERTa, whose config lists 514 positions).
        percentile: in (0, 100]; the nearest-rank percentile, so at most ``100 - percentile``
            percent of the texts are longer than it.
        minimum: the smallest choice (``TrainConfig`` requires 8 or more).

    Returns:
        A :class:`LengthChoice`.

    Raises:
        ValueError: no texts, a percentile outside (0, 100], or a model limit below
            ``minimum``.
    """
    if not len(texts):
        raise ValueError("choose_max_length needs at least one training text")
    if not 0 < percentile <= 100:
        raise ValueError(f"percentile={percentile}: must be in (0, 100]")
    if model_max_tokens < minimum:
        raise ValueError(f"model_max_tokens={model_max_tokens} is below the minimum {minimum}")
    lengths = sorted(token_lengths(tokenizer, texts))
    at = lengths[max(0, math.ceil(percentile / 100 * len(lengths)) - 1)]
    rounded = LENGTH_MULTIPLE * math.ceil(at / LENGTH_MULTIPLE)
    chosen = min(max(rounded, minimum), model_max_tokens)
    cut = sum(n > chosen for n in lengths)
    return LengthChoice(
        max_length=chosen,
        percentile=float(percentile),
        percentile_tokens=at,
        model_max_tokens=model_max_tokens,
        num_texts=len(lengths),
        longest=lengths[-1],
        fraction_truncated=cut / len(lengths),
    )


def sequence_length_record(
    *,
    train_max_length: int,
    model_max_tokens: int,
    serve_max_length: int | None = None,
    train_lengths: Sequence[int] | None = None,
) -> dict:
    """Training length and serving length, side by side, with the reason they differ.

    Args:
        train_max_length: tokens per text in training (``TrainConfig.max_length``).
        model_max_tokens: the model's limit (what the saved tokenizer keeps and serving uses).
        serve_max_length: a lower serving limit if one is set (``PT2AWS_MAX_LENGTH`` in the
            endpoint, ``Predictor(max_length=...)``); default: ``model_max_tokens``.
        train_lengths: tokens per training text, to report the fraction cut in training.

    Returns:
        ``{"train_max_length", "serve_max_length", "model_max_tokens",
        "train_fraction_truncated" (None without ``train_lengths``), "note"}``.
    """
    serve = min(serve_max_length or model_max_tokens, model_max_tokens)
    cut = None
    if train_lengths:
        cut = sum(n > train_max_length for n in train_lengths) / len(train_lengths)
    cut_text = "" if cut is None else f" ({cut:.1%} of the training texts were longer and cut)"
    note = (
        f"Training read the first {train_max_length} tokens of each text{cut_text}. Serving "
        f"reads up to {serve} tokens"
        + (
            " (the model's limit)"
            if serve == model_max_tokens
            else f" (set below the model's limit of {model_max_tokens})"
        )
        + " and flags each longer text as truncated"
        + (
            f"; texts between {train_max_length} and {serve} tokens are read whole, which "
            "pretrained models handle well although fine-tuning saw shorter inputs."
            if serve > train_max_length
            else "."
        )
    )
    return {
        "train_max_length": train_max_length,
        "serve_max_length": serve,
        "model_max_tokens": model_max_tokens,
        "train_fraction_truncated": cut,
        "note": note,
    }
