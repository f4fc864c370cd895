"""Label agreement between two variants (test-set metrics: :mod:`pt2aws.metrics`)."""

from __future__ import annotations

from collections.abc import Sequence

#: The share of labels a fast variant must keep equal to fp32 eager's to be served or chosen.
AGREEMENT_TARGET = 0.99


def label_agreement(reference: Sequence[int], other: Sequence[int]) -> float:
    """Fraction of positions where two label sequences agree (1.0 = identical).

    Raises:
        ValueError: the sequences differ in length or are empty.
    """
    if len(reference) != len(other) or not reference:
        raise ValueError(
            f"label_agreement needs two non-empty sequences of equal length, got {len(reference)} "
            f"and {len(other)}"
        )
    return sum(int(a == b) for a, b in zip(reference, other)) / len(reference)
