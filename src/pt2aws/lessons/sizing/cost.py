"""Cost of SageMaker real-time inference: cost per 1M inferences per instance type.

Cost per 1M inferences = hourly price / (throughput in inferences per second x 3600) x 1e6,
for an endpoint kept busy (the best case: an idle endpoint costs the same per hour and serves
nothing).

**Prices.** On-demand, us-east-1, SageMaker *Real-Time Inference* (hosting) rates, which differ
from EC2 and from SageMaker training rates, from the catalog
(:func:`pt2aws.catalog.hosting_prices`, ``sagemaker_hosting_prices`` in
``pt2aws/instances.json``). Each price names its source and date and says whether it was
verified; none is (the pricing page's figures are not in any stored copy), so the table marks
them UNVERIFIED. Pass ``prices=`` to :func:`cost_table` with figures you checked yourself.

**Throughput.** Best measured on the instance itself (``throughput_by_instance``). Without that,
:func:`cost_table` scales a local measurement by vCPU count, which assumes equal per-vCPU speed
(Graviton vCPUs are physical cores, x86 vCPUs are hyper-threads) and is labelled an estimate.
"""

from __future__ import annotations

import os

from pt2aws import catalog

#: Date the catalog's figures (hosting prices included) were last checked.
PRICES_CHECKED_ON = catalog.catalog_meta()["checked"]
#: Where SageMaker hosting prices are published (the catalog's ``sagemaker-hosting-pricing``).
PRICING_PAGE = catalog.source("sagemaker-hosting-pricing")["url"]
#: Graviton instances beside a comparable x86 one (same vCPUs and memory: c6i.xlarge).
DEFAULT_COMPARISON = ("ml.c6g.xlarge", "ml.c7g.xlarge", "ml.c8g.xlarge", "ml.c6i.xlarge")


def _price_source(src: dict) -> str:
    """``"UNVERIFIED (<date>): <note>"`` for a catalog source entry, plus its url when it is
    not :data:`PRICING_PAGE` (which the table's footer names)."""
    mark = "verified" if src.get("verified") else "UNVERIFIED"
    where = "" if src["url"] == PRICING_PAGE else f"; {src['url']}"
    return f"{mark} ({src['date']}): {src['note']}{where}"


def cost_per_million(usd_per_hour: float, throughput_per_s: float) -> float:
    """USD per 1,000,000 inferences at ``throughput_per_s`` inferences per second.

    Raises:
        ValueError: non-positive throughput or negative price.
    """
    if throughput_per_s <= 0 or usd_per_hour < 0:
        raise ValueError(
            f"need throughput > 0 (got {throughput_per_s}) and price >= 0 (got {usd_per_hour})"
        )
    return usd_per_hour / (throughput_per_s * 3600.0) * 1e6


def cost_table(
    measured_throughput_per_s: float | None = None,
    *,
    measured_vcpus: int | None = None,
    throughput_by_instance: dict[str, float] | None = None,
    instances: tuple[str, ...] = DEFAULT_COMPARISON,
    prices: dict[str, float] | None = None,
) -> list[dict]:
    """Cost per hour and per 1M inferences for ``instances``.

    Args:
        measured_throughput_per_s: inferences/s measured locally (e.g. notebook 02's
            ``throughput_samples_per_second``); scaled by vCPUs for instances without a
            measurement of their own.
        measured_vcpus: vCPUs the local measurement used (default ``os.cpu_count()``).
        throughput_by_instance: inferences/s measured on the instances themselves.
        instances: instance types to list (default: three Graviton generations and ml.c6i.xlarge).
        prices: USD per hour overrides (figures you checked); default the catalog's
            SageMaker hosting prices (:func:`pt2aws.catalog.hosting_prices`).

    Returns:
        One dict per instance: ``instance_type, arch, processor, vcpus, usd_per_hour,
        price_verified, price_source, throughput_per_s, throughput_basis, usd_per_1m``.

    Raises:
        ValueError: an instance with neither a price nor a throughput.
    """
    measured_vcpus = measured_vcpus or os.cpu_count() or 1
    throughput_by_instance = throughput_by_instance or {}
    prices = prices or {}
    rows = []
    for instance_type in instances:
        known = catalog.hosting_price(instance_type)
        if instance_type in prices:
            price, verified, source = prices[instance_type], True, "given by the caller"
        elif known:
            price, verified, source = (
                known.usd_per_hour,
                known.verified,
                _price_source(known.source),
            )
        else:
            raise ValueError(
                f"no price for {instance_type}: pass prices={{{instance_type!r}: usd_per_hour}} "
                f"(from {PRICING_PAGE})"
            )
        vcpus = catalog.instance_vcpus(instance_type)
        if instance_type in throughput_by_instance:
            throughput, basis = throughput_by_instance[instance_type], "measured on the instance"
        elif measured_throughput_per_s:
            throughput = measured_throughput_per_s * vcpus / measured_vcpus
            basis = (
                f"estimate: {measured_throughput_per_s:.1f}/s measured on {measured_vcpus} local "
                f"vCPUs, scaled x{vcpus / measured_vcpus:g} by vCPUs"
            )
        else:
            raise ValueError(
                f"no throughput for {instance_type}: pass measured_throughput_per_s or "
                "throughput_by_instance"
            )
        rows.append(
            {
                "instance_type": instance_type,
                "arch": catalog.architecture(instance_type),
                "processor": catalog.family_processor(instance_type) or "",
                "vcpus": vcpus,
                "usd_per_hour": price,
                "price_verified": verified,
                "price_source": source,
                "throughput_per_s": throughput,
                "throughput_basis": basis,
                "usd_per_1m": cost_per_million(price, throughput),
            }
        )
    return rows


def format_cost_table(rows: list[dict]) -> str:
    """Markdown table of :func:`cost_table` rows, with the price date and sources below it."""
    lines = [
        "| instance | arch | processor | vCPUs | USD/hour | inferences/s | USD per 1M | price |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['instance_type']} | {r['arch']} | {r['processor']} | {r['vcpus']} | "
            f"{r['usd_per_hour']:.4f} | {r['throughput_per_s']:.1f} | {r['usd_per_1m']:.4f} | "
            f"{'verified' if r['price_verified'] else 'UNVERIFIED'} |"
        )
    lines += [
        "",
        f"On-demand, us-east-1, SageMaker real-time hosting; table dated {PRICES_CHECKED_ON}; "
        f"source: {PRICING_PAGE}.",
    ]
    lines += sorted({f"- {r['instance_type']}: price {r['price_source']}" for r in rows})
    lines += sorted({f"- throughput: {r['throughput_basis']}" for r in rows})
    return "\n".join(lines)


def measure_throughput(
    model_dir: str, texts: list[str], *, batch_size: int = 32, repeats: int = 3
) -> dict:
    """Inferences per second of the fp32 eager model on this machine (a quick local figure).

    Timed by :func:`pt2aws.inference.measure.throughput`: one untimed pass over ``texts``, then
    ``repeats`` timed passes; the median rate is reported. Prefer notebook 02's benchmark
    (``inference/metrics.json``) when it exists.

    Returns:
        ``{"throughput_samples_per_second": float (inferences/s), "seconds": [per timed pass],
        "texts": int, "batch_size": int, "vcpus": int, "torch_threads": int}``.
    """
    import torch

    from pt2aws.inference.measure import throughput
    from pt2aws.inference.predictor import Predictor

    predictor = Predictor(model_dir, device="cpu", batch_size=batch_size, variant="eager")
    rate = throughput(lambda: predictor.predict(texts), len(texts), repeats)
    return {
        "throughput_samples_per_second": rate["samples_per_s"],
        "seconds": [len(texts) / r for r in rate["runs_samples_per_s"]],
        "texts": len(texts),
        "batch_size": batch_size,
        "vcpus": os.cpu_count() or 1,
        "torch_threads": torch.get_num_threads(),
    }
