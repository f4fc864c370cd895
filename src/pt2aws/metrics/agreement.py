"""Label agreement between two variants, and the one guard on it: a variant is served where it
keeps :data:`AGREEMENT_TARGET` of fp32 eager's labels on enough texts to say so (test-set
metrics: :mod:`pt2aws.metrics`). Enough: a 95% Wilson score interval, not the normal
approximation (381 texts for 99% against 98%), whose coverage collapses near 100% with a
handful of disagreements (Brown, Cai and DasGupta, Statistical Science 16(2), 2001)."""

from __future__ import annotations

import math

#: The share of labels a fast variant must keep equal to fp32 eager's to be served or chosen.
AGREEMENT_TARGET = 0.99
#: The guard tells the target from this much below it: 99% from 98% (issue 31).
AGREEMENT_RESOLUTION = 0.01
Z_95 = 1.959964  # the two-sided 95% quantile of the standard normal distribution


def label_agreement(reference, other) -> float:
    """Fraction of positions where two label sequences agree; ValueError if lengths differ or 0."""
    if len(reference) != len(other) or not reference:
        raise ValueError(f"label_agreement needs equal length, got {len(reference)}, {len(other)}")
    return sum(a == b for a, b in zip(reference, other)) / len(reference)


def wilson_interval(agreeing: float, texts: int) -> tuple[float, float]:
    """``(low, high)``, the 95% Wilson score interval of ``agreeing / texts``; ValueError: none."""
    if texts < 1:
        raise ValueError(f"wilson_interval needs at least one text, got {texts}")
    share, z2 = agreeing / texts, Z_95 * Z_95 / texts
    half = Z_95 * math.sqrt(share * (1 - share) / texts + z2 / (4 * texts)) / (1 + z2)
    return (share + z2 / 2) / (1 + z2) - half, (share + z2 / 2) / (1 + z2) + half


#: The fewest texts on which a share at the target has its interval above target - resolution
#: (753 for 99% against 98%).
AGREEMENT_MIN_TEXTS = next(n for n in range(1, 10**6) if wilson_interval(
    AGREEMENT_TARGET * n, n)[0] > AGREEMENT_TARGET - AGREEMENT_RESOLUTION)  # fmt: skip


def percent(share: float) -> str:
    """``share`` as a percentage, one decimal (two where one would round onto the target)."""
    shown = f"{share:.1%}"
    return f"{share:.2%}" if shown == f"{AGREEMENT_TARGET:.1%}" else shown


def judge_agreement(agreeing: int, texts: int, *, all_texts: bool) -> tuple[bool | None, str]:
    """``(keeps, why)`` for ``agreeing`` of ``texts`` labels equal to fp32 eager's: True where
    the share reaches the target and its interval lies above target - resolution; False where
    the interval lies below the target (rejected even on few texts); else None, measure on more.
    With ``all_texts`` (there are no more), an undecided share is judged by itself. ``why``:
    "99.2% label agreement on 1,362 texts", the verdict, and a note where all the texts there
    are were fewer than :data:`AGREEMENT_MIN_TEXTS`."""
    (low, high), share = wilson_interval(agreeing, texts), agreeing / texts
    keeps = True if share >= AGREEMENT_TARGET and low > AGREEMENT_TARGET - AGREEMENT_RESOLUTION \
        else False if high < AGREEMENT_TARGET else None  # fmt: skip
    why = f"{percent(share)} label agreement on {texts:,} texts"
    if keeps is None and not all_texts:
        return None, f"{why}: too few to tell 99% from 98%"
    note = f" (all there are; {AGREEMENT_MIN_TEXTS:,} would tell 99% from 98%)" \
        if keeps is None and texts < AGREEMENT_MIN_TEXTS else ""  # fmt: skip
    keeps = share >= AGREEMENT_TARGET if keeps is None else keeps
    return keeps, why + ("" if keeps else f" < {AGREEMENT_TARGET:.0%}") + note
