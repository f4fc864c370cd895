"""Prices: the dated table, the one price x hours, and the AWS Price List API (recorded
responses, botocore Stubber)."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber

from pt2aws.aws.session import AwsSession
from pt2aws.sizing import catalog, pricing

FIXTURES = Path(__file__).parent / "fixtures"


def _fixture(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def _stubbed(responses: list[tuple[dict, dict]]):
    client = boto3.client(
        "pricing", region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b"
    )
    stubber = Stubber(client)
    for response, params in responses:
        stubber.add_response("get_products", response, params)
    stubber.activate()
    return client, stubber


def _live_session(monkeypatch, client) -> AwsSession:
    """A session with (fake) credentials whose ``pricing`` client is ``client``."""
    monkeypatch.delenv(pricing.OFF_SWITCH, raising=False)
    boto = boto3.Session(aws_access_key_id="a", aws_secret_access_key="b", region_name="us-east-1")
    monkeypatch.setattr(boto, "client", lambda service, **kwargs: client)
    monkeypatch.setattr(AwsSession, "boto", lambda self: boto)
    return AwsSession(region="us-east-1")


@pytest.mark.parametrize(("region", "usd"), [("us-east-1", 21.957642), ("eu-west-1", 23.71569)])
def test_recorded_ec2_answer_gives_the_offer_files_price(region, usd):
    recorded = _fixture("pricing_get_products_ec2.json")[region]
    fields = {
        "regionCode": region,
        "instanceType": "p4d.24xlarge",
        "operatingSystem": "Linux",
        "tenancy": "Shared",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
        "marketoption": "OnDemand",  # without it a free Capacity Block p5 can be read
        "licenseModel": "No License required",  # without it three Windows rates match
    }
    filters = [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in fields.items()]
    asked = {"ServiceCode": "AmazonEC2", "Filters": filters, "FormatVersion": "aws_v1"}
    client, stubber = _stubbed([(recorded, asked)])
    price = pricing.live_price(client, "p4d.24xlarge", "ec2", region)
    stubber.assert_no_pending_responses()
    assert (price.usd_per_hour, price.region, price.use) == (usd, region, "ec2")
    assert price.verified and price.source["id"] == "aws-price-list-api"
    assert "BoxUsage:p4d.24xlarge" in price.source["url"] and price.asked_region == region


def test_sagemaker_hosting_is_told_from_the_other_components_by_usage_type():
    answer = _fixture("pricing_get_products_sagemaker.json")["us-east-1"]
    fields = {
        "instanceName": "ml.c7g.xlarge",
        "locationType": "AWS Region",
        "regionCode": "us-east-1",
    }
    filters = [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in fields.items()]
    params = {"ServiceCode": "AmazonSageMaker", "Filters": filters, "FormatVersion": "aws_v1"}
    client, _ = _stubbed([(answer, params), (answer, params)])
    price = pricing.live_price(client, "c7g.xlarge", "hosting", "us-east-1")
    assert price.usd_per_hour == 0.1734 and "USE1-Host:ml.c7g.xlarge" in price.source["url"]
    with pytest.raises(pricing.PriceUnavailable, match="on-demand training rates: none"):
        pricing.live_price(client, "ml.c7g.xlarge", "training", "us-east-1")


def test_two_rates_for_one_filter_set_are_refused_not_guessed():
    recorded = _fixture("pricing_get_products_ec2.json")
    both = {
        "FormatVersion": "aws_v1",
        "PriceList": recorded["us-east-1"]["PriceList"] + recorded["eu-west-1"]["PriceList"],
    }
    client, _ = _stubbed([(both, None)])
    with pytest.raises(pricing.PriceUnavailable, match="21.9576 .*23.7157"):
        pricing.live_price(client, "p4d.24xlarge", "ec2", "us-east-1")


def test_access_denied_and_no_session_fall_back_with_the_reason(monkeypatch):
    client, stubber = _stubbed([])
    stubber.add_client_error("get_products", "AccessDeniedException", "not authorized")
    session = _live_session(monkeypatch, client)
    prices, notes = pricing.refresh_prices(session, ["c7g.xlarge", "g5.xlarge"])
    assert prices == {} and len(notes) == 1  # refused once: the others are not asked
    assert notes[0].startswith("c7g.xlarge and the rest: the dated table (pricing:GetProducts")
    assert "not in AmazonSageMakerFullAccess" in notes[0]
    assert pricing.refresh_prices(None, ["ml.c7g.xlarge"]) == (
        {},
        ["prices: the dated table in pt2aws/sizing/instances.json (no AWS session)"],
    )

    class Emulated(AwsSession):
        pass

    emulated = Emulated(region="us-east-1", emulator=object())
    assert "the emulator has no Price List API" in pricing.refresh_prices(emulated, ["x"])[1][0]
    monkeypatch.setenv(pricing.OFF_SWITCH, "off")
    off = pricing.refresh_prices(AwsSession(region="us-east-1"), ["ml.c7g.xlarge"])
    assert off == (
        {},
        [
            "prices: the dated table in pt2aws/sizing/instances.json (price refresh off: "
            "PT2AWS_PRICE_LIST=off)"
        ],
    )


def test_refresh_reads_each_price_and_says_which_came_from_where(monkeypatch):
    recorded = _fixture("pricing_get_products_ec2.json")["us-east-1"]
    empty = {"FormatVersion": "aws_v1", "PriceList": []}
    client, _ = _stubbed([(recorded, None), (empty, None)])
    session = _live_session(monkeypatch, client)
    prices, notes = pricing.refresh_prices(session, ["p4d.24xlarge", "p5e.48xlarge"])
    assert list(prices) == ["p4d.24xlarge"] and prices["p4d.24xlarge"].usd_per_hour == 21.957642
    assert notes[0] == "prices read from the AWS Price List API today: p4d.24xlarge"
    assert notes[1].startswith("p5e.48xlarge: the dated table (0 AmazonEC2 products")


def test_hosting_prices_are_sagemaker_types_with_a_dated_unverified_source():
    prices = pricing.table_prices("hosting")
    assert {"ml.c6g.xlarge", "ml.c7g.xlarge", "ml.c8g.xlarge", "ml.c6i.xlarge"} <= set(prices)
    c7g = pricing.price("c7g.xlarge", "hosting")
    assert c7g == pricing.price("ml.c7g.xlarge") == prices["ml.c7g.xlarge"]
    assert (c7g.usd_per_hour, c7g.use, c7g.verified) == (0.1734, "hosting", False)
    assert c7g.source["id"] == "sagemaker-hosting-pricing" and c7g.source["date"] == "2026-11-30"
    # SageMaker hosting costs more than EC2 for the same hardware (0.1734 vs 0.145 USD/h)
    assert c7g.usd_per_hour > pricing.price("c7g.xlarge").usd_per_hour == 0.145
    assert pricing.price("ml.c5.9xlarge") is None
    hosting = catalog.botocore_instance_types("hosting")
    assert all(name in hosting and p.source["url"] for name, p in prices.items())
    assert pricing.price("ml.p4d.24xlarge", "training").usd_per_hour == 37.688
    with pytest.raises(ValueError, match="choose one of ec2, hosting, training"):
        pricing.price("c7g.xlarge", "spot")


def test_every_ec2_price_names_a_dated_source_and_the_corrections_hold():
    unverified = set()
    for row in catalog.data()["instances"]:
        src = catalog.source(row["sources"]["price"])
        assert src["date"] and src["url"], row["name"]
        assert src["id"] != "aws-ec2-pricing" or not src["verified"]
        for region, usd in row.get("regional_prices", {}).items():
            assert region != "us-east-1" and usd > 0 and src["verified"], row["name"]
        if not src["verified"]:
            unverified.add(row["name"])
    assert unverified == {
        "g6e.xlarge",
        "p4de.24xlarge",
        "p5e.48xlarge",
        "c8g.xlarge",
        "c8g.4xlarge",
        "m8g.xlarge",
    }
    p5en = pricing.price("p5en.48xlarge")
    assert (p5en.usd_per_hour, p5en.source["id"], p5en.source["date"]) == (
        63.296,
        "dstack-2026",
        "2026-08-06",
    )
    assert pricing.price("p4d.24xlarge").usd_per_hour == 21.957642  # AWS offer file
    assert pricing.price("trn2.48xlarge") is None  # no on-demand product: verified absence
    assert catalog.get_instance("trn2.48xlarge").sources["price"]["verified"] is True
    assert pricing.price("p5e.48xlarge") is None


def test_regional_prices_and_the_us_east_1_fallback_say_which_region():
    eu = pricing.price("p4d.24xlarge", "ec2", "eu-west-1")
    assert (eu.usd_per_hour, eu.region, eu.asked_region) == (23.71569, "eu-west-1", "eu-west-1")
    assert eu.describe() == "23.7157 USD/h (verified, sub-ec2-2026 2026-09-10, eu-west-1)"
    fallback = pricing.price("c7g.xlarge", "ec2", "eu-west-1")
    assert (fallback.usd_per_hour, fallback.region, fallback.asked_region) == (
        0.145,
        "us-east-1",
        "eu-west-1",
    )
    assert fallback.describe().endswith(
        "us-east-1; us-east-1 price: the catalog has no figure for eu-west-1)"
    )
    hosting = pricing.price("ml.c7g.xlarge", region="ap-south-1")
    assert (hosting.use, hosting.usd_per_hour, hosting.region) == ("hosting", 0.1734, "us-east-1")
    assert hosting.describe().endswith(
        "(UNVERIFIED, sagemaker-hosting-pricing 2026-11-30, us-east-1; us-east-1 price: the "
        "catalog has no figure for ap-south-1)"
    )


def test_instance_cost_is_hours_times_count_times_the_hourly_price():
    usd, price = pricing.instance_cost("ml.g5.12xlarge", "training", 2.5, count=3)
    assert usd == pytest.approx(2.5 * 3 * 7.09) and price.usd_per_hour == 7.09
    usd, price = pricing.instance_cost("p4d.24xlarge", "ec2", 0.5, region="eu-west-1")
    assert usd == pytest.approx(0.5 * 23.71569) and price.region == "eu-west-1"
    live = pricing.InstancePrice("ml.c7g.xlarge", 0.2, {"id": "x", "verified": True}, "hosting")
    assert pricing.instance_cost("ml.c7g.xlarge", "hosting", 10, known=live) == (2.0, live)
    assert pricing.instance_cost("p5e.48xlarge", "ec2", 1) == (None, None)  # no price known
    assert pricing.instance_cost("ml.c7g.xlarge", None, 0)[0] == 0.0
    with pytest.raises(ValueError, match="hours >= 0 and count >= 1"):
        pricing.instance_cost("ml.c7g.xlarge", "hosting", 1, count=0)
    with pytest.raises(ValueError, match="hours >= 0"):
        pricing.instance_cost("ml.c7g.xlarge", "hosting", -1)
