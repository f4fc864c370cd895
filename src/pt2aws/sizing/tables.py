"""Text and table views of a :func:`pt2aws.sizing.ranking.recommend` result and the catalog.

What notebook 00 and ``pt2aws recommend`` print: the sizing head (model, data, memory, workload
class), the training and inference rankings as Markdown tables, and the catalog as a table.
"""

from __future__ import annotations

from pt2aws.sizing.catalog import load_catalog, price_source_counts


def catalog_table(region: str = "us-east-1") -> str:
    """The catalog as one Markdown line per instance: hardware, the EC2 price in ``region``
    (or us-east-1's, said) with its source id, date and whether it was verified."""
    from pt2aws.sizing.catalog import ec2_price, source

    lines = [
        "| instance | kind | vCPUs | accelerators | peak bf16 TFLOP/s | USD/hour | price source |",
        "| --- | --- | ---: | --- | ---: | ---: | --- |",
    ]
    for it in load_catalog():
        price = ec2_price(it.name, region)
        src = source(it.sources["price"]["id"])
        mark = "verified" if src["verified"] else "UNVERIFIED"
        usd = "none known" if price is None else f"{price.usd_per_hour:g}"
        where = "" if price is None or not price.region_note else f" ({price.region})"
        devices = f"{it.accelerator_count} x {it.accelerator}" if it.accelerator else it.cpu
        lines.append(
            f"| {it.name} | {it.kind} | {it.vcpus} | {devices} | {it.peak_bf16_tflops:.1f} | "
            f"{usd}{where} | {src['id']} {src['date']}, {mark} |"
        )
    return "\n".join(lines)


def _hours(seconds: float) -> str:
    if seconds < 1:
        return "<1 s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def training_table(rec: dict, limit: int | None = None) -> str:
    """Markdown table of ``rec["training"]`` (cheapest first), the first ``limit`` rows."""
    lines = [
        "| instance | accelerators | nodes | strategy | GB/device | peak | time | USD | | note |",
        "| --- | --- | ---: | --- | ---: | --- | ---: | ---: | --- | --- |",
    ]
    for r in rec["training"][:limit]:
        mark = " ".join(
            m for m, on in (("cheapest", r["cheapest"]), ("fastest", r["fastest"])) if on
        )
        cost = "n/a (no price)" if r["cost_usd"] is None else f"{r['cost_usd']:.2f}"
        lines.append(
            f"| {r['instance']} | {r['accelerators']} | {r['nodes']} | {r['strategy']} | "
            f"{r['memory_per_device_gb']:.1f} | {r['peak_precision']} | {_hours(r['time_s'])} | "
            f"{cost} | {mark} | "
            f"{r['note']} |"
        )
    return "\n".join(lines)


def training_summary(rec: dict, compare: tuple[str, ...] = ("p4d.24xlarge",)) -> str:
    """One line naming the cheapest and the fastest training rows and the ``compare`` rows
    (the source blog's p4d.24xlarge), with their estimated time and cost, for the notebook's
    "what you should see" to point at."""

    def describe(row: dict) -> str:
        cost = "no price" if row["cost_usd"] is None else f"{row['cost_usd']:.2f} USD"
        return f"{row['nodes']} x {row['instance']} ({_hours(row['time_s'])}, {cost})"

    rows = rec["training"]
    parts = []
    for label, flag in (("cheapest", "cheapest"), ("fastest (compute time)", "fastest")):
        row = next((r for r in rows if r[flag]), None)
        if row:
            parts.append(f"{label}: {describe(row)}")
    for name in compare:
        row = next((r for r in rows if r["instance"] == name), None)
        parts.append(f"{name}: {describe(row)}" if row else f"{name}: does not fit")
    return "; ".join(parts) or "no instance fits"


def inference_table(rec: dict) -> str:
    """Markdown table of ``rec["inference"]`` (USD per 1M requests) with the throughput model's
    assumption under it, or a sentence saying no instance of the list holds the model's weights.
    """
    if not rec["inference"]:
        need = rec["memory"]["inference_bf16"]["total"] / 1e9
        return (
            f"no single-accelerator or CPU instance of the inference list holds the {need:.1f} GB "
            "of bf16 weights: serve sharded over a multi-GPU instance (out of pt2aws's scope)"
        )
    lines = [
        "| instance | processor | arch | requests/s | USD/hour | USD per 1M requests | | note |",
        "| --- | --- | --- | ---: | ---: | ---: | --- | --- |",
    ]
    for r in rec["inference"]:
        mark = " ".join(
            m for m, on in (("cheapest", r["cheapest"]), ("fastest", r["fastest"])) if on
        )
        lines.append(
            f"| {r['instance']} | {r['processor']} | {r['arch']} | {r['throughput_rps']:.1f} | "
            f"{r['price_usd_per_hour']:.4g} | {r['usd_per_million']:.3f} | {mark} | {r['note']} |"
        )
    lines += ["", f"serving model: {rec['assumptions']['serving']}"]
    lines += sorted({f"- {r['instance']}: {r['throughput_source']}" for r in rec["inference"]})
    return "\n".join(lines)


def format_sizing(rec: dict) -> str:
    """Model, data, memory breakdown (GB) and workload class: the head of the recommendation."""
    m, w, c = rec["model"], rec["workload"], rec["class"]
    mem, inf = rec["memory"]["training_one_device"], rec["memory"]["inference_bf16"]
    gb = 1e9
    lines = [
        f"model {m['name']}: {m['parameters']:,} parameters (h={m['hidden_size']}, "
        f"L={m['num_layers']}, a={m['num_heads']})",
        f"data: {w['train_examples']:,} examples x {w['seq_len']} tokens x {w['epochs']:g} epochs "
        f"= {w['train_tokens_per_epoch'] * w['epochs']:.3g} tokens; {w['training_flops']:.3g} FLOPs "
        "((6N + 12LdT) x tokens, N non-embedding)",
        f"training memory on one device ({w['precision']}, micro-batch {w['micro_batch']}): "
        f"weights {mem['weights'] / gb:.2f} + gradients {mem['gradients'] / gb:.2f} + AdamW "
        f"{mem['optimizer'] / gb:.2f} + activations {mem['activations'] / gb:.2f} = "
        f"{mem['total'] / gb:.2f} GB",
        f"inference memory (bf16, batch 1): {inf['total'] / gb:.3f} GB",
        f"workload class: {c['class']} ({c['reason']}) -> {c['strategy']}",
    ]
    return "\n".join(lines)


def format_recommendation(rec: dict, limit: int | None = 12) -> str:
    """The text that notebook 00 and ``pt2aws recommend`` print.

    Args:
        rec: a :func:`pt2aws.sizing.ranking.recommend` result.
        limit: rows of the training table (None: all).
    """
    lines = [
        format_sizing(rec),
        "",
        "Training: instances that fit, cheapest first (MFU "
        + ", ".join(f"{k} {v:.0%}" for k, v in rec["assumptions"]["mfu"].items())
        + f"; cost = (time + {rec['assumptions']['overhead_s']:.0f} s start-up) x nodes x EC2 "
        "on-demand us-east-1)",
        training_table(rec, limit),
        "",
        "Serving: cost per 1M requests (notebook 03's model: estimated, not measured)",
        inference_table(rec),
        "",
        f"cheapest training: {rec['cheapest']}; fastest: {rec['fastest']}; cheapest inference: "
        f"{rec['inference_cheapest']}",
        "recommended for pt2aws as is (cheapest CUDA/CPU instance): "
        + (
            f"{rec['recommended']['nodes']} x {rec['recommended']['instance']} "
            f"({rec['recommended']['strategy']})"
            if rec["recommended"]
            else "none fits"
        ),
        f"prices: {rec['assumptions']['price']}; catalog checked {rec['catalog']['checked']}; "
        f"prices verified against dated sources: {_verified_counts()}; "
        "figures marked verified=false in src/pt2aws/sizing/instances.json must be checked before "
        "quoting",
    ]
    return "\n".join(lines)


def _verified_counts() -> str:
    """``"EC2 20/26, SageMaker hosting 0/6, SageMaker training 0/8"`` (verified / all) from
    :func:`pt2aws.sizing.catalog.price_source_counts`."""
    names = {"ec2": "EC2", "hosting": "SageMaker hosting", "training": "SageMaker training"}
    return ", ".join(
        f"{names.get(use, use)} {c['verified']}/{c['verified'] + c['unverified']}"
        for use, c in price_source_counts().items()
    )
