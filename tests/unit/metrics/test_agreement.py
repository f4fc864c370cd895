"""Tests of :mod:`pt2aws.metrics.agreement`."""

import pytest


def test_label_agreement():
    from pt2aws.metrics.agreement import label_agreement

    assert label_agreement([0, 1, 1, 0], [0, 1, 0, 0]) == 0.75
    with pytest.raises(ValueError, match="equal length"):
        label_agreement([0, 1], [0])
