"""Sequence length from the data, and the record of training length versus serving length.

Training pads each batch to its longest text, so a step costs more as ``max_length`` grows while
the last percent of very long texts adds little: :func:`choose_max_length` takes the 99th
percentile of the training texts' token lengths, rounded up to a multiple of 8 (the collator's
``pad_to_multiple_of``), capped at the model's limit. Serving reads up to the model's limit
(:func:`pt2aws.serving.handler.max_tokens`), not the training length: :func:`sequence_length_record`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

#: Percentile of training-text token lengths that :func:`choose_max_length` covers by default.
DEFAULT_PERCENTILE = 99.0
#: ``max_length`` is a multiple of this (the training collator's ``pad_to_multiple_of``).
LENGTH_MULTIPLE = 8


@dataclass(frozen=True)
class LengthChoice:
    """A ``max_length`` (tokens, special tokens included) chosen from ``num_texts`` training
    texts: the ``percentile`` covered, its length ``percentile_tokens`` before rounding and
    capping at ``model_max_tokens``, the ``longest`` text and the ``fraction_truncated``."""

    max_length: int
    percentile: float
    percentile_tokens: int
    model_max_tokens: int
    num_texts: int
    longest: int
    fraction_truncated: float

    def describe(self) -> str:
        """One line, e.g. ``max_length 64 tokens: the 99th percentile of ...``."""
        why = (
            f"capped at the model's limit of {self.model_max_tokens}"
            if self.percentile_tokens > self.model_max_tokens
            else f"rounded up to a multiple of {LENGTH_MULTIPLE}"
        )
        return (
            f"max_length {self.max_length} tokens: the {self.percentile:g}th percentile of "
            f"{self.num_texts:,} training texts is {self.percentile_tokens} tokens, {why}; it "
            f"cuts {self.fraction_truncated:.1%} of them (the longest has {self.longest:,})"
        )

    def to_dict(self) -> dict:
        return {**asdict(self), "description": self.describe()}


def token_lengths(tokenizer, texts: Sequence[str], *, batch_size: int = 1024) -> list[int]:
    """Tokens per text (special tokens included, no truncation), ``batch_size`` texts a call."""
    lengths: list[int] = []
    for start in range(0, len(texts), batch_size):
        ids = tokenizer(list(texts[start : start + batch_size]), truncation=False, verbose=False)
        lengths.extend(len(x) for x in ids["input_ids"])
    return lengths


def choose_max_length(
    tokenizer,
    texts: Sequence[str],
    *,
    model_max_tokens: int,
    percentile: float = DEFAULT_PERCENTILE,
    minimum: int = LENGTH_MULTIPLE,
) -> LengthChoice:
    """``max_length`` from the data: the nearest-rank ``percentile`` (in (0, 100]) of the token
    lengths of ``texts``, rounded up to a multiple of 8, at least ``minimum``, at most
    ``model_max_tokens`` (:func:`pt2aws.serving.handler.max_tokens`).

    Raises:
        ValueError: no texts, a percentile outside (0, 100], or a model limit below ``minimum``.
    """
    if not len(texts):
        raise ValueError("choose_max_length needs at least one training text")
    if not 0 < percentile <= 100:
        raise ValueError(f"percentile={percentile}: must be in (0, 100]")
    if model_max_tokens < minimum:
        raise ValueError(f"model_max_tokens={model_max_tokens} is below the minimum {minimum}")
    lengths = np.array(token_lengths(tokenizer, texts))
    at = int(np.percentile(lengths, percentile, method="inverted_cdf"))  # nearest rank
    chosen = min(max(LENGTH_MULTIPLE * math.ceil(at / LENGTH_MULTIPLE), minimum), model_max_tokens)
    return LengthChoice(
        max_length=chosen,
        percentile=float(percentile),
        percentile_tokens=at,
        model_max_tokens=model_max_tokens,
        num_texts=len(lengths),
        longest=int(lengths.max()),
        fraction_truncated=float((lengths > chosen).mean()),
    )


def sequence_length_record(
    *,
    train_max_length: int,
    model_max_tokens: int,
    serve_max_length: int | None = None,
    train_lengths: Sequence[int] | None = None,
) -> dict:
    """Training length and serving length side by side, with the reason they differ.

    Args:
        train_max_length: tokens per text in training (``TrainConfig.max_length``).
        model_max_tokens: the model's limit (what the saved tokenizer keeps and serving uses).
        serve_max_length: a lower serving limit (``PT2AWS_MAX_LENGTH``, ``Predictor(max_length=)``).
        train_lengths: tokens per training text, for the fraction cut in training.

    Returns:
        ``{"train_max_length", "serve_max_length", "model_max_tokens",
        "train_fraction_truncated" (None without ``train_lengths``), "note"}``.
    """
    serve = min(serve_max_length or model_max_tokens, model_max_tokens)
    cut = float(np.mean(np.array(train_lengths) > train_max_length)) if train_lengths else None
    note = f"Training read the first {train_max_length} tokens of each text"
    note += "" if cut is None else f" ({cut:.1%} of the training texts were longer and cut)"
    note += f". Serving reads up to {serve} tokens " + (
        "(the model's limit)"
        if serve == model_max_tokens
        else f"(set below the model's limit of {model_max_tokens})"
    )
    note += " and flags each longer text as truncated"
    if serve > train_max_length:
        note += (
            f"; texts between {train_max_length} and {serve} tokens are read whole, which "
            "pretrained models handle well although fine-tuning saw shorter inputs."
        )
    return {
        "train_max_length": train_max_length,
        "serve_max_length": serve,
        "model_max_tokens": model_max_tokens,
        "train_fraction_truncated": cut,
        "note": note if serve > train_max_length else note + ".",
    }
