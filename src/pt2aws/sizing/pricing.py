"""Today's on-demand prices from the AWS Price List API, or the dated table with the reason.

Where credentials allow, :func:`refresh_prices` reads each instance's price with ``GetProducts``
(boto3 ``pricing``); otherwise the catalog's dated figures stand (:func:`pt2aws.sizing.catalog.price`)
and the note says why (no session, the emulator, no credentials, ``pricing:GetProducts`` not
allowed: it is not in ``AmazonSageMakerFullAccess``, no network, no such product).

Filters, so that one product is one on-demand rate:

* EC2 (``AmazonEC2``): ``regionCode``, ``instanceType``, ``operatingSystem=Linux``,
  ``tenancy=Shared``, ``preInstalledSw=NA``, ``capacitystatus=Used``, ``marketoption=OnDemand``
  and ``licenseModel="No License required"``: with seven of them three Windows m5.xlarge SKUs
  still match, and without ``marketoption`` p5.48xlarge's Capacity Block product reads $0.00
  (AWS's offer file of 2026-09-10 as copied in scttfrdmn/substrate
  ``emulator/pricing_offer_fixture_ec2.go``).
* SageMaker (``AmazonSageMaker``): ``instanceName``, ``locationType="AWS Region"``,
  ``regionCode`` (the SageMaker SDK's own filters, ``sagemaker.core.common_utils.
  get_instance_rate_per_hour``), which return every component of the instance (hosting,
  training, notebooks, ...): the product whose usage type's component is ``Host``
  (``USE1-Host:ml.c7g.xlarge``) or ``Train`` is taken (usage-type pattern seen in third-party
  cost tools, UNVERIFIED in an AWS document).

The Price List API answers in us-east-1, eu-central-1 and ap-south-1 (botocore's endpoints);
like the SageMaker SDK, Europe and Africa ask eu-central-1, Asia-Pacific ap-south-1.
"""

from __future__ import annotations

import datetime
import json
import logging
import os

from pt2aws.sizing.catalog import InstancePrice, family_processor

logger = logging.getLogger(__name__)

#: Set to ``off`` to never call the Price List API (the dated table, with that reason).
OFF_SWITCH = "PT2AWS_PRICE_LIST"
SOURCE_ID = "aws-price-list-api"


class PriceUnavailable(RuntimeError):
    """The Price List API gave no price; the message is the reason, printed with the fallback."""


def price_list_region(region: str) -> str:
    """The Price List API endpoint to ask for ``region``'s prices."""
    if region.startswith(("eu", "af")):
        return "eu-central-1"
    if region.startswith(("ap", "cn")):
        return "ap-south-1"
    return "us-east-1"


def product_filters(instance_type: str, use: str, region: str) -> tuple[str, list[dict]]:
    """``(ServiceCode, Filters)`` of ``GetProducts`` for one on-demand rate (module docstring).

    Raises:
        ValueError: an unknown ``use``.
    """

    def match(field: str, value: str) -> dict:
        return {"Type": "TERM_MATCH", "Field": field, "Value": value}

    if use == "ec2":
        return "AmazonEC2", [
            match("regionCode", region),
            match("instanceType", instance_type.removeprefix("ml.")),
            match("operatingSystem", "Linux"),
            match("tenancy", "Shared"),
            match("preInstalledSw", "NA"),
            match("capacitystatus", "Used"),
            match("marketoption", "OnDemand"),
            match("licenseModel", "No License required"),
        ]
    if use in ("hosting", "training"):
        name = "ml." + instance_type.removeprefix("ml.")
        return "AmazonSageMaker", [
            match("instanceName", name),
            match("locationType", "AWS Region"),
            match("regionCode", region),
        ]
    raise ValueError(f"use {use!r}: choose ec2, hosting or training")


def _component(usage_type: str) -> str:
    """``"USE1-Host:ml.c7g.xlarge"`` -> ``"Host"``; ``"BoxUsage:c7g.xlarge"`` -> ``"BoxUsage"``."""
    return usage_type.split(":", 1)[0].rsplit("-", 1)[-1]


def on_demand_rate(product: dict | str, use: str) -> tuple[float, str] | None:
    """``(USD per hour, usage type)`` of one ``GetProducts`` price-list item, or None when it is
    not the wanted component (SageMaker) or has no hourly on-demand rate."""
    item = json.loads(product) if isinstance(product, str) else product
    usage_type = item.get("product", {}).get("attributes", {}).get("usagetype", "")
    wanted = {"hosting": "Host", "training": "Train"}.get(use)
    if wanted and _component(usage_type) != wanted:
        return None
    for term in item.get("terms", {}).get("OnDemand", {}).values():
        for dimension in term.get("priceDimensions", {}).values():
            usd = dimension.get("pricePerUnit", {}).get("USD")
            if usd is not None and dimension.get("unit", "").lower().startswith("hr"):
                return float(usd), usage_type
    return None


def live_price(session, instance_type: str, use: str, region: str | None = None, client=None):
    """The on-demand price of ``instance_type`` for ``use`` read now from the Price List API.

    Args:
        session: an :class:`pt2aws.aws.session.AwsSession` for an account (credentials).
        instance_type: ``ml.`` type or EC2 type.
        use: ``"ec2"``, ``"hosting"`` or ``"training"``.
        region: the region of the price; default the session's.
        client: a ready ``pricing`` client (tests: a botocore ``Stubber``); default built here.

    Returns:
        An :class:`pt2aws.sizing.catalog.InstancePrice` whose source is ``aws-price-list-api``, dated
        today, verified.

    Raises:
        PriceUnavailable: no credentials, access denied, no network, or no such product; the
            message is the reason.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    region = region or session.region
    service, filters = product_filters(instance_type, use, region)
    if client is None:
        client = _pricing_client(session, region)
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
    except BotoCoreError as err:  # no credentials, no network
        raise PriceUnavailable(f"the Price List API could not be asked: {err}") from None
    rates = {rate for rate in (on_demand_rate(item, use) for item in items) if rate}
    if len({usd for usd, _ in rates}) != 1:
        found = ", ".join(f"{usd:g} ({usage})" for usd, usage in sorted(rates)) or "none"
        raise PriceUnavailable(
            f"{len(items)} {service} products for {instance_type} in {region}, on-demand {use} "
            f"rates: {found}"
        )
    (usd, usage_type), *_ = sorted(rates)
    today = datetime.date.today().isoformat()
    return InstancePrice(
        instance_type=instance_type,
        usd_per_hour=usd,
        processor=family_processor(instance_type) or "",
        source={
            "id": SOURCE_ID,
            "url": f"AWS Price List API GetProducts ({service}, {usage_type})",
            "date": today,
            "verified": True,
            "note": f"read {today} for {region}",
        },
        use=use,
        region=region,
        asked_region=region,
    )


def _pricing_client(session, region: str):
    """A ``pricing`` client at the Price List API (never the emulator: it has none), with short
    timeouts and one retry, so an offline machine falls back quickly."""
    from botocore.config import Config

    config = Config(
        connect_timeout=5, read_timeout=15, retries={"mode": "standard", "total_max_attempts": 2}
    )
    return session.boto().client("pricing", region_name=price_list_region(region), config=config)


def refresh_prices(
    session,
    instance_types,
    use: str | None = None,
    region: str | None = None,
    *,
    enabled: bool = True,
) -> tuple[dict[str, InstancePrice], list[str]]:
    """Today's prices for ``instance_types`` where the Price List API answers.

    Args:
        session: an AWS session, or None (no call: the dated table).
        instance_types: ``ml.`` types (SageMaker: ``use`` default ``hosting``) or EC2 types.
        use: ``ec2``, ``hosting`` or ``training``; None: ``hosting`` for ``ml.``, else ``ec2``.
        region: the region of the prices; default the session's.
        enabled: False: do not ask (the dated table, "not asked for").

    Returns:
        ``({instance: InstancePrice read now}, [notes])``: the notes say where the prices come
        from and, for each instance left to the dated table, why.
    """
    reason = _why_not(session) if enabled else "price refresh not asked for"
    if reason:
        return {}, [f"prices: the dated table in pt2aws/sizing/instances.json ({reason})"]
    prices, notes = {}, []
    for name in instance_types:
        kind = use or ("hosting" if name.startswith("ml.") else "ec2")
        try:
            prices[name] = live_price(session, name, kind, region)
        except PriceUnavailable as err:
            notes.append(f"{name}: the dated table ({err})")
            if "could not be asked" in str(err) or "refused" in str(err):
                notes.append("the other prices: the dated table (same reason)")
                break
    if prices:
        notes.insert(0, f"prices read from the AWS Price List API today: {', '.join(prices)}")
    return prices, notes


def _why_not(session) -> str | None:
    """Why the API is not asked at all, or None."""
    if os.environ.get(OFF_SWITCH, "").lower() in ("off", "0", "false", "no"):
        return f"price refresh off: {OFF_SWITCH}={os.environ[OFF_SWITCH]}"
    if session is None:
        return "no AWS session"
    if session.emulated:
        return "the emulator has no Price List API"
    if session.boto().get_credentials() is None:
        return "no AWS credentials"
    return None
