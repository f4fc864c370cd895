"""Tests of :mod:`pt2aws.data.labels`: label keys and label maps."""

import pytest


def test_label_key_spells_numbers_one_way():
    from pt2aws.data import label_key

    assert [label_key(v) for v in (1, 1.0, "1", " 1.0 ", "+1", True)] == ["1"] * 5 + ["true"]
    assert [label_key(v) for v in (-1, "-1.0", 0.5, "0.50", " positive ")] == [
        "-1",
        "-1",
        "0.5",
        "0.5",
        "positive",
    ]
    assert [label_key(v) for v in (None, float("nan"), "", " NaN ", "null", "N/A")] == [None] * 6


@pytest.mark.parametrize(
    "spec",
    [
        {"1": "positive", "-1": "negative"},
        {1: "positive", -1.0: "negative"},
        '{"1": "positive", "-1": "negative"}',
        "1=positive, -1=negative",
    ],
)
def test_label_map_forms(spec):
    from pt2aws.data import parse_label_map

    assert parse_label_map(spec) == {"1": "positive", "-1": "negative"}


@pytest.mark.parametrize(
    "spec, match",
    [
        ("1:positive,-1:negative", r"has no '='.*--label_map"),
        ('{"1": "positive",', "not valid JSON"),
        ('["positive"]', "must be an object"),
        ({"1": "positive", "1.0": "negative"}, "maps the label '1' to both"),
        ("1=positive,2=positive", r"names 1 class\(es\)"),
        ("1=positive,=negative", "non-empty"),
    ],
)
def test_bad_label_maps(spec, match):
    from pt2aws.data import DataError, parse_label_map

    with pytest.raises(DataError, match=match):
        parse_label_map(spec)
    assert parse_label_map("") is None and parse_label_map(None) is None
