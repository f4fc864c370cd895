"""Sequence length from the data (:func:`choose_max_length`: the last percent of long texts costs
padding and adds little) and training length versus serving length (:func:`sequence_length_record`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

#: ``max_length`` is a multiple of this (the training collator's ``pad_to_multiple_of``).
LENGTH_MULTIPLE = 8


@dataclass(frozen=True)
class LengthChoice:
    """A ``max_length`` (tokens, special tokens included) chosen from ``num_texts`` texts."""

    max_length: int
    percentile: float
    percentile_tokens: int  # before rounding and capping at model_max_tokens
    model_max_tokens: int
    num_texts: int
    longest: int
    fraction_truncated: float

    def describe(self) -> str:
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


def token_lengths(tokenizer, texts: Sequence[str]) -> list[int]:
    """Tokens per text (special tokens included, no truncation), 1,024 texts a call."""
    lengths: list[int] = []
    for start in range(0, len(texts), 1024):
        ids = tokenizer(list(texts[start : start + 1024]), truncation=False, verbose=False)
        lengths.extend(len(x) for x in ids["input_ids"])
    return lengths


def choose_max_length(
    tokenizer, texts: Sequence[str], *, model_max_tokens: int, percentile: float = 99.0
) -> LengthChoice:
    """The nearest-rank ``percentile`` (in (0, 100]) of the token lengths of ``texts``, rounded
    up to a multiple of 8, at most ``model_max_tokens``; ValueError on no texts or a bad percentile.
    """
    if not len(texts):
        raise ValueError("choose_max_length needs at least one training text")
    if not 0 < percentile <= 100:
        raise ValueError(f"percentile={percentile}: must be in (0, 100]")
    lengths = np.array(token_lengths(tokenizer, texts))
    at = int(np.percentile(lengths, percentile, method="inverted_cdf"))  # nearest rank
    rounded = max(LENGTH_MULTIPLE * math.ceil(at / LENGTH_MULTIPLE), LENGTH_MULTIPLE)
    chosen = min(rounded, model_max_tokens)
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
    """Training length and serving length (``serve_max_length``, default the model's limit)
    side by side, the fraction cut in training (None without ``train_lengths``) and a ``note``."""
    serve = min(serve_max_length or model_max_tokens, model_max_tokens)
    cut = float(np.mean(np.array(train_lengths) > train_max_length)) if train_lengths else None
    note = f"Training read the first {train_max_length} tokens of each text"
    if cut is not None:
        note += f" ({cut:.1%} of the training texts were longer and cut)"
    limit = "the model's limit" if serve == model_max_tokens else "set below the model's limit"
    note += f". Serving reads up to {serve} tokens ({limit} of {model_max_tokens})"
    note += " and flags each longer text as truncated"
    if serve > train_max_length:
        note += (
            f"; texts between {train_max_length} and {serve} tokens are read whole, which "
            "pretrained models handle well although fine-tuning saw shorter inputs"
        )
    return {
        "train_max_length": train_max_length,
        "serve_max_length": serve,
        "model_max_tokens": model_max_tokens,
        "train_fraction_truncated": cut,
        "note": note + ".",
    }
