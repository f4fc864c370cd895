"""Tests of :mod:`pt2aws.sizing.ranking`."""

from __future__ import annotations

import json

import pytest
from support.roberta_base import EMBEDDINGS, ROBERTA_BASE, H, L

from pt2aws.sizing import catalog, ranking, tables, workload


def test_rank_training_time_and_cost_by_hand():
    rows = ranking.rank_training("roberta-base", train_tokens=1_000_000 * 128, epochs=3)
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
    bare = ranking.rank_training(
        "roberta-base", 128_000_000, 3, instances=["p4d.24xlarge"], overhead_s=0
    )
    assert bare[0]["cost_usd"] == pytest.approx(flops / (8 * 312e12 * 0.35) / 3600 * 21.957642)
    assert "inf2.xlarge" not in by  # inference only
    assert sum(r["cheapest"] for r in rows) == 1 and sum(r["fastest"] for r in rows) == 1
    priced = [r["cost_usd"] for r in rows if r["cost_usd"] is not None]
    assert priced == sorted(priced)
    cheapest = next(r for r in rows if r["cheapest"])
    assert cheapest["cost_usd"] == min(priced)
    fastest = next(r for r in rows if r["fastest"])
    assert fastest["time_s"] == min(r["time_s"] for r in rows)
    with pytest.raises(ValueError, match="must be positive"):
        ranking.rank_training("roberta-base", train_tokens=0)


def test_rank_inference_measured_and_estimated():
    rows = ranking.rank_inference("roberta-base", throughput_rps={"ml.c7g.xlarge": 20.0})
    (measured,) = [r for r in rows if r["throughput_source"].startswith("measured")]
    assert measured["instance"] == "ml.c7g.xlarge"
    assert measured["usd_per_million"] == pytest.approx(0.1734 / (3600 * 20) * 1e6)
    by = {r["instance"]: r for r in rows if r["throughput_source"].startswith("estimate")}
    assert by["ml.c7g.xlarge"]["arch"] == "arm64" and by["ml.c6i.xlarge"]["arch"] == "x86_64"
    # estimated: peak x 10 % / ((2 x N + 4 x L x d x T) x T), N = non-embedding parameters
    n = ROBERTA_BASE - 38_999_040  # the embedding tables
    assert by["g5.xlarge"]["throughput_rps"] == pytest.approx(
        70e12 * 0.1 / ((2 * n + 4 * 12 * 768 * 128) * 128)
    )
    assert {"ml.c6g.xlarge", "ml.c7g.xlarge", "ml.c8g.xlarge", "g5.xlarge", "inf2.xlarge"} <= set(
        by
    )
    assert sum(r["cheapest"] for r in rows) == 1


def test_recommend_roberta_base_on_1m_examples():
    rec = ranking.recommend(workload.Workload("roberta-base", train_examples=1_000_000))
    assert rec["model"]["parameters"] == ROBERTA_BASE
    assert rec["workload"]["train_tokens_per_epoch"] == 128_000_000
    assert rec["class"]["class"] == "small"
    assert rec["recommended"]["instance"] == rec["cheapest"]  # the cheapest row is a GPU here
    json.dumps(rec)
    text = tables.format_recommendation(rec)
    assert "124,647,170 parameters" in text and "cheapest" in text and "| g5.xlarge |" in text
    counts = catalog.price_source_counts()  # how many prices a reader can rely on, printed
    hosting = counts["hosting"]
    assert f"SageMaker hosting {hosting['verified']}/{sum(hosting.values())}" in text


def test_tables_state_the_formula_and_each_rows_precision():
    rec = ranking.recommend(workload.profile_workload("local", None, None, None))
    sizing = tables.format_sizing(rec)
    assert "(6N + 12LdT) x tokens, N non-embedding" in sizing and "6 x params" not in sizing
    assert (
        "peak x MFU" in rec["assumptions"]["time"] and "peak bf16" not in rec["assumptions"]["time"]
    )
    table = tables.training_table(rec).splitlines()
    assert table[0].split("|")[6].strip() == "peak"
    by = {line.split("|")[1].strip(): line.split("|")[6].strip() for line in table[2:]}
    assert by["c7g.xlarge"] == "fp32" and by["g5.xlarge"] == "bf16"
    assert tables._hours(0.4) == "<1 s" and tables._hours(1.4) == "1 s"
    assert "fastest (compute time): " in tables.training_summary(rec)
