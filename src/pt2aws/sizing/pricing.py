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

    @property
    def region_note(self) -> str:
        if self.region == self.asked_region:
            return ""
        return f"{self.region} price: the catalog has no figure for {self.asked_region}"

    def describe(self) -> str:
        """``0.1734 USD/h (UNVERIFIED, sagemaker-hosting-pricing 2026-11-30, us-east-1)``."""
        mark = "verified" if self.verified else "UNVERIFIED"
        note = f"; {self.region_note}" if self.region_note else ""
        where = f"{self.source['id']} {self.source['date']}, {self.region}{note}"
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
    row = catalog.data()[_TABLES[use]].get(name)
    if row is None:
        return None
    return InstancePrice(
        name, row["usd_per_hour"], catalog.source(row["source"]), use, asked_region=region
    )


def table_prices(use: str) -> dict[str, InstancePrice]:
    """Every SageMaker ``hosting`` or ``training`` price of the table, by ``ml.`` type."""
    return {name: price(name, use) for name in catalog.data()[_TABLES[use]] if name != "note"}


def instance_cost(
    instance_type: str,
    use: str | None,
    hours: float,
    count: int = 1,
    region: str = CATALOG_REGION,
    known: InstancePrice | None = None,
) -> tuple[float | None, InstancePrice | None]:
    """``(hours x count x USD/hour, price)``, the price :func:`price`'s or ``known`` (a live one);
    ``(None, None)`` without one. Raises ValueError: hours < 0, count < 1, an unknown ``use``."""
    if hours < 0 or count < 1:
        raise ValueError(f"need hours >= 0 and count >= 1, got {hours} and {count}")
    found = known or price(instance_type, use, region)
    return (hours * count * found.usd_per_hour, found) if found else (None, None)


class PriceUnavailable(RuntimeError):
    """The Price List API gave no price; the message is the reason."""


def product_filters(instance_type: str, use: str, region: str) -> tuple[str, list[dict]]:
    """``(ServiceCode, Filters)`` of ``GetProducts`` for one on-demand rate (EC2: without
    ``marketoption`` a Capacity Block matches, without ``licenseModel`` Windows rates do)."""
    use = _use(instance_type, use)
    if use == "ec2":
        service = "AmazonEC2"
        fields = {
            "regionCode": region,
            "instanceType": instance_type.removeprefix("ml."),
            "operatingSystem": "Linux",
            "tenancy": "Shared",
            "preInstalledSw": "NA",
            "capacitystatus": "Used",
            "marketoption": "OnDemand",
            "licenseModel": "No License required",
        }
    else:
        service = "AmazonSageMaker"
        name = "ml." + instance_type.removeprefix("ml.")
        fields = {"instanceName": name, "locationType": "AWS Region", "regionCode": region}
    return service, [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in fields.items()]


def on_demand_rate(product: dict | str, use: str) -> tuple[float, str] | None:
    """``(USD per hour, usage type)`` of one ``GetProducts`` item, or None (another SageMaker
    component than ``Host``/``Train``, or no hourly on-demand rate)."""
    item = json.loads(product) if isinstance(product, str) else product
    usage = item.get("product", {}).get("attributes", {}).get("usagetype", "")
    wanted = {"hosting": "Host", "training": "Train"}.get(use)
    if wanted and usage.split(":", 1)[0].rsplit("-", 1)[-1] != wanted:
        return None
    for term in item.get("terms", {}).get("OnDemand", {}).values():
        for dimension in term.get("priceDimensions", {}).values():
            usd = dimension.get("pricePerUnit", {}).get("USD")
            if usd is not None and dimension.get("unit", "").lower().startswith("hr"):
                return float(usd), usage
    return None


def live_price(session, instance_type: str, use: str, region: str | None = None, client=None):
    """The :class:`InstancePrice` read now from the Price List API; ``client``: a ready
    ``pricing`` client. Raises PriceUnavailable: refused, unreachable, or not exactly one rate."""
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError

    region = region or session.region
    service, filters = product_filters(instance_type, use, region)
    if client is None:  # short timeouts and one retry: an offline machine falls back quickly
        retries = {"mode": "standard", "total_max_attempts": 2}
        config = Config(connect_timeout=5, read_timeout=15, retries=retries)
        # any of the API's endpoints answers for every region: us-east-1's
        client = session.boto().client("pricing", region_name="us-east-1", config=config)
    try:
        pages = client.get_paginator("get_products").paginate(
            ServiceCode=service, Filters=filters, FormatVersion="aws_v1"
        )
        items = [item for page in pages for item in page.get("PriceList", [])]
    except ClientError as err:
        code = err.response["Error"]["Code"]
        if code in ("AccessDeniedException", "AccessDenied", "UnrecognizedClientException"):
            raise PriceUnavailable(
                f"pricing:GetProducts refused ({code}): allow it to these credentials (it is not "
                "in AmazonSageMakerFullAccess)"
            ) from None
        raise PriceUnavailable(f"the Price List API answered {code}") from None
    except BotoCoreError as err:
        raise PriceUnavailable(f"the Price List API could not be asked: {err}") from None
    rates = sorted({rate for rate in (on_demand_rate(item, use) for item in items) if rate})
    if len({usd for usd, _ in rates}) != 1:
        found = ", ".join(f"{usd:g} ({usage})" for usd, usage in rates) or "none"
        raise PriceUnavailable(
            f"{len(items)} {service} products for {instance_type} in {region}, on-demand {use} "
            f"rates: {found}"
        )
    (usd, usage), *_ = rates
    url = f"AWS Price List API GetProducts ({service}, {usage})"
    today = datetime.date.today().isoformat()
    src = {"id": "aws-price-list-api", "url": url, "date": today, "verified": True}
    return InstancePrice(instance_type, usd, src, use, region, region)


def refresh_prices(
    session, instance_types, use=None, region=None, *, enabled=True, client=None
) -> tuple[dict[str, InstancePrice], list[str]]:
    """``({instance: price read now}, [notes])``; the notes say where the prices come from and,
    for each instance left to the table, why."""
    reason = _why_not(session) if enabled else "price refresh not asked for"
    if reason:
        return {}, [f"prices: the dated table in pt2aws/sizing/instances.json ({reason})"]
    prices, notes = {}, []
    for name in instance_types:
        try:
            prices[name] = live_price(session, name, _use(name, use), region, client)
        except PriceUnavailable as err:
            notes.append(f"{name}: the dated table ({err})")
            if "could not be asked" in str(err) or "refused" in str(err):
                notes.append("the other prices: the dated table (same reason)")
                break
    if prices:
        notes.insert(0, f"prices read from the AWS Price List API today: {', '.join(prices)}")
    return prices, notes


def _why_not(session) -> str | None:
    if os.environ.get(OFF_SWITCH, "").lower() in ("off", "0", "false", "no"):
        return f"price refresh off: {OFF_SWITCH}={os.environ[OFF_SWITCH]}"
    if session is None:
        return "no AWS session"
    if session.emulated:
        return "the emulator has no Price List API"
    if session.boto().get_credentials() is None:
        return "no AWS credentials"
    return None
