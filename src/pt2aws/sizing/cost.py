"""Cost of SageMaker real-time inference: an instance price table and cost per 1M inferences.

Cost per 1M inferences = hourly price / (throughput in inferences per second x 3600) x 1e6,
for an endpoint kept busy (the best case: an idle endpoint costs the same per hour and serves
nothing).

**Prices.** On-demand, us-east-1, SageMaker *Real-Time Inference* (hosting) rates, which differ
from EC2 and from SageMaker training rates. The authoritative source is the "Real-Time
Inference" tab of https://aws.amazon.com/sagemaker/pricing/ ; its figures load dynamically and
are **not in any stored copy** this project could check (searched 2026-11-30). Each row
therefore says where its figure comes from and whether it was verified; pass ``prices=`` to
:func:`cost_table` with figures you checked yourself.

**Throughput.** Best measured on the instance itself (``throughput_by_instance``). Without that,
:func:`cost_table` scales a local measurement by vCPU count, which assumes equal per-vCPU speed
(Graviton vCPUs are physical cores, x86 vCPUs are hyper-threads) and is labelled an estimate.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from pt2aws.sizing.catalog import architecture, instance_vcpus

PRICES_CHECKED_ON = "2026-11-30"
PRICING_PAGE = "https://aws.amazon.com/sagemaker/pricing/ (Real-Time Inference, us-east-1)"
_UNVERIFIED = (
    "UNVERIFIED: not found in stored material; figure recalled from the AWS pricing page, "
    "check it there before quoting"
)


@dataclass(frozen=True)
class InstancePrice:
    """One row of the price table (USD per instance-hour, on-demand, us-east-1)."""

    instance_type: str
    usd_per_hour: float
    processor: str
    memory_gib: int
    source: str
    verified: bool = False


#: SageMaker real-time hosting prices (see the module docstring for what "verified" means).
PRICE_TABLE: dict[str, InstancePrice] = {
    p.instance_type: p
    for p in (
        InstancePrice("ml.c6g.xlarge", 0.1632, "Graviton2", 8, _UNVERIFIED),
        InstancePrice("ml.c7g.xlarge", 0.1734, "Graviton3", 8, _UNVERIFIED),
        InstancePrice("ml.c8g.xlarge", 0.1914, "Graviton4", 8, _UNVERIFIED),
        InstancePrice("ml.c7g.4xlarge", 0.6936, "Graviton3", 32, _UNVERIFIED),
        InstancePrice("ml.c6i.xlarge", 0.2040, "Intel Xeon (Ice Lake)", 8, _UNVERIFIED),
        InstancePrice(
            "ml.m5.xlarge",
            0.269,
            "Intel Xeon (Skylake/Cascade Lake)",
            16,
            "third-party, not AWS: zircon.tech, 'The real cost of running AI models on AWS "
            "SageMaker' ('us-east-1 as of October 2025')",
        ),
    )
}
#: Graviton instances beside a comparable x86 one (same vCPUs and memory: c6i.xlarge).
DEFAULT_COMPARISON = ("ml.c6g.xlarge", "ml.c7g.xlarge", "ml.c8g.xlarge", "ml.c6i.xlarge")


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
        prices: USD per hour overrides (figures you checked); default :data:`PRICE_TABLE`.

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
        known = PRICE_TABLE.get(instance_type)
        if instance_type in prices:
            price, verified, source = prices[instance_type], True, "given by the caller"
        elif known:
            price, verified, source = known.usd_per_hour, known.verified, known.source
        else:
            raise ValueError(
                f"no price for {instance_type}: pass prices={{{instance_type!r}: usd_per_hour}} "
                f"(from {PRICING_PAGE})"
            )
        vcpus = instance_vcpus(instance_type)
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
                "arch": architecture(instance_type),
                "processor": known.processor if known else "",
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

    One warm-up pass, then ``repeats`` timed passes over ``texts``; the median is reported.
    Prefer notebook 02's benchmark (``inference/metrics.json``) when it exists.

    Returns:
        ``{"throughput_samples_per_second": float, "seconds": [...], "texts": int,
        "batch_size": int, "vcpus": int, "torch_threads": int}``.
    """
    import statistics
    import time

    import torch

    from pt2aws.inference.predictor import Predictor

    predictor = Predictor(model_dir, device="cpu", batch_size=batch_size, variant="eager")
    predictor.predict(texts[:batch_size])
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        predictor.predict(texts)
        seconds.append(time.perf_counter() - start)
    return {
        "throughput_samples_per_second": len(texts) / statistics.median(seconds),
        "seconds": seconds,
        "texts": len(texts),
        "batch_size": batch_size,
        "vcpus": os.cpu_count() or 1,
        "torch_threads": torch.get_num_threads(),
    }
