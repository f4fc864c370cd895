"""The serving cost model: one FLOPs count, utilisation from measured anchors, one row schema."""

from __future__ import annotations

import json
import shutil

import pytest

from pt2aws.rundir import RunDir
from pt2aws.sizing import ranking, serving_cost, workload
from pt2aws.train.throughput import training_flops_per_token

MINILM = workload.model_spec("minilm-l6")
#: all-mpnet-base-v2 and bert-base-cased outside the embeddings (pooler included), 12 x 768
N_BASE = 85_646_592
#: pytorch.org 2024-12-19: two sentences of 7 tokens (padded) in 25.37 ms on m7g.xlarge
PUBLISHED_GRAVITON_FLOPS = 2 * 7 * (2 * N_BASE + 4 * 12 * 768 * 7) / 0.02537
GRAVITON3_4_VCPUS = 4 * 83.2e9
EPYC_AVX2 = {"processor": "0", "model name": "AMD EPYC", "cpu MHz": "2445.432", "siblings": "2",
             "cpu cores": "2"}  # fmt: skip


def one_row(model, tokens, instance, **options):
    """The one cost row of ``instance``."""
    (found,) = serving_cost.cost_rows(model, tokens, [instance], **options)
    return found


def test_one_flops_count_a_third_of_trainings():
    # MiniLM-L6: 22.7 M parameters of which 11.9 M in embedding tables: N = 10,796,162
    assert MINILM.non_embedding_parameters == 22_713_986 - 11_917_824
    per_token = 2 * 10_796_162 + 4 * 6 * 384 * 64
    assert per_token * 3 == training_flops_per_token(10_796_162, 6, 384, 64)
    assert serving_cost.flops_per_request(MINILM, 64) == per_token * 64


def test_graviton_rows_are_within_2x_of_the_published_figure_and_say_so():
    """Issue 23: ml.c7g.xlarge against AWS's published Graviton3 figure scaled by FLOPs per
    request (all-mpnet-base-v2 on m7g.xlarge, 4 vCPUs, Graviton3 like c7g)."""
    published = PUBLISHED_GRAVITON_FLOPS / serving_cost.flops_per_request(MINILM, 64)
    row = one_row(MINILM, 64, "ml.c7g.xlarge")
    assert published / 2 <= row["inferences_per_s"] <= published * 2
    assert row["inferences_per_s"] == pytest.approx(published, rel=1e-9)  # same chip, same vCPUs
    assert row["anchor"] == "AWS-published Graviton3 figure"
    assert "all-mpnet-base-v2, 7 tokens, batch 2, 78.8/s on m7g.xlarge" in row["anchor_detail"]
    assert "pytorch.org/blog/improve-rag-performance/, 2024-12-19" in row["anchor_detail"]
    anchor = serving_cost.published_anchor("Graviton3")
    assert anchor["utilisation"] == pytest.approx(PUBLISHED_GRAVITON_FLOPS / GRAVITON3_4_VCPUS)
    assert 0.28 < anchor["utilisation"] < 0.29
    # Graviton2 and 4 take Graviton3's utilisation at their own peaks (2.5 and 2.8 GHz)
    rows = {r["instance"]: r for r in serving_cost.cost_rows(MINILM, 64)}
    assert rows["ml.c8g.xlarge"]["inferences_per_s"] / row["inferences_per_s"] == pytest.approx(
        89.6 / 83.2
    )
    assert rows["ml.c6g.xlarge"]["anchor"] == row["anchor"]
    assert "upper bound" not in row["basis"]  # MiniLM at 64 tokens: 1.2x the anchor's FLOPs
    tiny = one_row(workload.model_spec("tiny-roberta"), 48, "ml.c7g.xlarge")
    assert "fewer than the anchor's: an upper bound" in tiny["basis"]  # overhead-bound


def test_inferentia_is_anchored_on_neurons_bert_figure_and_gpus_say_they_assume():
    inf2 = one_row(MINILM, 64, "inf2.xlarge")
    bert = 2697.72 * 128 * (2 * N_BASE + 4 * 12 * 768 * 128)  # batch 4, 128 tokens, FLOP/s
    assert inf2["inferences_per_s"] == pytest.approx(
        bert / serving_cost.flops_per_request(MINILM, 64)
    )
    assert inf2["anchor"] == "AWS-published Inferentia2 figure"
    assert "bert-base-cased, 128 tokens, batch 4, 2697.7/s on inf2.xlarge" in inf2["anchor_detail"]
    assert inf2["basis"].endswith(
        "16x fewer than the anchor's: an upper bound"
    )  # 22.5 vs 1.42 GFLOP
    g5 = one_row(MINILM, 64, "g5.xlarge")
    assert g5["anchor"] == "assumption: 10% of peak"
    assert g5["inferences_per_s"] == pytest.approx(
        70e12 * 0.10 / serving_cost.flops_per_request(MINILM, 64)
    )
    assert "no measured anchor for A10G" in g5["anchor_detail"]


def test_machine_peak_from_isa_and_clock():
    avx2 = serving_cost.machine_peak([EPYC_AVX2], isa="AVX2", vcpus=2)
    assert avx2["flops"] == pytest.approx(2 * 32 * 2.445432e9)  # 2 cores x 2 FMA x 8 lanes x 2
    assert avx2["basis"] == "2 cores x 32 fp32 FLOP/cycle (AVX2) x 2.45 GHz"
    smt = {**EPYC_AVX2, "cpu cores": "1"}  # 2 hyper-threads of one core
    assert serving_cost.machine_peak([smt], isa="AVX512_BF16", vcpus=2)["flops"] == pytest.approx(
        64 * 2.445432e9
    )
    graviton = serving_cost.machine_peak([{"CPU part": "0xd40"}], vcpus=4)
    assert graviton["flops"] == GRAVITON3_4_VCPUS and "(Graviton3)" in graviton["basis"]
    assert serving_cost.machine_peak([{"processor": "0"}], isa="AVX2") is None  # no clock


def test_x86_rows_take_notebook_02s_measurement_against_this_machines_peak(
    tmp_path, smoke_train_dir
):
    run = RunDir(tmp_path)
    shutil.copytree(smoke_train_dir, run.train_dir, ignore=shutil.ignore_patterns("check*"))
    assert serving_cost.local_anchor(run) is None  # notebook 02 has not run: Graviton stands in
    stand_in = one_row(MINILM, 64, "ml.c6i.xlarge")
    assert stand_in["anchor"].endswith("(stand-in: notebook 02 has not measured this machine)")
    rows = [
        {"variant": "eager", "samples_per_s": 500.0},
        {"variant": "int8", "samples_per_s": 900.0},
    ]
    metrics = {"variants": rows, "agreement_texts": {"split": "validation", "count": 20}}
    run.inference_metrics.parent.mkdir(parents=True)
    run.inference_metrics.write_text(json.dumps(metrics))
    peak = {"flops": 1e11, "basis": "test peak"}
    local = serving_cost.local_anchor(run, peak)
    from transformers import AutoConfig, AutoTokenizer

    from pt2aws.data import load_for_run, token_lengths

    texts = list(load_for_run(run.train_dir).splits["validation"]["text"][:20])
    assert len(texts) == 20  # the count timed: one batch of 32, padded to its longest text
    tokenizer = AutoTokenizer.from_pretrained(run.model_dir)  # truncated at its limit, as timed
    longest = min(max(token_lengths(tokenizer, texts)), tokenizer.model_max_length)
    spec = workload.model_spec(AutoConfig.from_pretrained(run.model_dir))
    per_text = serving_cost.flops_per_request(spec, longest)
    assert local["utilisation"] == pytest.approx(500.0 * per_text / 1e11)
    assert (
        local["anchor"] == "this machine, notebook 02" and "500.0 texts/s" in local["anchor_detail"]
    )
    c6i = one_row(MINILM, 64, "ml.c6i.xlarge", local=local)
    c7g = one_row(MINILM, 64, "ml.c7g.xlarge", local=local)
    assert c6i["inferences_per_s"] == pytest.approx(
        448e9 * local["utilisation"] / serving_cost.flops_per_request(MINILM, 64)
    )
    assert c7g == one_row(MINILM, 64, "ml.c7g.xlarge")  # arm64: never the local one


def test_cost_rows_price_arithmetic_and_the_load_test_rows():
    rows = serving_cost.cost_rows(MINILM, 64)
    assert [r["instance"] for r in rows] == list(serving_cost.DEFAULT_COMPARISON)
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
    assert "UNVERIFIED" in c7g["price"] and c7g["basis"].endswith(
        "/ 1.42 GFLOP per request (64 tokens)"
    )
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
