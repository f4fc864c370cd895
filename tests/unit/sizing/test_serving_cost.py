"""The serving cost model: one FLOPs count, one latency model fitted per family to published
figures, one row schema, the published Graviton3 vs x86 comparison checked."""

from __future__ import annotations

import copy
import json
import shutil

import pytest

from pt2aws.rundir import RunDir
from pt2aws.sizing import catalog, ranking, serving_cost, tables, workload
from pt2aws.train.throughput import training_flops_per_token

MINILM = workload.model_spec("minilm-l6")
#: all-mpnet-base-v2 and bert-base outside the embeddings (pooler included), 12 x 768
N_BASE = 85_646_592
GRAVITON3_4_VCPUS = 4 * 83.2e9
EPYC_AVX2 = {"processor": "0", "model name": "AMD EPYC", "cpu MHz": "2445.432", "siblings": "2",
             "cpu cores": "2"}  # fmt: skip


def one_row(model, tokens, instance, **options):
    """The one cost row of ``instance``."""
    (found,) = serving_cost.cost_rows(model, tokens, [instance], **options)
    return found


def per_call(f, spec, tokens, peak, batch=1):
    """The model by hand: L x overhead + b x (2N + 4LdT) x T / (peak x utilisation)."""
    flops = 2 * spec.non_embedding_parameters + 4 * spec.num_layers * spec.hidden_size * tokens
    return spec.num_layers * f["overhead_s"] + batch * flops * tokens / (peak * f["utilisation"])


def test_one_flops_count_a_third_of_trainings():
    # MiniLM-L6: 22.7 M parameters of which 11.9 M in embedding tables: N = 10,796,162
    assert MINILM.non_embedding_parameters == 22_713_986 - 11_917_824
    per_token = 2 * 10_796_162 + 4 * 6 * 384 * 64
    assert per_token * 3 == training_flops_per_token(10_796_162, 6, 384, 64)
    assert serving_cost.flops_per_request(MINILM, 64) == per_token * 64


def test_each_published_anchor_is_reproduced_within_2x():
    """Issue 30: every anchor of every family, predicted / published in [0.5, 2]."""
    anchors = catalog.data()["serving_anchors"]["anchors"]
    families = {a["family"] for a in anchors}
    assert families == {"Graviton3", "Ice Lake", "Inferentia2"}
    for family in families:
        f = serving_cost.family_fit(family)
        assert len(f["errors"]) == sum(a["family"] == family for a in anchors)
        assert all(0.5 <= e <= 2 for e in f["errors"]), (family, f["errors"])
    # Graviton3, one shape: the overhead is the post's profile outside the linear layers
    g3 = serving_cost.family_fit("Graviton3")
    assert g3["overhead_s"] == pytest.approx(0.01493 / 12)
    flops = 2 * 7 * (2 * N_BASE + 4 * 12 * 768 * 7)  # 2 sentences of 7 tokens
    assert g3["utilisation"] == pytest.approx(flops / GRAVITON3_4_VCPUS / (0.02537 - 0.01493))
    assert 0.68 < g3["utilisation"] < 0.70 and g3["errors"] == [pytest.approx(1.0)]
    # Ice Lake, six figures of two sources (BERT and DistilBERT at 16 and 128 tokens)
    ice = serving_cost.family_fit("Ice Lake")
    assert 1.6e-3 < ice["overhead_s"] < 1.9e-3 and 0.55 < ice["utilisation"] < 0.65
    assert max(ice["errors"]) / min(ice["errors"]) < 1.6
    assert (
        "predicted / published" in ice["detail"] and "c6i.2xlarge 23.02 ms: 1.13" in ice["detail"]
    )
    assert serving_cost.family_fit("Inferentia2")["overhead_s"] == 0.0  # one throughput figure


def test_the_cpu_rows_come_from_one_model_and_say_which_fit():
    rows = {r["instance"]: r for r in serving_cost.cost_rows(MINILM, 64)}
    assert list(rows) == list(serving_cost.DEFAULT_COMPARISON)
    labels = {
        "ml.c7g.xlarge": ("Graviton3", "Graviton3 fit, 1 published figure"),
        "ml.c8g.xlarge": ("Graviton3", "Graviton3 fit at the Graviton4 peak (no Graviton4 figure "
                          "found)"),
        "ml.c6g.xlarge": ("Graviton3", "Graviton3 fit at the Graviton2 peak (no Graviton2 figure "
                          "found)"),
        "ml.c6i.xlarge": ("Ice Lake", "Ice Lake fit, 6 published figures"),
        "ml.c7i.xlarge": ("Ice Lake", "Ice Lake fit at the Sapphire Rapids peak (no Sapphire "
                          "Rapids figure found)"),
    }  # fmt: skip
    for name, (family, label) in labels.items():
        r, f = rows[name], serving_cost.family_fit(family)
        peak = catalog.peak_flops(name)["flops"]
        assert r["inferences_per_s"] == pytest.approx(1 / per_call(f, MINILM, 64, peak))
        assert r["anchor"] == label and r["anchor_detail"].startswith(f"{family} fit: ")
        assert r["request"] == "1 text of 64 tokens per request, fp32 weights"
        assert r["basis"].startswith("1 / (6 layers x ")
    assert "6 layers x 1.24 ms + 1.42 GFLOP / (4 vCPUs x 83.2" in rows["ml.c7g.xlarge"]["basis"]
    # MiniLM at 64 tokens: about 73/s on c7g, 64/s on c6i (fits of published configurations)
    assert 70 < rows["ml.c7g.xlarge"]["inferences_per_s"] < 76
    assert 60 < rows["ml.c6i.xlarge"]["inferences_per_s"] < 67


def test_inferentia_and_the_gpus_are_upper_bounds_ranked_after_the_fitted_rows():
    inf2 = one_row(MINILM, 64, "inf2.xlarge")
    bert = 2697.72 * 128 * (2 * N_BASE + 4 * 12 * 768 * 128)  # batch 4, 128 tokens, FLOP/s
    assert inf2["inferences_per_s"] == pytest.approx(
        bert / serving_cost.flops_per_request(MINILM, 64)
    )
    assert inf2["anchor"] == "Inferentia2 fit, 1 published figure, no overhead: an upper bound"
    g5 = one_row(MINILM, 64, "g5.xlarge")
    assert g5["anchor"] == "assumption: 10% of peak, no overhead: an upper bound"
    assert g5["inferences_per_s"] == pytest.approx(
        70e12 * 0.10 / serving_cost.flops_per_request(MINILM, 64)
    )
    rows = ranking.rank_inference(MINILM, 64)
    bound = [r["anchor"].endswith(serving_cost.UPPER_BOUND) for r in rows]
    assert bound == sorted(bound) and any(bound)  # the fitted rows first
    assert rows[0]["instance"] == "ml.c7g.xlarge" and rows[0]["cheapest"]
    assert not any(r["cheapest"] or r["fastest"] for r in rows if r["anchor"].endswith("bound"))


def test_c7g_against_c6i_agrees_with_the_published_comparison_or_says_both_figures(monkeypatch):
    rows = serving_cost.cost_rows(MINILM, 64)
    said = serving_cost.published_comparison(rows)
    assert said.startswith('AWS measured "up to 50% cost savings for PyTorch inference with '
                           'Graviton3-based c7g instances')  # fmt: skip
    assert "pytorch.org/blog/optimized-pytorch-w-graviton/, 2023-06-22" in said
    assert "these rows agree: c7g 0.657 vs c6i 0.891 USD per 1M (26% less)." in said
    assert tables.cost_notes(rows).splitlines()[-1] == said
    fixed = copy.deepcopy(catalog.data())  # a catalog where c6i's hosting price undercuts c7g's
    fixed["sagemaker_hosting_prices"]["ml.c6i.xlarge"]["usd_per_hour"] = 0.10
    monkeypatch.setattr(catalog, "data", lambda: fixed)
    rows = serving_cost.cost_rows(MINILM, 64)
    said = serving_cost.published_comparison(rows)
    assert said.startswith("These rows disagree with the published comparison: c7g 0.657 vs "
                           "c6i 0.437 USD per 1M here, where AWS measured")  # fmt: skip
    assert tables.cost_notes(rows).splitlines()[-1] == said
    assert serving_cost.published_comparison(rows[:1]) is None  # no c6i row


def test_machine_peak_from_isa_and_clock():
    avx2 = serving_cost.machine_peak([EPYC_AVX2], isa="AVX2", vcpus=2)
    assert avx2["flops"] == pytest.approx(2 * 32 * 2.445432e9)  # 2 cores x 2 FMA x 8 lanes x 2
    assert avx2["basis"] == "2 cores x 32 fp32 FLOP/cycle (AVX2) x 2.45 GHz"
    assert avx2["processor"] == "x86_64"
    smt = {**EPYC_AVX2, "cpu cores": "1"}  # 2 hyper-threads of one core
    assert serving_cost.machine_peak([smt], isa="AVX512_BF16", vcpus=2)["flops"] == pytest.approx(
        64 * 2.445432e9
    )
    graviton = serving_cost.machine_peak([{"CPU part": "0xd40"}], vcpus=4)
    assert graviton["flops"] == GRAVITON3_4_VCPUS and graviton["processor"] == "Graviton3"
    assert serving_cost.machine_peak([{"processor": "0"}], isa="AVX2") is None  # no clock


def test_the_fit_keeps_overhead_at_least_0_and_utilisation_at_most_the_peak():
    assert serving_cost.fit([(6, 0.01, 0.026), (6, 0.05, 0.106)]) == pytest.approx((1e-3, 0.5))
    capped = serving_cost.fit([(6, 0.001, 0.2), (48, 0.6, 1.0)])  # batch-1 calls too slow
    assert capped[1] == 1.0 and capped[0] > 0  # utilisation at its bound, the overhead refitted
    assert serving_cost.fit([(6, 0.02, 0.04)]) == pytest.approx(
        (0.0, 0.5)
    )  # one point: no overhead
    assert serving_cost.fit([(6, 0.02, 0.04)], overhead=1e-3) == pytest.approx((1e-3, 20 / 34))


def test_this_machine_is_its_own_row_and_checks_the_ice_lake_fit():
    peak = {"flops": 150e9, "basis": "test peak", "processor": "x86_64"}
    lengths = [12, 20, 30, 40, 64] * 20  # 100 texts; the first 10 timed one by one
    made = {"overhead_s": 1e-3, "utilisation": 0.5}  # measurements made from known parameters
    p50_s = per_call(made, MINILM, 30, peak["flops"])  # the first 10 texts' median: 30 tokens
    units, work, _ = serving_cost._point(MINILM, lengths, 32, 0.0, peak["flops"])
    assert units == 6 * 4  # 100 texts: 4 calls of 6 layers
    rate = 100 / (units * 1e-3 + work / 0.5)
    eager = {"p50_ms": p50_s * 1e3, "calls": 10, "samples_per_s": rate}
    local = serving_cost.measured_fit(MINILM, lengths, eager, peak, "notebook 02 (m.json)")
    assert (local["overhead_s"], local["utilisation"]) == pytest.approx((1e-3, 0.5))
    ice = serving_cost.family_fit("Ice Lake")  # the check: Ice Lake's fit at this peak
    p50 = per_call(ice, MINILM, 30, peak["flops"])
    predicted = 100 / (units * ice["overhead_s"] + work / ice["utilisation"])
    assert local["prediction_ratios"] == pytest.approx((predicted / rate, p50 / p50_s))
    assert f"predicted / measured {predicted / rate:.2f} and {p50 / p50_s:.2f}" in local["check"]
    assert local["check"].startswith("model check: the Ice Lake fit at this machine's peak")
    row = serving_cost.cost_rows(MINILM, 64, [], local=local)[0]
    assert row["instance"].startswith("this machine (") and row["usd_per_1m"] is None
    assert row["anchor"] == "this machine, notebook 02" and local["check"] in row["anchor_detail"]
    assert row["inferences_per_s"] == pytest.approx(1 / per_call(made, MINILM, 64, 150e9))
    assert row["request"] == "1 text of 64 tokens per request, fp32 weights"
    assert "fp32 peak, its bound" not in row["anchor_detail"]
    slow = serving_cost.measured_fit(MINILM, lengths, {**eager, "p50_ms": 200.0}, peak, "here")
    assert slow["utilisation"] == 1.0 and slow["anchor"] == "this machine, here"
    assert (
        "(at the fp32 peak, its bound: this machine's batch-1 calls cost more than batching "
        "implies)" in slow["anchor_detail"]
    )  # said, not hidden


def test_local_measurement_reads_notebook_02s_eager_row(tmp_path, smoke_train_dir):
    run = RunDir(tmp_path)
    shutil.copytree(smoke_train_dir, run.train_dir, ignore=shutil.ignore_patterns("check*"))
    peak = {"flops": 1e11, "basis": "test peak", "processor": "x86_64"}
    assert serving_cost.local_measurement(run, peak) is None  # notebook 02 has not run
    rows = [{"variant": "eager", "samples_per_s": 500.0, "p50_ms": 4.0, "calls": 10},
            {"variant": "int8", "samples_per_s": 900.0, "p50_ms": 3.0, "calls": 10}]  # fmt: skip
    metrics = {"variants": rows, "agreement_texts": {"split": "validation", "count": 20}}
    run.inference_metrics.parent.mkdir(parents=True)
    run.inference_metrics.write_text(json.dumps(metrics))
    local = serving_cost.local_measurement(run, peak)
    detail = local["anchor_detail"]
    assert (
        "fitted to the fp32 eager batch-1 p50 (4.0 ms, 10 texts) and batch-32 throughput "
        "(500.0 texts/s of "
        in detail
        and f"of notebook 02 ({run.inference_metrics});" in detail
    )
    assert "measured 500.0/s and 4.0 ms" in local["check"]


def test_cost_rows_price_arithmetic_and_the_load_test_rows():
    rows = serving_cost.cost_rows(MINILM, 64)
    for r in rows:
        assert r["usd_per_1m"] == pytest.approx(
            r["usd_per_hour"] / (r["inferences_per_s"] * 3600) * 1e6
        )
    c7g = rows[1]
    assert (c7g["processor"], c7g["arch"], c7g["vcpus"], c7g["usd_per_hour"]) == (
        "Graviton3",
        "arm64",
        4,
        0.1734,
    )
    assert "UNVERIFIED" in c7g["price"] and rows[4]["usd_per_hour"] == 0.21  # ml.c7i.xlarge
    assert "UNVERIFIED, workbench-2026" in rows[4]["price"]
    eu = one_row(MINILM, 64, "p4d.24xlarge", region="eu-west-1")
    assert eu["usd_per_hour"] == 23.71569 and "eu-west-1" in eu["price"]
    assert serving_cost.cost_rows(MINILM, 64, ["x9.large"]) == []
    load = {"requests": 100, "throughput_per_s": 42.0}
    aws = serving_cost.load_test_row(
        {"target": "aws", "instance_type": "ml.c7g.xlarge", "load_test": load}, 12.4
    )
    assert aws["usd_per_1m"] == pytest.approx(0.1734 / (42 * 3600) * 1e6)
    assert aws["anchor"] == "measured: load test"
    assert (
        aws["basis"] == "load test on the endpoint, 100 requests of one text, 12 tokens on average"
    )
    emulated = {"target": "emulator", "answer_source": "the local stack", "load_test": load}
    here = serving_cost.load_test_row(emulated, 12.4)
    assert here["instance"].startswith("this machine (") and here["usd_per_1m"] is None
    assert (
        here["basis"]
        == "load test through the local stack, 100 requests of one text, 12 tokens on average"
    )
    assert serving_cost.load_test_row({"load_test": None}, 12) is None


def test_notebook_00_and_03_show_the_same_row():
    """Notebook 00's ranking (``pt2aws recommend``) and notebook 03's table agree."""
    rec = ranking.recommend(workload.profile_workload("local"))
    in_00 = next(r for r in rec["inference"] if r["instance"] == "ml.c7g.xlarge")
    in_03 = one_row(MINILM, 64, "ml.c7g.xlarge")
    assert {k: in_00[k] for k in in_03} == in_03


def test_batched_throughput_of_the_served_variant_beside_the_load_test(tmp_path):
    metrics = tmp_path / "metrics.json"
    rows = [
        {"variant": "eager", "samples_per_s": 140.0},
        {"variant": "bf16", "samples_per_s": 370.0},
    ]
    metrics.write_text(json.dumps({"variants": rows, "auto_variant": {"variant": "bf16"}}))
    load = {"requests": 10, "throughput_per_s": 35.0}
    assert serving_cost.batched_vs_single(metrics, load, "dlc") == (
        "batched eager in one process (notebook 02, batch 32): 140.0/s; one text per request "
        "through the serving stack (the load test): 35.0/s: 4.0x"
    )
    assert "batched bf16" in serving_cost.batched_vs_single(metrics, load, "custom")  # auto's
    assert "run notebook 02" in serving_cost.batched_vs_single(tmp_path / "none.json", load, "dlc")
    metrics.write_text(json.dumps({"variants": rows}))  # no auto measured: eager on custom too
    assert "batched eager" in serving_cost.batched_vs_single(metrics, load, "custom")
