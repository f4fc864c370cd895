"""Tests of :mod:`pt2aws.inference.measure`: the latency summary, rounds, budgets, the table."""

import numpy as np
import pytest

from pt2aws.inference import measure


def test_latency_summary_is_numpys_percentiles_in_ms():
    s = measure.latency_summary([0.001 * k for k in range(1, 101)])  # 1..100 ms
    assert (s["p50_ms"], s["p90_ms"], s["p99_ms"]) == pytest.approx((50.5, 90.1, 99.01))
    assert (s["mean_ms"], s["max_ms"], s["calls"]) == (
        pytest.approx(50.5),
        pytest.approx(100.0),
        100,
    )
    rng = np.random.default_rng(0)
    values = rng.exponential(0.005, 7)
    assert measure.latency_summary(values)["p90_ms"] == pytest.approx(
        1000 * np.percentile(values, 90)
    )
    with pytest.raises(ValueError):
        measure.latency_summary([])


class Clock:
    """A fake ``time.perf_counter``: only the fake predictors advance it."""

    now = 0.0

    def __call__(self):
        return self.now


class Fake:
    """A predictor that takes ``per_text`` fake seconds per text and answers ``label``."""

    def __init__(self, clock, per_text, label=1, batch_size=8):
        self.clock, self.per_text, self.label, self.batch_size = clock, per_text, label, batch_size
        self.batch_sizes = []

    def predict_ids(self, texts):
        self.clock.now += self.per_text * len(texts)
        self.batch_sizes.append(self.batch_size)
        return [self.label] * len(texts)


@pytest.fixture
def clock(monkeypatch):
    fake = Clock()
    monkeypatch.setattr(measure.time, "perf_counter", fake)
    return fake


def test_compare_predictors_in_rounds_with_medians(clock):
    texts = ["a", "b"] * 16
    eager, fast = Fake(clock, 0.01), Fake(clock, 0.0025, label=0)
    lines = []
    rows = measure.compare_predictors({"eager": eager, "fast": fast}, texts, latency_calls=4,
                                      repeats=3, log=lines.append)  # fmt: skip
    by = {r["variant"]: r for r in rows}
    assert by["eager"]["calls"] == 4 and by["eager"]["p50_ms"] == pytest.approx(10.0)
    assert by["fast"]["samples_per_s"] == pytest.approx(400.0) and by["eager"][
        "samples_per_s"
    ] == pytest.approx(100.0)
    assert len(by["fast"]["runs_samples_per_s"]) == 3 and by["fast"]["stopped"] is None
    assert by["eager"]["agreement"] == 1.0 and by["fast"]["agreement"] == 0.0
    assert 32 in eager.batch_sizes and eager.batch_size == 8  # timed at batch 32, then restored
    assert lines == [f"  pass {k}/3: eager 100/s, fast 400/s" for k in (1, 2, 3)]  # one per round


def test_a_predictor_that_reaches_its_share_stops_with_what_it_measured(clock):
    texts = ["a"] * 32
    slow, quick = Fake(clock, 0.05), Fake(clock, 0.001)
    rows = measure.compare_predictors({"eager": quick, "slow": slow}, texts, latency_calls=20,
                                      repeats=5, spent={"slow": 9.0}, share_s=10.0)  # fmt: skip
    by = {r["variant"]: r for r in rows}
    assert by["eager"]["calls"] == 20 and len(by["eager"]["runs_samples_per_s"]) == 5
    assert by["eager"]["stopped"] is None
    # 9 s of set-up + 1.6 s for labels: over its 10 s share, so the minimum, then it stops
    assert by["slow"]["calls"] == measure.MIN_CALLS
    assert len(by["slow"]["runs_samples_per_s"]) == measure.MIN_PASSES
    assert by["slow"]["stopped"] == "share of the budget reached"
    assert by["slow"]["seconds"] == pytest.approx(9.0 + 1.6 + 0.05 + 3 * 0.05 + 1.6, abs=0.1)


def test_the_two_fastest_are_measured_again_when_close(clock):
    """Within 10%: ``repeats`` more passes each, pooled with the first (a noisy pass decides less)."""
    texts = ["a"] * 32
    eager, bf16, int8 = Fake(clock, 0.01), Fake(clock, 0.0095), Fake(clock, 0.001, label=0)
    lines = []
    rows = measure.compare_predictors({"eager": eager, "bf16": bf16, "int8": int8}, texts,
                                      latency_calls=2, repeats=3, log=lines.append)  # fmt: skip
    by = {r["variant"]: r for r in rows}
    assert "bf16 and eager within 10%: measured again" in lines  # int8 disagrees: not a candidate
    assert len(by["bf16"]["runs_samples_per_s"]) == len(by["eager"]["runs_samples_per_s"]) == 6
    assert len(by["int8"]["runs_samples_per_s"]) == 3 and by["bf16"]["stopped"] is None
    apart = measure.compare_predictors({"eager": eager, "fast": Fake(clock, 0.005)}, texts,
                                       latency_calls=2, repeats=3)  # fmt: skip
    assert [len(r["runs_samples_per_s"]) for r in apart] == [3, 3]


def test_time_calls(clock):
    fake = Fake(clock, 0.5)
    assert measure.time_calls(lambda: fake.predict_ids(["x"]), 3) == [0.5, 0.5, 0.5]


def test_format_table_shows_the_maximum_below_100_calls():
    s = measure.latency_summary([0.001 * k for k in range(1, 101)])
    rows = [{"variant": "eager", **s, "samples_per_s": 100.0, "agreement": 1.0},
            {"variant": "int8", **s, "samples_per_s": 250.0, "agreement": 0.995}]  # fmt: skip
    table = measure.format_table(rows).splitlines()
    assert table[0].startswith("| variant | p50 ms | p90 ms | p99 ms |")
    assert "| int8 | 50.5 | 90.1 | 99.0 | 250.0 | 2.50 | 0.9950 |" in table
    few = [{**r, "calls": 10} for r in rows]
    assert "| max ms |" in measure.format_table(few).splitlines()[0]
