"""The tables notebooks 00 and 03 and ``pt2aws recommend`` show, as pandas DataFrames (numbers
rounded, an unknown figure ``-``), and the recommendation as text."""

from __future__ import annotations

import pandas as pd

from pt2aws.report import markdown_table
from pt2aws.sizing import catalog, pricing, serving_cost


def _frame(records: list[dict] | pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(records).astype(object).where(lambda df: df.notna(), "-")


def duration(seconds: float) -> str:
    """``"<1 s"``, ``"42 s"``, ``"12.5 min"``, ``"3.1 h"``."""
    if seconds < 1:
        return "<1 s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def _marks(row: dict) -> str:
    return " ".join(m for m in ("cheapest", "fastest") if row[m])


def training_frame(rec: dict, limit: int | None = None) -> pd.DataFrame:
    """The first ``limit`` training rows of a :func:`~pt2aws.sizing.ranking.recommend` result."""
    names = dict(
        memory_per_device_gb="GB/device", peak_precision="peak", time_s="time", cost_usd="USD"
    )
    columns = ["instance", "accelerators", "nodes", "strategy", *names, "best", "note"]
    rows = rec["training"][:limit]
    frame = pd.DataFrame(rows, columns=columns).rename(columns=names)
    frame = frame.assign(time=frame["time"].map(duration), best=[_marks(r) for r in rows])
    return _frame(frame.round({"GB/device": 2, "USD": 2}))


def one_per_device(rows: list[dict]) -> list[dict]:
    """The cheapest training row of each accelerator, and of all CPUs (fewer plot labels)."""
    device = {}
    for r in rows:
        device.setdefault("cpu" if r["kind"] == "cpu" else r["accelerators"].split(" x ")[-1], r)
    return list(device.values())


def _usd(usd: float | None):
    """4 decimals, ``<0.0001`` below, None for no price."""
    return None if usd is None else "<0.0001" if usd < 1e-4 else round(usd, 4)


def cost_frame(rows: list[dict]) -> pd.DataFrame:
    """Serving cost rows (:mod:`pt2aws.sizing.serving_cost`'s schema), the anchor of each."""
    return _frame([{"instance": r["instance"], "processor": r["processor"], "vCPUs": r["vcpus"],
                    "inferences/s": round(r["inferences_per_s"], 1), "USD/hour": r["usd_per_hour"],
                    "USD per 1M": _usd(r["usd_per_1m"]),
                    **({"best": _marks(r)} if "cheapest" in r else {}), "anchor": r["anchor"]}
                   for r in rows])  # fmt: skip


def cost_notes(rows: list[dict]) -> str:
    """The lines under a cost table: the request the estimated rows serve, each fit once, each
    row's arithmetic, and the published Graviton3 vs x86 comparison beside these rows."""
    estimated = [r for r in rows if r["anchor"] != "measured: load test"]
    lines = [f"estimated rows: {q}, each fit in its published configuration (below)"
             for q in dict.fromkeys(r["request"] for r in estimated)]  # fmt: skip
    lines += list(dict.fromkeys(r["anchor_detail"] for r in rows))
    lines += [f"- {r['instance']}: {r['basis']}; {r['price']}" for r in rows]
    return "\n".join(lines + [serving_cost.published_comparison(rows) or ""]).rstrip()


def catalog_frame(region: str = pricing.CATALOG_REGION) -> pd.DataFrame:
    """The catalog: hardware, peak, EC2 price in ``region`` (or us-east-1's, said) and source."""
    records = []
    for it in catalog.load_catalog():
        price, src = pricing.price(it.name, "ec2", region), it.sources["price"]
        where = f" ({price.region})" if price and price.region != region else ""
        devices = f"{it.accelerator_count} x {it.accelerator}" if it.accelerator else it.cpu
        mark = "verified" if src["verified"] else "UNVERIFIED"
        records.append({
            "instance": it.name, "kind": it.kind, "vCPUs": it.vcpus, "accelerators": devices,
            "peak TFLOP/s": f"{it.peak_tflops:.4g} {it.peak_precision}",
            "USD/hour": f"{price.usd_per_hour:g}{where}" if price else "none known",
            "price source": f"{src['id']} {src['date']}, {mark}",
        })  # fmt: skip
    return _frame(records)


def markdown(frame: pd.DataFrame) -> str:
    """A DataFrame as a Markdown table (for files: the run's summary embeds it)."""
    return "\n".join(markdown_table(frame.columns, frame.values))


def format_sizing(rec: dict) -> str:
    """Model, data, memory (GB) and workload class: the head of a recommendation."""
    m, w, c = rec["model"], rec["workload"], rec["class"]
    mem, inf = rec["memory"]["training_one_device"], rec["memory"]["inference_bf16"]
    gb = {k: f"{v / 1e9:.2f}" for k, v in mem.items()}
    return f"""model {m["name"]}: {m["parameters"]:,} parameters (h={m["hidden_size"]}, \
L={m["num_layers"]}, a={m["num_heads"]})
data: {w["train_examples"]:,} examples x {w["seq_len"]} tokens x {w["epochs"]:g} epochs; \
{w["training_flops"]:.3g} FLOPs ((6N + 12LdT) x tokens, N non-embedding)
training memory on one device ({w["precision"]}, micro-batch {w["micro_batch"]}): weights \
{gb["weights"]} + gradients {gb["gradients"]} + AdamW {gb["optimizer"]} + activations \
{gb["activations"]} = {gb["total"]} GB
inference memory (bf16, batch 1): {inf["total"] / 1e9:.3f} GB
workload class: {c["class"]} ({c["reason"]}) -> {c["strategy"]}"""


def training_summary(rec: dict, compare: str = "p4d.24xlarge") -> str:
    """The cheapest, the fastest and the source blog's ``compare`` row, with time and cost."""

    def describe(label: str, r: dict | None) -> str:
        if r is None:
            return f"{label}: does not fit"
        cost = "no price" if r["cost_usd"] is None else f"{r['cost_usd']:.2f} USD"
        return f"{label}: {r['nodes']} x {r['instance']} ({duration(r['time_s'])}, {cost})"

    rows = rec["training"]
    return "; ".join(
        describe(label, next((r for r in rows if test(r)), None))
        for label, test in (("cheapest", lambda r: r["cheapest"]),
                            ("fastest (compute time)", lambda r: r["fastest"]),
                            (compare, lambda r: r["instance"] == compare))
    )  # fmt: skip


def format_recommendation(rec: dict, limit: int | None = 12) -> str:
    """What ``pt2aws recommend`` prints: the head, both rankings, the anchors, the choice."""
    a, choice, rows = rec["assumptions"], rec["recommended"], rec["inference"]
    serving = cost_frame(rows).to_string(index=False) if rows else "no instance holds the weights"
    chosen = f"{choice['nodes']} x {choice['instance']} ({choice['strategy']})" if choice else None
    return f"""{format_sizing(rec)}

Training, cheapest first (MFU {a["mfu"]}; cost = (time + {a["overhead_s"]:.0f} s start-up) x \
nodes x EC2 on-demand):
{training_frame(rec, limit).to_string(index=False)}
{training_summary(rec)}

Serving, cost per 1M requests (estimated: one model, fitted per processor family; the fits below):
{serving}
{cost_notes(rows)}

recommended for pt2aws as is: {chosen or "none fits"}"""
