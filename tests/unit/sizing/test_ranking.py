"""Tests of :mod:`pt2aws.sizing.ranking`."""

from __future__ import annotations

import json

import pytest
from support.roberta_base import EMBEDDINGS, ROBERTA_BASE, H, L

from pt2aws.sizing import ranking, tables, workload


def test_rank_training_time_and_cost_by_hand():
    job = workload.Workload("roberta-base", train_examples=1_000_000, seq_len=128, epochs=3)
    rows = ranking.rank_training(job)
    by = {r["instance"]: r for r in rows}
    # (6 N + 12 L d T) per token, N without the embedding tables (Kaplan et al. 2020; PaLM B)
    non_embedding = ROBERTA_BASE - (EMBEDDINGS - 2 * H)
    flops = (6 * non_embedding + 12 * L * H * 128) * 1_000_000 * 128 * 3
    g5 = by["g5.xlarge"]
    assert g5["time_s"] == pytest.approx(flops / (70e12 * 0.35), rel=1e-12)  # 8,276.3 s
    # cost adds 600 s of paid start-up (DEFAULT_OVERHEAD_S)
    assert g5["cost_usd"] == pytest.approx((flops / (70e12 * 0.35) + 600) / 3600 * 1.006, rel=1e-12)
    p4d = by["p4d.24xlarge"]
    assert p4d["strategy"] == "DDP over 8 devices"
    assert p4d["cost_usd"] == pytest.approx(
        (flops / (8 * 312e12 * 0.35) + 600) / 3600 * 21.957642, rel=1e-12
    )
    bare = ranking.rank_training(job, overhead_s=0)
    bare = [r for r in bare if r["instance"] == "p4d.24xlarge"]
    assert bare[0]["cost_usd"] == pytest.approx(flops / (8 * 312e12 * 0.35) / 3600 * 21.957642)
    assert "inf2.xlarge" not in by  # inference only
    assert sum(r["cheapest"] for r in rows) == 1 and sum(r["fastest"] for r in rows) == 1
    priced = [r["cost_usd"] for r in rows if r["cost_usd"] is not None]
    assert priced == sorted(priced)
    cheapest = next(r for r in rows if r["cheapest"])
    assert cheapest["cost_usd"] == min(priced)
    fastest = next(r for r in rows if r["fastest"])
    assert fastest["time_s"] == min(r["time_s"] for r in rows)
    with pytest.raises(ValueError, match="epochs > 0"):
        workload.Workload("roberta-base", epochs=0)


def test_rank_inference_holds_the_weights_and_flags_the_cheapest():
    rows = ranking.rank_inference("roberta-base")
    by = {r["instance"]: r for r in rows}
    assert set(by) == set(ranking.DEFAULT_INFERENCE_INSTANCES)  # all hold 250 MB of bf16 weights
    assert by["ml.c7g.xlarge"]["arch"] == "arm64" and by["ml.c6i.xlarge"]["arch"] == "x86_64"
    # peak x utilisation / ((2 x N + 4 x L x d x T) x T), N = non-embedding parameters
    n = ROBERTA_BASE - 38_999_040  # the embedding tables
    assert by["g5.xlarge"]["inferences_per_s"] == pytest.approx(
        70e12 * 0.1 / ((2 * n + 4 * 12 * 768 * 128) * 128)
    )
    bound = [r for r in rows if r["anchor"].endswith("an upper bound")]  # GPUs, Inferentia2
    fitted = rows[: len(rows) - len(bound)]
    assert {r["instance"] for r in bound} == {"g5.xlarge", "g6.xlarge", "g6e.xlarge", "inf2.xlarge"}
    for part in (fitted, bound):  # each cheapest first, the fitted rows before the bounds
        assert [r["usd_per_1m"] for r in part] == sorted(r["usd_per_1m"] for r in part)
    assert rows[0]["cheapest"] and sum(r["cheapest"] for r in rows) == 1
    fastest = max(fitted, key=lambda r: r["inferences_per_s"])
    assert fastest["fastest"] and sum(r["fastest"] for r in rows) == 1
    assert ranking.rank_inference("2000B") == []  # 4 TB of weights fit none of them


def test_recommend_roberta_base_on_1m_examples():
    rec = ranking.recommend(workload.Workload("roberta-base", train_examples=1_000_000))
    assert rec["model"]["parameters"] == ROBERTA_BASE
    assert rec["workload"]["training_flops"] > 0
    assert rec["class"]["class"] == "small"
    cheapest = next(r for r in rec["training"] if r["cheapest"])
    assert rec["recommended"]["instance"] == cheapest["instance"]  # the cheapest row is a GPU here
    json.dumps(rec)
    text = tables.format_recommendation(rec)
    assert "124,647,170 parameters" in text and "cheapest" in text and " g5.xlarge " in text
    assert "Graviton3 fit: 1.24 ms per layer and call" in text  # each fit, once
    assert text.count("Graviton3 fit: ") == 1 and text.count("Ice Lake fit: ") == 1
    assert "these rows agree: c7g" in text  # the published comparison, checked


def test_tables_state_the_formula_and_each_rows_precision_and_show_no_nan():
    rec = ranking.recommend(workload.profile_workload("local", None, None, None))
    assert "(6N + 12LdT) x tokens, N non-embedding" in tables.format_sizing(rec)
    frame = tables.training_frame(rec)
    by = dict(zip(frame["instance"], frame["peak"], strict=True))
    assert by["c7g.xlarge"] == "fp32" and by["g5.xlarge"] == "bf16"
    assert tables.duration(0.4) == "<1 s" and tables.duration(1.4) == "1 s"
    assert tables.duration(150) == "2.5 min" and tables.duration(9000) == "2.5 h"
    assert "fastest (compute time): " in tables.training_summary(rec)
    assert "p5e.48xlarge" in set(frame["instance"])  # fits, but has no on-demand price
    assert frame.loc[frame["instance"] == "p5e.48xlarge", "USD"].item() == "-"
    costs = tables.cost_frame(rec["inference"])
    assert not costs.isna().any().any() and list(costs.columns)[:3] == [
        "instance",
        "processor",
        "vCPUs",
    ]
    tiny = tables.cost_frame(ranking.rank_inference("tiny-roberta", 48))
    assert tiny.loc[tiny["instance"] == "inf2.xlarge", "USD per 1M"].item() == "<0.0001"
    shown = tables.one_per_device(rec["training"])  # the plot's rows: the cheapest of each
    assert [r["instance"] for r in shown if r["kind"] == "cpu"] == ["c7g.xlarge"]  # one CPU
    gpus = [r["accelerators"].split(" x ")[1] for r in shown if r["kind"] != "cpu"]
    assert len(gpus) == len(set(gpus)) and {"A10G", "L4", "A100-40GB", "H100"} <= set(gpus)
    catalog_rows = tables.catalog_frame("eu-west-1")
    assert not catalog_rows.isna().any().any()
    p4d = catalog_rows[catalog_rows["instance"] == "p4d.24xlarge"].iloc[0]
    assert p4d["USD/hour"] == "23.7157" and p4d["peak TFLOP/s"] == "2496 bf16"
    assert (
        catalog_rows[catalog_rows["instance"] == "c7g.xlarge"].iloc[0]["USD/hour"]
        == "0.145 (us-east-1)"
    )
    assert tables.markdown(costs.head(1)).splitlines()[1] == "|" + " --- |" * costs.shape[1]
