"""One throughput model for the serving cost (notebooks 00 and 03, ``pt2aws recommend``)."""

from __future__ import annotations

import json

import pytest

from pt2aws.sizing import catalog, ranking, serving_cost, workload

MINILM = workload.model_spec("minilm-l6")


def test_forward_flops_count_non_embedding_parameters_and_attention():
    # MiniLM-L6: 22.7 M parameters of which 11.9 M in embedding tables (52.5%): N = 10,796,162
    assert MINILM.non_embedding_parameters == 22_713_986 - 11_917_824
    per_token = serving_cost.forward_flops_per_token(10_796_162, 6, 384, 64)
    assert per_token == 2 * 10_796_162 + 4 * 6 * 384 * 64
    assert serving_cost.flops_per_request(MINILM, 64) == per_token * 64
    with pytest.raises(ValueError, match="> 0"):
        serving_cost.forward_flops_per_token(0, 6, 384, 64)


def test_estimate_differs_by_processor_generation_by_the_public_figures():
    est = {
        t: serving_cost.estimate_throughput(t, MINILM, 64)
        for t in ("ml.c6g.xlarge", "ml.c7g.xlarge", "ml.c8g.xlarge", "ml.c6i.xlarge")
    }
    rate = {t: e["throughput_per_s"] for t, e in est.items()}
    flops = serving_cost.flops_per_request(MINILM, 64)
    assert rate["ml.c7g.xlarge"] == pytest.approx(4 * 83.2e9 * 0.10 / flops)
    # Graviton3 over Graviton2: 4 vs 2 128-bit vector units, 2.6 vs 2.5 GHz (Graviton guide)
    assert rate["ml.c7g.xlarge"] / rate["ml.c6g.xlarge"] == pytest.approx(2 * 2.6 / 2.5)
    assert rate["ml.c8g.xlarge"] / rate["ml.c7g.xlarge"] == pytest.approx(2.8 / 2.6)
    assert len(set(rate.values())) == 4  # not a price list: four different throughputs
    assert "83.2 GFLOP/s fp32 (Graviton3) x 10% assumed" in est["ml.c7g.xlarge"]["basis"]
    assert serving_cost.estimate_throughput("x9.large", MINILM, 64) is None
    with pytest.raises(ValueError, match=r"utilisation must be in \(0, 1\]"):
        serving_cost.estimate_throughput("ml.c7g.xlarge", MINILM, 64, utilisation=2)


def test_cost_rows_arithmetic_prices_and_measured_rows():
    assert serving_cost.cost_per_million(0.36, 100) == pytest.approx(1.0, rel=1e-12)
    with pytest.raises(ValueError, match="throughput > 0"):
        serving_cost.cost_per_million(0.2, 0)
    rows = serving_cost.cost_rows(MINILM, 64, measured={"ml.c7g.xlarge": 250.0})
    by = [(r["instance_type"], r["throughput_basis"].split(":")[0]) for r in rows]
    assert by == [
        ("ml.c6g.xlarge", "estimate"),
        ("ml.c7g.xlarge", "estimate"),
        ("ml.c8g.xlarge", "estimate"),
        ("ml.c6i.xlarge", "estimate"),
        ("ml.c7g.xlarge", "measured"),
    ]
    for r in rows:
        assert r["usd_per_1m"] == pytest.approx(
            r["usd_per_hour"] / (r["throughput_per_s"] * 3600) * 1e6, rel=1e-12
        )
    assert rows[-1]["throughput_per_s"] == 250.0
    assert rows[1]["usd_per_hour"] == catalog.hosting_price("ml.c7g.xlarge").usd_per_hour
    assert rows[1]["price_verified"] is False and "UNVERIFIED" in rows[1]["price"]
    eu = serving_cost.cost_rows(MINILM, 64, instances=("p4d.24xlarge",), region="eu-west-1")
    assert (eu[0]["usd_per_hour"], eu[0]["price_region"]) == (23.71569, "eu-west-1")
    table = serving_cost.format_cost_table(rows, ["prices: the dated table (test)"])
    assert "| ml.c7g.xlarge | arm64 | Graviton3 | 4 | 0.1734 | 250.0 |" in table
    assert "Kaplan et al. 2020" in table and "- prices: the dated table (test)" in table


def test_notebook_00_and_03_give_the_same_row_for_the_same_instance():
    """Issue 19: one model. Notebook 00's serving ranking (lessons, via pt2aws recommend) and
    notebook 03's cost table (core) agree for ml.c7g.xlarge."""
    rec = ranking.recommend(workload.profile_workload("local"))
    in_00 = next(r for r in rec["inference"] if r["instance"] == "ml.c7g.xlarge")
    report = serving_cost.cost_report(MINILM, 64)
    in_03 = next(r for r in report["rows"] if r["instance_type"] == "ml.c7g.xlarge")
    assert in_00["throughput_rps"] == in_03["throughput_per_s"]
    assert in_00["usd_per_million"] == in_03["usd_per_1m"]
    assert in_00["throughput_source"] == in_03["throughput_basis"]


def test_the_load_test_row_is_the_instance_on_aws_and_this_machine_on_the_emulator():
    load = {"requests": 100, "throughput_per_s": 42.0}
    on_aws = {"target": "aws", "instance_type": "ml.c7g.xlarge", "load_test": load}
    aws = serving_cost.cost_report(MINILM, 64, record=on_aws)
    assert aws["measured"]["instance_type"] == "ml.c7g.xlarge"
    assert aws["measured"]["usd_per_1m"] == pytest.approx(0.1734 / (42 * 3600) * 1e6)
    emulated = {**on_aws, "target": "emulator", "answer_source": "the local stack"}
    here = serving_cost.cost_report(MINILM, 64, record=emulated)["measured"]
    assert here["instance_type"].startswith("this machine (") and here["usd_per_1m"] is None
    assert here["throughput_basis"] == (
        "measured here: load test through the local stack, one text per request"
    )
    assert serving_cost.cost_report(MINILM, 64, record={"load_test": None})["measured"] is None
    short = serving_cost.cost_report(MINILM, 64, record=emulated, load_test_tokens=12.4)
    assert short["measured"]["throughput_basis"].endswith(
        "one text per request (12 tokens per request on average; the estimates count 64)"
    )
    assert "(64 tokens" in short["rows"][0]["throughput_basis"]  # each estimate says its length
    assert "12 tokens per request on average" in short["table"]


def test_mean_tokens_counts_the_models_tokens(smoke_model_dir):
    from transformers import AutoTokenizer

    texts = ["good", "a much longer text than the first one"]
    ids = AutoTokenizer.from_pretrained(str(smoke_model_dir))(texts)["input_ids"]
    assert serving_cost.mean_tokens(smoke_model_dir, texts) == (len(ids[0]) + len(ids[1])) / 2
    assert len(ids[1]) > len(ids[0])
    with pytest.raises(ValueError, match="at least one text"):
        serving_cost.mean_tokens(smoke_model_dir, [])


def test_batched_throughput_of_the_served_variant_from_notebook_02(tmp_path, smoke_model_dir):
    metrics = tmp_path / "metrics.json"
    rows = [
        {"variant": "eager", "samples_per_s": 140.0},
        {"variant": "int8", "samples_per_s": 470.0},
        {"variant": "bf16", "samples_per_s": 370.0},
    ]
    metrics.write_text(json.dumps({"variants": rows, "auto_variant": {"variant": "bf16"}}))
    texts = ["good", "bad"] * 4
    dlc = serving_cost.local_throughput(metrics, tmp_path, texts, "dlc")
    assert (dlc["variant"], dlc["throughput_samples_per_second"]) == ("eager", 140.0)
    custom = serving_cost.local_throughput(metrics, tmp_path, texts, "custom")
    assert custom["variant"] == "bf16"  # auto's choice, not the fastest row
    quick = serving_cost.local_throughput(tmp_path / "missing.json", smoke_model_dir, texts)
    assert quick["source"] == "measured here (fp32 eager, 8 texts, median of 3)"
    assert quick["throughput_samples_per_second"] > 0


def test_measure_throughput_times_the_predictor_with_the_shared_helper(monkeypatch):
    import pt2aws.inference.measure as measure
    import pt2aws.inference.predictor as predictor_module

    calls = []

    class FakePredictor:
        def __init__(self, model_dir, *, device, batch_size, variant):
            assert (model_dir, device, variant) == ("m", "cpu", "eager")

        def predict(self, texts):
            calls.append(len(texts))

    monkeypatch.setattr(predictor_module, "Predictor", FakePredictor)
    out = serving_cost.measure_throughput("m", ["a"] * 10, batch_size=4, repeats=2)
    assert calls == [10, 10, 10]  # one untimed warm-up pass, then two timed passes
    assert len(out["seconds"]) == 2 and out["texts"] == 10 and out["batch_size"] == 4
    assert measure.throughput is not None
