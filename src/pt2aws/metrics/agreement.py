"""Label agreement between two variants (test-set metrics: :mod:`pt2aws.metrics`)."""

#: The share of labels a fast variant must keep equal to fp32 eager's to be served or chosen.
AGREEMENT_TARGET = 0.99


def label_agreement(reference, other) -> float:
    """Fraction of positions where two label sequences agree; ValueError if lengths differ or 0."""
    if len(reference) != len(other) or not reference:
        raise ValueError(f"label_agreement needs equal length, got {len(reference)}, {len(other)}")
    return sum(a == b for a, b in zip(reference, other)) / len(reference)
