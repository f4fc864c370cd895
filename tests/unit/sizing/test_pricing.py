"""Prices from the AWS Price List API, tested with recorded responses (botocore Stubber)."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber

from pt2aws.aws.session import AwsSession
from pt2aws.sizing import pricing

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


def test_ec2_filters_pin_one_on_demand_linux_rate():
    service, filters = pricing.product_filters("p4d.24xlarge", "ec2", "eu-west-1")
    fields = {f["Field"]: f["Value"] for f in filters}
    assert service == "AmazonEC2" and all(f["Type"] == "TERM_MATCH" for f in filters)
    assert fields == {
        "regionCode": "eu-west-1",
        "instanceType": "p4d.24xlarge",
        "operatingSystem": "Linux",
        "tenancy": "Shared",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
        "marketoption": "OnDemand",  # without it a free Capacity Block p5 can be read
        "licenseModel": "No License required",  # without it three Windows rates match
    }
    service, filters = pricing.product_filters("c7g.xlarge", "hosting", "us-east-1")
    assert service == "AmazonSageMaker" and filters[0]["Value"] == "ml.c7g.xlarge"
    assert [pricing.price_list_region(r) for r in ("eu-west-1", "ap-south-2", "us-west-2")] == [
        "eu-central-1",
        "ap-south-1",
        "us-east-1",
    ]


@pytest.mark.parametrize(("region", "usd"), [("us-east-1", 21.957642), ("eu-west-1", 23.71569)])
def test_recorded_ec2_answer_gives_the_offer_files_price(region, usd):
    recorded = _fixture("pricing_get_products_ec2.json")[region]
    service, filters = pricing.product_filters("p4d.24xlarge", "ec2", region)
    client, stubber = _stubbed(
        [(recorded, {"ServiceCode": service, "Filters": filters, "FormatVersion": "aws_v1"})]
    )
    price = pricing.live_price(AwsSession(region=region), "p4d.24xlarge", "ec2", client=client)
    stubber.assert_no_pending_responses()
    assert (price.usd_per_hour, price.region, price.use) == (usd, region, "ec2")
    assert price.verified and price.source["id"] == "aws-price-list-api"
    assert "BoxUsage:p4d.24xlarge" in price.source["url"] and price.region_note == ""


def test_sagemaker_hosting_is_told_from_the_other_components_by_usage_type():
    answer = _fixture("pricing_get_products_sagemaker.json")["us-east-1"]
    service, filters = pricing.product_filters("ml.c7g.xlarge", "hosting", "us-east-1")
    params = {"ServiceCode": service, "Filters": filters, "FormatVersion": "aws_v1"}
    client, _ = _stubbed([(answer, params), (answer, params)])
    price = pricing.live_price(
        AwsSession(region="us-east-1"), "ml.c7g.xlarge", "hosting", client=client
    )
    assert price.usd_per_hour == 0.1734 and "USE1-Host:ml.c7g.xlarge" in price.source["url"]
    with pytest.raises(pricing.PriceUnavailable, match="on-demand training rates: none"):
        pricing.live_price(
            AwsSession(region="us-east-1"), "ml.c7g.xlarge", "training", client=client
        )
    rates = [pricing.on_demand_rate(item, "hosting") for item in answer["PriceList"]]
    assert rates == [None, (0.1734, "USE1-Host:ml.c7g.xlarge"), None]


def test_two_rates_for_one_filter_set_are_refused_not_guessed():
    recorded = _fixture("pricing_get_products_ec2.json")
    both = {
        "FormatVersion": "aws_v1",
        "PriceList": recorded["us-east-1"]["PriceList"] + recorded["eu-west-1"]["PriceList"],
    }
    client, _ = _stubbed([(both, None)])
    with pytest.raises(pricing.PriceUnavailable, match="21.9576 .*23.7157"):
        pricing.live_price(AwsSession(region="us-east-1"), "p4d.24xlarge", "ec2", client=client)


def test_access_denied_and_no_session_fall_back_with_the_reason(monkeypatch):
    client = boto3.client(
        "pricing", region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b"
    )
    stubber = Stubber(client)
    stubber.add_client_error("get_products", "AccessDeniedException", "not authorized")
    stubber.activate()
    with pytest.raises(pricing.PriceUnavailable, match="not in AmazonSageMakerFullAccess"):
        pricing.live_price(AwsSession(region="us-east-1"), "c7g.xlarge", "ec2", client=client)
    monkeypatch.delenv(pricing.OFF_SWITCH, raising=False)
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
    monkeypatch.delenv(pricing.OFF_SWITCH, raising=False)
    recorded = _fixture("pricing_get_products_ec2.json")["us-east-1"]
    empty = {"FormatVersion": "aws_v1", "PriceList": []}
    client, _ = _stubbed([(recorded, None), (empty, None)])
    monkeypatch.setattr(pricing, "_pricing_client", lambda session, region: client)
    session = AwsSession(region="us-east-1")
    monkeypatch.setattr(
        type(session),
        "boto",
        lambda self: boto3.Session(
            aws_access_key_id="a", aws_secret_access_key="b", region_name="us-east-1"
        ),
    )
    prices, notes = pricing.refresh_prices(session, ["p4d.24xlarge", "p5e.48xlarge"])
    assert list(prices) == ["p4d.24xlarge"] and prices["p4d.24xlarge"].usd_per_hour == 21.957642
    assert notes[0] == "prices read from the AWS Price List API today: p4d.24xlarge"
    assert notes[1].startswith("p5e.48xlarge: the dated table (0 AmazonEC2 products")
