"""Catalog prices (issue 17): every price with a dated source, regions, and serving peaks."""

import json

import pytest

from pt2aws import catalog


def test_every_ec2_price_names_a_dated_source_and_the_corrections_hold():
    data = json.loads(catalog.CATALOG_PATH.read_text())
    for row in data["instances"]:
        src = catalog.source(row["sources"]["price"])
        assert src["date"] and src["url"], row["name"]
        assert src["id"] != "aws-ec2-pricing" or not src["verified"]
        for region, usd in row.get("regional_prices", {}).items():
            assert region != "us-east-1" and usd > 0 and src["verified"], row["name"]
    p5en = catalog.ec2_price("p5en.48xlarge")
    assert (p5en.usd_per_hour, p5en.source["id"], p5en.source["date"]) == (
        63.296,
        "dstack-2026",
        "2026-08-06",
    )
    assert catalog.ec2_price("p4d.24xlarge").usd_per_hour == 21.957642  # AWS offer file
    assert catalog.ec2_price("trn2.48xlarge") is None  # no on-demand product: verified absence
    assert catalog.get_instance("trn2.48xlarge").sources["price"]["verified"] is True
    assert catalog.ec2_price("p5e.48xlarge") is None


def test_verified_and_unverified_counts():
    counts = catalog.price_source_counts()
    assert counts["ec2"] == {"verified": 20, "unverified": 6}
    unverified = {
        r["name"]
        for r in json.loads(catalog.CATALOG_PATH.read_text())["instances"]
        if not catalog.source(r["sources"]["price"])["verified"]
    }
    assert unverified == {
        "g6e.xlarge",
        "p4de.24xlarge",
        "p5e.48xlarge",
        "c8g.xlarge",
        "c8g.4xlarge",
        "m8g.xlarge",
    }
    assert counts["hosting"]["verified"] == counts["training"]["verified"] == 0


def test_regional_prices_and_the_us_east_1_fallback_say_which_region():
    eu = catalog.ec2_price("p4d.24xlarge", "eu-west-1")
    assert (eu.usd_per_hour, eu.region, eu.region_note) == (23.71569, "eu-west-1", "")
    assert "eu-west-1" in eu.describe() and "verified" in eu.describe()
    fallback = catalog.ec2_price("c7g.xlarge", "eu-west-1")
    assert (fallback.usd_per_hour, fallback.region, fallback.asked_region) == (
        0.145,
        "us-east-1",
        "eu-west-1",
    )
    assert fallback.region_note == "us-east-1 price: the catalog has no figure for eu-west-1"
    hosting = catalog.price("ml.c7g.xlarge", region="ap-south-1")
    assert (hosting.use, hosting.usd_per_hour, hosting.region) == ("hosting", 0.1734, "us-east-1")
    assert "ap-south-1" in hosting.region_note and "UNVERIFIED" in hosting.describe()
    assert catalog.price("c7g.xlarge").use == "ec2"
    assert catalog.price("ml.p4d.24xlarge", "training").usd_per_hour == 37.688
    with pytest.raises(ValueError, match="choose one of ec2, hosting, training"):
        catalog.price("c7g.xlarge", "spot")


def test_serving_peak_per_processor_generation():
    peaks = {
        t: catalog.serving_peak(t)
        for t in ("ml.c6g.xlarge", "ml.c7g.xlarge", "ml.c8g.xlarge", "ml.c6i.xlarge", "g5.xlarge")
    }
    gflops = {t: p["flops"] / 1e9 for t, p in peaks.items()}
    # vector units x fp32 lanes x 2 (FMA) x clock, per vCPU, x 4 vCPUs (graviton-guide table)
    assert gflops["ml.c6g.xlarge"] == pytest.approx(4 * 2 * 4 * 2 * 2.5)
    assert gflops["ml.c7g.xlarge"] == pytest.approx(4 * 4 * 4 * 2 * 2.6)
    assert gflops["ml.c8g.xlarge"] == pytest.approx(4 * 4 * 4 * 2 * 2.8)
    assert gflops["ml.c6i.xlarge"] == pytest.approx(4 * 16 * 2 * 3.5)  # half a core per vCPU
    assert peaks["g5.xlarge"]["precision"] == "bf16" and gflops["g5.xlarge"] == 70_000
    assert {p["precision"] for t, p in peaks.items() if t.startswith("ml.")} == {"fp32"}
    assert catalog.serving_peak("ml.c7g.4xlarge")["flops"] == 4 * peaks["ml.c7g.xlarge"]["flops"]
    assert catalog.serving_peak("x9.large") is None
    assert catalog.source("graviton-guide")["verified"] is True
    assert peaks["ml.c7g.xlarge"]["source"]["id"] == "derived-cpu-fp32-peak"
