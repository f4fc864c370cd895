"""Tests of :mod:`pt2aws.inference.measure`: percentiles, latency, throughput, the table."""

import pytest

from pt2aws.inference.predictor import Predictor


def test_latency_summary_and_table_by_hand():
    from pt2aws.inference import measure as inference

    s = inference.latency_summary([0.001 * k for k in range(1, 101)])  # 1..100 ms
    assert s["p50_ms"] == pytest.approx(50.5)
    assert s["p90_ms"] == pytest.approx(90.1)
    assert s["p99_ms"] == pytest.approx(99.01)
    assert s["calls"] == 100
    with pytest.raises(ValueError):
        inference.latency_summary([])
    rows = [
        {"variant": "hf-pipeline", **s, "samples_per_s": 100.0, "agreement": 1.0},
        {"variant": "int8", **s, "samples_per_s": 250.0, "agreement": 0.995},
        {"variant": "local-endpoint", **s, "requests_per_s": 40.0},
    ]
    table = inference.format_table(rows).splitlines()
    assert table[0].startswith("| variant | p50 ms")
    assert "| int8 | 50.5 | 90.1 | 99.0 | 250.0 | 2.50 | 0.9950 |" in table
    assert "40.0 req/s" in table[-1]


def test_percentile_is_numpy_linear_interpolation():
    import numpy as np

    from pt2aws.inference.measure import percentile

    rng = np.random.default_rng(0)
    for n in (1, 2, 7, 100, 1001):
        values = rng.exponential(5.0, n).tolist()
        for q in (0, 50, 90, 99, 100):
            assert percentile(values, q) == pytest.approx(np.percentile(values, q), rel=1e-12)
    assert percentile([3.0, 1.0, 2.0, 4.0], 50) == 2.5  # unsorted input, between ranks 2 and 3
    for bad in ([], [1.0]):
        with pytest.raises(ValueError, match="percentile"):
            percentile(bad, 101 if bad else 50)


def test_compare_predictors_restores_batch_size(smoke_model_dir):
    from pt2aws.inference.measure import compare_predictors

    predictor = Predictor(str(smoke_model_dir), batch_size=5)
    (row,) = compare_predictors(
        {"eager": predictor}, ["good", "bad"] * 8, latency_calls=2, repeats=2
    )
    assert row["variant"] == "eager" and row["calls"] == 2 and row["agreement"] == 1.0
    assert row["samples_per_s"] > 0 and len(row["runs_samples_per_s"]) == 2
    assert predictor.batch_size == 5  # timed at batch 32, then restored
