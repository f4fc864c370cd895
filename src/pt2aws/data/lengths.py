"""Sequence length from the data (:func:`choose_max_length`: the last percent of long texts costs
padding and adds little) and training length versus serving length (:func:`sequence_length_record`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

#: ``max_length`` is a multiple of this (the training collator's ``pad_to_multiple_of``).
LENGTH_MULTIPLE = 8
#: ``max_length`` covers this percentile of the training texts' token lengths.
PERCENTILE = 99.0


def token_lengths(tokenizer, texts: Sequence[str]) -> list[int]:
    """Tokens per text (special tokens included, no truncation), 1,024 texts a call."""
    chunks = (list(texts[i : i + 1024]) for i in range(0, len(texts), 1024))
    ids = (tokenizer(chunk, truncation=False, verbose=False)["input_ids"] for chunk in chunks)
    return [len(x) for chunk in ids for x in chunk]


def choose_max_length(tokenizer, texts: Sequence[str], *, model_max_tokens: int) -> dict:
    """``{"max_length", "fraction_truncated", "description"}``: the nearest-rank
    :data:`PERCENTILE` of the token lengths of ``texts``, rounded up to a multiple of 8, at most
    ``model_max_tokens``; ValueError on no texts."""
    if not len(texts):
        raise ValueError("choose_max_length needs at least one training text")
    percentile, lengths = PERCENTILE, np.array(token_lengths(tokenizer, texts))
    at = int(np.percentile(lengths, percentile, method="inverted_cdf"))  # nearest rank
    rounded = max(LENGTH_MULTIPLE * math.ceil(at / LENGTH_MULTIPLE), LENGTH_MULTIPLE)
    chosen = min(rounded, model_max_tokens)
    cut = float((lengths > chosen).mean())
    why = f"rounded up to a multiple of {LENGTH_MULTIPLE}"
    if at > model_max_tokens:
        why = f"capped at the model's limit of {model_max_tokens}"
    description = (
        f"max_length {chosen} tokens: the {percentile:g}th percentile of {len(lengths):,} training "
        f"texts is {at} tokens, {why}; it cuts {cut:.1%} of them (the longest has "
        f"{lengths.max():,})"
    )
    return {"max_length": chosen, "fraction_truncated": cut, "description": description}


def sequence_length_record(*, train_max_length: int, model_max_tokens: int,
                           train_lengths: Sequence[int]) -> dict:  # fmt: skip
    """Training length beside serving length (the model's limit), the fraction of training texts
    (``train_lengths``: their token counts) cut, and a ``note`` saying what that means."""
    cut = float(np.mean(np.array(train_lengths) > train_max_length))
    note = (
        f"Training read the first {train_max_length} tokens of each text ({cut:.1%} of the "
        f"training texts were longer and cut). Serving reads up to {model_max_tokens} tokens (the "
        "model's limit) and flags each longer text as truncated"
    )
    if model_max_tokens > train_max_length:
        note += (
            f"; texts between {train_max_length} and {model_max_tokens} tokens are read whole, "
            "which pretrained models handle well although fine-tuning saw shorter inputs"
        )
    return {"train_max_length": train_max_length, "serve_max_length": model_max_tokens,
            "train_fraction_truncated": cut, "note": note + "."}  # fmt: skip
