"""Tests of :mod:`pt2aws.metrics`: accuracy, F1 and the confusion matrix."""

import pytest

from pt2aws.metrics import classification_metrics


def test_classification_metrics_by_hand():
    m = classification_metrics([0, 0, 1, 1], [0, 1, 1, 1], ["neg", "pos"])
    assert m["accuracy"] == 0.75
    assert m["confusion_matrix"] == [[1, 1], [0, 2]]
    # F1(neg) = 2*1*0.5/1.5 = 0.6667, F1(pos) = 2*(2/3)*1/(5/3) = 0.8
    assert m["f1_per_class"]["neg"] == pytest.approx(2 / 3)
    assert m["f1"] == pytest.approx((2 / 3 + 0.8) / 2)


def test_three_classes_match_hand_counts():
    refs = [0, 1, 1, 0, 1, 2]
    preds = [0, 1, 0, 0, 2, 2]
    m = classification_metrics(refs, preds, ["neg", "pos", "neu"])
    assert m["accuracy"] == pytest.approx(4 / 6)
    # per class: neg P=2/3 R=1 -> 0.8; pos P=1 R=1/3 -> 0.5; neu P=1/2 R=1 -> 2/3
    assert m["f1_per_class"] == pytest.approx({"neg": 0.8, "pos": 0.5, "neu": 2 / 3})
    assert m["f1"] == pytest.approx((0.8 + 0.5 + 2 / 3) / 3)
    assert m["confusion_matrix"] == [[2, 0, 0], [1, 1, 1], [0, 0, 1]]
    assert m["num_examples"] == 6


def test_a_class_never_seen_scores_zero_and_bad_input_is_named():
    m = classification_metrics([0, 0], [0, 0], ["neg", "pos"])
    assert m["f1_per_class"] == {"neg": 1.0, "pos": 0.0}
    assert m["f1"] == 0.5
    assert m["confusion_matrix"] == [[2, 0], [0, 0]]
    with pytest.raises(ValueError, match="as many predictions as references"):
        classification_metrics([0, 1], [0], ["neg", "pos"])
