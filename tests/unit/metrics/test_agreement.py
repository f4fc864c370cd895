"""Tests of :mod:`pt2aws.metrics.agreement`: agreement, and the guard's sample size (issue 31)."""

import pytest

from pt2aws.metrics import agreement
from pt2aws.metrics.agreement import judge_agreement


def test_label_agreement():
    from pt2aws.metrics.agreement import label_agreement

    assert label_agreement([0, 1, 1, 0], [0, 1, 0, 0]) == 0.75
    with pytest.raises(ValueError, match="equal length"):
        label_agreement([0, 1], [0])


def test_wilson_interval_and_the_texts_that_tell_99_from_98():
    low, high = agreement.wilson_interval(127, 128)
    assert low == pytest.approx(0.9571, abs=1e-4) and high == pytest.approx(0.9986, abs=1e-4)
    assert agreement.wilson_interval(0, 10)[0] == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="at least one text"):
        agreement.wilson_interval(0, 0)
    n = agreement.AGREEMENT_MIN_TEXTS
    assert n == 753  # the normal approximation would say 381
    assert agreement.wilson_interval(0.99 * n, n)[0] > 0.98
    assert agreement.wilson_interval(0.99 * (n - 1), n - 1)[0] <= 0.98


@pytest.mark.parametrize(
    ("agreeing", "texts", "few", "all_of_them"),
    [
        (127, 128, None, True),  # 99.2% of 128 cannot tell 99% from 98%
        (1346, 1362, None, False),  # 98.8%: not clearly below, and below on all there are
        (256, 256, True, True),  # no disagreement in 256: above 98% with 95% confidence
        (250, 256, False, False),  # 97.7%: clearly below, rejected on the few
        (62, 64, None, False),
        (61, 64, False, False),
        (1355, 1362, True, True),
    ],
)
def test_the_guard_decides_on_enough_texts(agreeing, texts, few, all_of_them):
    assert judge_agreement(agreeing, texts, all_texts=False)[0] is few
    assert judge_agreement(agreeing, texts, all_texts=True)[0] is all_of_them


def test_every_reason_gives_the_count():
    assert judge_agreement(1351, 1362, all_texts=True) == (
        True, "99.2% label agreement on 1,362 texts"
    )  # fmt: skip
    assert judge_agreement(127, 128, all_texts=False)[1] == (
        "99.2% label agreement on 128 texts: too few to tell 99% from 98%"
    )
    keeps, why = judge_agreement(197, 200, all_texts=True)  # the smoke profile's whole split
    assert not keeps and why == (
        "98.5% label agreement on 200 texts < 99% (all there are; 753 would tell 99% from 98%)"
    )
    assert (
        judge_agreement(1346, 1362, all_texts=True)[1]
        == "98.8% label agreement on 1,362 texts < 99%"
    )
    assert agreement.percent(0.9896) == "98.96%" and agreement.percent(0.9904) == "99.04%"
