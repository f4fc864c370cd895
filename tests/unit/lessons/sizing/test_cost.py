"""Tests of :mod:`pt2aws.lessons.sizing.cost`: hosting cost per 1M inferences."""

import pytest

from pt2aws.lessons.sizing import cost


def test_cost_per_million_arithmetic():
    # 0.36 USD/h at 100 inferences/s: 360,000 per hour -> 1 USD per 1M
    assert cost.cost_per_million(0.36, 100) == pytest.approx(1.0, rel=1e-12)
    with pytest.raises(ValueError, match="throughput > 0"):
        cost.cost_per_million(0.2, 0)


def test_cost_table_scales_by_vcpus_and_prefers_instance_measurements():
    rows = cost.cost_table(
        50.0,
        measured_vcpus=2,
        throughput_by_instance={"ml.c8g.xlarge": 400.0},
        prices={"ml.c7g.xlarge": 0.2},
    )
    by = {r["instance_type"]: r for r in rows}
    assert list(by) == list(cost.DEFAULT_COMPARISON)
    assert by["ml.c7g.xlarge"]["throughput_per_s"] == 100.0  # 50/s on 2 vCPUs -> 4 vCPUs
    assert by["ml.c7g.xlarge"]["price_verified"] is True
    assert by["ml.c7g.xlarge"]["usd_per_1m"] == pytest.approx(0.2 / (100 * 3600) * 1e6)
    assert by["ml.c8g.xlarge"]["throughput_basis"] == "measured on the instance"
    assert by["ml.c6i.xlarge"]["arch"] == "x86_64" and by["ml.c7g.xlarge"]["arch"] == "arm64"
    assert by["ml.c6i.xlarge"]["price_verified"] is False
    text = cost.format_cost_table(rows)
    assert "| ml.c7g.xlarge | arm64 | Graviton3 | 4 | 0.2000 | 100.0 | 0.5556 | verified |" in text
    assert "UNVERIFIED" in text and cost.PRICES_CHECKED_ON in text


def test_cost_table_needs_a_price_and_a_throughput():
    with pytest.raises(ValueError, match="no price for ml.c5.9xlarge"):
        cost.cost_table(10.0, instances=("ml.c5.9xlarge",))
    with pytest.raises(ValueError, match="no throughput"):
        cost.cost_table(None)


def test_cost_table_prices_come_from_the_catalog_with_date_and_source():
    from pt2aws import catalog

    rows = cost.cost_table(10.0, measured_vcpus=4, instances=("ml.c6i.xlarge", "ml.m5.xlarge"))
    by = {r["instance_type"]: r for r in rows}
    assert (
        by["ml.c6i.xlarge"]["usd_per_hour"] == catalog.hosting_price("ml.c6i.xlarge").usd_per_hour
    )
    assert by["ml.c6i.xlarge"]["processor"] == "Ice Lake"
    assert by["ml.c6i.xlarge"]["price_source"].startswith("UNVERIFIED (2026-11-30): ")
    m5 = by["ml.m5.xlarge"]["price_source"]
    assert m5.startswith("UNVERIFIED (2025-10): third-party, not AWS") and "zircon.tech" in m5
    assert cost.PRICING_PAGE.startswith("https://aws.amazon.com/sagemaker/pricing/")


def test_measure_throughput_times_the_predictor_with_the_shared_helper(monkeypatch):
    import pt2aws.inference.measure as measure
    import pt2aws.inference.predictor as predictor_module

    calls = []

    class FakePredictor:
        def __init__(self, model_dir, *, device, batch_size, variant):
            assert (model_dir, device, variant) == ("m", "cpu", "eager")

        def predict(self, texts):
            calls.append(len(texts))

    real = measure.throughput
    seen = {}

    def spy(fn, n_samples, repeats=3):
        seen.update(n_samples=n_samples, repeats=repeats)
        return real(fn, n_samples, repeats)

    monkeypatch.setattr(predictor_module, "Predictor", FakePredictor)
    monkeypatch.setattr(measure, "throughput", spy)
    out = cost.measure_throughput("m", ["a"] * 10, batch_size=4, repeats=2)
    assert seen == {"n_samples": 10, "repeats": 2}
    assert calls == [10, 10, 10]  # one untimed warm-up pass, then two timed passes
    assert len(out["seconds"]) == 2 and out["texts"] == 10 and out["batch_size"] == 4
    rates = sorted(10 / s for s in out["seconds"])
    assert out["throughput_samples_per_second"] == pytest.approx((rates[0] + rates[1]) / 2)
