"""On-demand prices (USD per instance-hour): the dated table in ``instances.json`` or the AWS
Price List API (:func:`refresh_prices`), and the one price x hours, :func:`instance_cost`."""

from __future__ import annotations

import datetime
import json
import os
from dataclasses import dataclass

from pt2aws.sizing import catalog

CATALOG_REGION = "us-east-1"
USES = ("ec2", "hosting", "training")
_TABLES = {"hosting": "sagemaker_hosting_prices", "training": "sagemaker_training_prices"}
#: Set to ``off`` never to call the Price List API.
OFF_SWITCH = "PT2AWS_PRICE_LIST"


@dataclass(frozen=True)
class InstancePrice:
    """USD per instance-hour of ``instance_type`` for ``use`` (ec2 | hosting | training) in
    ``region`` (``asked_region`` differs where the table has no figure for it)."""

    instance_type: str
    usd_per_hour: float
    source: dict
    use: str
    region: str = CATALOG_REGION
    asked_region: str = CATALOG_REGION

    @property
    def verified(self) -> bool:
        return bool(self.source["verified"])

    def describe(self) -> str:
        """``0.1734 USD/h (UNVERIFIED, sagemaker-hosting-pricing 2026-11-30, us-east-1)``, with
        ``; us-east-1 price: the catalog has no figure for <asked_region>`` where they differ."""
        mark = "verified" if self.verified else "UNVERIFIED"
        note = f"; {self.region} price: the catalog has no figure for {self.asked_region}"
        where = f"{self.source['id']} {self.source['date']}, {self.region}"
        where += note if self.region != self.asked_region else ""
        return f"{self.usd_per_hour:.6g} USD/h ({mark}, {where})"


def _use(instance_type: str, use: str | None) -> str:
    use = use or ("hosting" if instance_type.startswith("ml.") else "ec2")
    if use not in USES:
        raise ValueError(f"use {use!r}: choose one of {', '.join(USES)}")
    return use


def price(instance_type: str, use: str | None = None, region: str = CATALOG_REGION):
    """The table's :class:`InstancePrice`, or None. ``use`` None: ``hosting`` for ``ml.`` names,
    else ``ec2``; a region without a figure gets us-east-1's, noted. Raises ValueError (use)."""
    use, region = _use(instance_type, use), region or CATALOG_REGION
    if use == "ec2":
        bare = instance_type.removeprefix("ml.")
        row = next((r for r in catalog.data()["instances"] if r["name"] == bare), None)
        if row is None or row["price_usd_per_hour"] is None:
            return None
        regional = row.get("regional_prices", {})
        here = region if region in regional else CATALOG_REGION
        usd = regional.get(region, row["price_usd_per_hour"])
        return InstancePrice(bare, usd, catalog.source(row["sources"]["price"]), use, here, region)
    name = "ml." + instance_type.removeprefix("ml.")
    if (row := catalog.data()[_TABLES[use]].get(name)) is None:
        return None
    src = catalog.source(row["source"])
    return InstancePrice(name, row["usd_per_hour"], src, use, asked_region=region)


def table_prices(use: str) -> dict[str, InstancePrice]:
    """Every SageMaker ``hosting`` or ``training`` price of the table, by ``ml.`` type."""
    return {name: price(name, use) for name in catalog.data()[_TABLES[use]] if name != "note"}


def instance_cost(
    instance_type: str, use: str | None, hours: float, count=1, region=CATALOG_REGION, known=None
) -> tuple[float | None, InstancePrice | None]:
    """``(hours x count x USD/hour, price)``, the price :func:`price`'s or ``known`` (a live one);
    ``(None, None)`` without one. Raises ValueError: hours < 0, count < 1, an unknown ``use``."""
    if hours < 0 or count < 1:
        raise ValueError(f"need hours >= 0 and count >= 1, got {hours} and {count}")
    found = known or price(instance_type, use, region)
    return (hours * count * found.usd_per_hour, found) if found else (None, None)


class PriceUnavailable(RuntimeError):
    """The Price List API gave no single rate; the message says what it gave."""


#: ``GetProducts`` filters of one on-demand Linux EC2 rate (without ``marketoption`` a Capacity
#: Block matches, without ``licenseModel`` Windows rates do).
EC2_FILTERS = {"operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA",
               "capacitystatus": "Used", "marketoption": "OnDemand",
               "licenseModel": "No License required"}  # fmt: skip


def live_price(client, instance_type: str, use: str, region: str) -> InstancePrice:
    """The on-demand hourly rate ``GetProducts`` gives now (``client``: a ``pricing`` client;
    SageMaker: the ``Host``/``Train`` usage type, not another component's). Raises
    PriceUnavailable: not exactly one rate; botocore's errors."""
    bare = instance_type.removeprefix("ml.")
    if use == "ec2":
        service, fields = "AmazonEC2", {"regionCode": region, "instanceType": bare, **EC2_FILTERS}
    else:
        service = "AmazonSageMaker"
        fields = {"instanceName": f"ml.{bare}", "locationType": "AWS Region", "regionCode": region}
    filters = [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in fields.items()]
    paginator = client.get_paginator("get_products")
    pages = paginator.paginate(ServiceCode=service, Filters=filters, FormatVersion="aws_v1")
    items = [json.loads(item) for page in pages for item in page["PriceList"]]
    component, rates = {"hosting": "-Host", "training": "-Train"}.get(use, ""), set()
    for item in items:
        usage = item["product"]["attributes"].get("usagetype", "")  # "USE1-Host:ml.c7g.xlarge"
        if usage.split(":")[0].endswith(component):
            for term in item["terms"].get("OnDemand", {}).values():
                hourly = [d for d in term["priceDimensions"].values() if d["unit"].startswith("Hr")]
                rates |= {(float(d["pricePerUnit"]["USD"]), usage) for d in hourly}
    rates = sorted(rates)
    if len({usd for usd, _ in rates}) != 1:
        found = ", ".join(f"{usd:g} ({usage})" for usd, usage in rates) or "none"
        raise PriceUnavailable(
            f"{len(items)} {service} products for {instance_type} in {region}, on-demand {use} "
            f"rates: {found}"
        )
    (usd, usage), *_ = rates
    url, today = f"AWS Price List API GetProducts ({service}, {usage})", datetime.date.today()
    src = {"id": "aws-price-list-api", "url": url, "date": today.isoformat(), "verified": True}
    return InstancePrice(instance_type, usd, src, use, region, region)


def refresh_prices(session, instance_types, region=None, *, enabled=True):
    """``({instance: price read now}, [notes])``; the notes say where the prices come from and,
    for each instance left to the table, why."""
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError

    reason = _why_not(session) if enabled else "price refresh not asked for"
    if reason:
        return {}, [f"prices: the dated table in pt2aws/sizing/instances.json ({reason})"]
    # us-east-1's endpoint answers for every region; an offline machine falls back quickly
    retries = {"mode": "standard", "total_max_attempts": 2}
    config = Config(connect_timeout=5, read_timeout=15, retries=retries)
    client = session.boto().client("pricing", region_name="us-east-1", config=config)
    prices, notes = {}, []
    for name in instance_types:
        try:
            prices[name] = live_price(client, name, _use(name, None), region or session.region)
        except PriceUnavailable as err:
            notes.append(f"{name}: the dated table ({err})")
        except (ClientError, BotoCoreError) as err:  # refused or unreachable: ask no more
            why = f"the Price List API could not be asked: {err}"
            if isinstance(err, ClientError):
                why = f"pricing:GetProducts refused ({err.response['Error']['Code']}): allow it "
                why += "to these credentials (it is not in AmazonSageMakerFullAccess)"
            notes.append(f"{name} and the rest: the dated table ({why})")
            break
    if prices:
        notes.insert(0, f"prices read from the AWS Price List API today: {', '.join(prices)}")
    return prices, notes


def _why_not(session) -> str | None:
    switch = os.environ.get(OFF_SWITCH, "")
    if switch.lower() in ("off", "0", "false", "no"):
        return f"price refresh off: {OFF_SWITCH}={switch}"
    if session is None or session.emulated:
        return "the emulator has no Price List API" if session else "no AWS session"
    return None if session.boto().get_credentials() else "no AWS credentials"
