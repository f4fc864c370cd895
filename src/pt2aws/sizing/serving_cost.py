"""What serving the model costs per 1M inferences: one throughput model for notebooks 00 and 03
and ``pt2aws recommend``.

**Throughput, estimated** (every row, every notebook, same inputs give the same figure)::

    inferences/s = serving peak FLOP/s x utilisation / FLOPs per request
    FLOPs per request = (2 x N + 4 x L x d x T) x T

N the model's non-embedding parameters, L layers, d width, T tokens per request: a forward
pass is a third of the training count ``6N + 12LdT`` per token (Kaplan et al. 2020 §2.1; PaLM
appendix B, as torchtitan's and nanoGPT's MFU count it). The serving peak is per processor
generation (:func:`pt2aws.sizing.catalog.serving_peak`: vCPUs x the fp32 vector peak per vCPU from the
AWS Graviton guide's table of vector units and clocks; for accelerators their bf16 peak). The
utilisation is our assumption (:data:`DEFAULT_UTILISATION`), printed beside every estimate.

**Throughput, measured**, where a load test ran: on AWS the deployed instance gets a row of its
own measured through its endpoint; on the emulator the load test measured *this machine*'s
local server, and the row says so (it has no price: this machine is not an AWS instance).

**Cost per 1M** = USD per hour / (inferences/s x 3600) x 1e6, for an endpoint kept busy.
Prices: the catalog's (:func:`pt2aws.sizing.catalog.price`: SageMaker hosting for ``ml.`` types, EC2
for bare ones; the us-east-1 figure with a note where the region has none), or the AWS Price
List API's where :func:`pt2aws.sizing.pricing.refresh_prices` could read it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pt2aws.sizing import catalog

#: Assumed fraction of the serving peak an endpoint reaches answering requests (our assumption:
#: one or a few short texts per request are latency- and memory-bound). Replace with a load test.
DEFAULT_UTILISATION = 0.10
#: Graviton generations beside a comparable x86 instance (same vCPUs and memory: c6i.xlarge).
DEFAULT_COMPARISON = ("ml.c6g.xlarge", "ml.c7g.xlarge", "ml.c8g.xlarge", "ml.c6i.xlarge")
#: Where SageMaker hosting prices are published (the catalog's ``sagemaker-hosting-pricing``).
PRICING_PAGE = catalog.source("sagemaker-hosting-pricing")["url"]
#: The source of the FLOP count (printed with the estimates).
FLOPS_SOURCE = (
    "Kaplan et al. 2020 §2.1 and PaLM appendix B: a forward pass is a third of training's "
    "6N + 12LdT per token"
)


def forward_flops_per_token(
    non_embedding_parameters: float, num_layers: int, hidden_size: int, tokens: int
) -> float:
    """Forward-pass FLOPs per token: ``2 x N + 4 x L x d x T``.

    ``2N`` for the matrix products of the non-embedding weights (the embedding lookup does no
    matrix multiply), ``4LdT`` for the attention scores and their weighted sum over ``T``
    tokens. The training count per token is three times this (``6N + 12LdT``).

    Args:
        non_embedding_parameters: N (count).
        num_layers: L.
        hidden_size: d.
        tokens: T, tokens per sequence.

    Raises:
        ValueError: a non-positive argument.
    """
    if min(non_embedding_parameters, num_layers, hidden_size, tokens) <= 0:
        raise ValueError(
            "need N, layers, width and tokens > 0, got "
            f"{non_embedding_parameters}, {num_layers}, {hidden_size}, {tokens}"
        )
    return 2.0 * non_embedding_parameters + 4.0 * num_layers * hidden_size * tokens


def flops_per_request(model, tokens: int) -> float:
    """FLOPs of one request of ``tokens`` tokens.

    Args:
        model: anything with ``non_embedding_parameters``, ``num_layers`` and ``hidden_size``
            (:class:`pt2aws.sizing.workload.ModelSpec`).
        tokens: tokens per request (one text, padded).
    """
    per_token = forward_flops_per_token(
        model.non_embedding_parameters, model.num_layers, model.hidden_size, tokens
    )
    return per_token * tokens


def estimate_throughput(
    instance_type: str, model, tokens: int, utilisation: float = DEFAULT_UTILISATION
) -> dict | None:
    """Inferences/s of ``instance_type`` by the model of this module, with its assumption.

    Returns:
        ``{"throughput_per_s", "basis", "peak_flops", "flops_per_request", "utilisation",
        "peak_source"}``, or None when the catalog has no peak for the instance's processor.

    Raises:
        ValueError: a utilisation outside (0, 1].
    """
    if not 0 < utilisation <= 1:
        raise ValueError(f"utilisation must be in (0, 1], got {utilisation}")
    peak = catalog.serving_peak(instance_type)
    if peak is None:
        return None
    flops = flops_per_request(model, tokens)
    mark = "" if peak["source"].get("verified") else ", peak: our derivation"
    return {
        "throughput_per_s": peak["flops"] * utilisation / flops,
        "basis": (
            f"estimate: {peak['basis']} x {utilisation:.0%} assumed / {flops / 1e9:.3g} GFLOP "
            f"per request ({tokens} tokens{mark})"
        ),
        "peak_flops": peak["flops"],
        "flops_per_request": flops,
        "utilisation": utilisation,
        "peak_source": peak["source"]["id"],
    }


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


def _row(instance_type: str, price, throughput: float, basis: str) -> dict:
    peak = catalog.serving_peak(instance_type) or {}
    return {
        "instance_type": instance_type,
        "arch": catalog.architecture(instance_type),
        "processor": peak.get("processor") or catalog.family_processor(instance_type) or "",
        "vcpus": catalog.instance_vcpus(instance_type),
        "usd_per_hour": price.usd_per_hour if price else None,
        "price": price.describe() if price else "no price known",
        "price_verified": bool(price and price.verified),
        "price_source": price.source["id"] if price else None,
        "price_region": price.region if price else None,
        "throughput_per_s": throughput,
        "throughput_basis": basis,
        "usd_per_1m": cost_per_million(price.usd_per_hour, throughput) if price else None,
    }


def cost_rows(
    model,
    tokens: int,
    *,
    instances: tuple[str, ...] = DEFAULT_COMPARISON,
    region: str = catalog.CATALOG_REGION,
    prices: dict | None = None,
    measured: dict[str, float] | None = None,
    utilisation: float = DEFAULT_UTILISATION,
) -> list[dict]:
    """Cost per hour and per 1M inferences for ``instances``: estimates, then measured rows.

    Args:
        model: see :func:`flops_per_request`.
        tokens: tokens per request.
        instances: ``ml.`` types (SageMaker hosting prices) or bare EC2 types (EC2 prices).
        region: prices of this region where known (see :func:`pt2aws.sizing.catalog.price`).
        prices: ``{instance: InstancePrice}`` read elsewhere (the Price List API), preferred.
        measured: ``{instance: inferences/s}`` measured on that instance's endpoint: an extra row
            per instance, after the estimates.
        utilisation: see :func:`estimate_throughput`.

    Returns:
        One dict per row: ``instance_type, arch, processor, vcpus, usd_per_hour, price,
        price_verified, price_source, price_region, throughput_per_s, throughput_basis,
        usd_per_1m`` (``usd_per_hour`` and ``usd_per_1m`` None without a price); instances
        without a peak figure get no estimate row.
    """
    prices = prices or {}
    rows = []
    for name in instances:
        price = prices.get(name) or catalog.price(name, region=region)
        estimate = estimate_throughput(name, model, tokens, utilisation)
        if estimate is not None:
            rows.append(_row(name, price, estimate["throughput_per_s"], estimate["basis"]))
    for name, rate in (measured or {}).items():
        price = prices.get(name) or catalog.price(name, region=region)
        rows.append(_row(name, price, rate, "measured: load test on the endpoint"))
    return rows


def this_machine_row(throughput_per_s: float, what: str) -> dict:
    """A row for a measurement on this machine (no price: it is not an AWS instance).

    Args:
        throughput_per_s: inferences/s measured here.
        what: how it was measured, e.g. ``"load test through the local serving stack"``.
    """
    from pt2aws.env.machine import cpu_name

    return {
        "instance_type": f"this machine ({cpu_name()}, {os.cpu_count()} vCPUs)",
        "arch": os.uname().machine,
        "processor": cpu_name(),
        "vcpus": os.cpu_count(),
        "usd_per_hour": None,
        "price": "not an AWS instance",
        "price_verified": False,
        "price_source": None,
        "price_region": None,
        "throughput_per_s": throughput_per_s,
        "throughput_basis": f"measured here: {what}",
        "usd_per_1m": None,
    }


def format_cost_table(rows: list[dict], notes: list[str] | None = None) -> str:
    """Markdown table of :func:`cost_rows` rows, with the assumption and each price's source."""
    lines = [
        "| instance | arch | processor | vCPUs | USD/hour | inferences/s | USD per 1M | basis |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        usd = "n/a" if r["usd_per_hour"] is None else f"{r['usd_per_hour']:.4f}"
        per_1m = "n/a" if r["usd_per_1m"] is None else f"{r['usd_per_1m']:.4f}"
        kind = "measured" if r["throughput_basis"].startswith("measured") else "estimate"
        lines.append(
            f"| {r['instance_type']} | {r['arch']} | {r['processor']} | {r['vcpus']} | {usd} | "
            f"{r['throughput_per_s']:.1f} | {per_1m} | {kind} |"
        )
    lines += ["", f"Throughput model: {FLOPS_SOURCE}; utilisation our assumption."]
    lines += sorted({f"- {r['instance_type']}: {r['throughput_basis']}" for r in rows})
    lines += sorted({f"- price {r['instance_type']}: {r['price']}" for r in rows if r["price"]})
    lines += [f"- {note}" for note in notes or []]
    return "\n".join(lines)


def tokens_per_request(train_metrics: str | Path) -> int:
    """The length the model was trained at (``metrics.json``'s ``sequence_length``): the
    tokens per request the estimates count (tweets fit in it; longer texts cost more).

    Raises:
        FileNotFoundError: no ``metrics.json`` (run notebook 01 first).
    """
    metrics = json.loads(Path(train_metrics).read_text())
    return int(metrics["sequence_length"]["train_max_length"])


def mean_tokens(model_dir: str | Path, texts: list[str]) -> float:
    """Mean tokens per text of ``texts`` with the model's tokenizer (special tokens included,
    no truncation): the request length a load test of those texts measures.

    Raises:
        ValueError: no texts.
    """
    if not texts:
        raise ValueError("mean_tokens needs at least one text")
    from transformers import AutoTokenizer

    ids = AutoTokenizer.from_pretrained(str(model_dir))(list(texts))["input_ids"]
    return sum(len(i) for i in ids) / len(ids)


def compare_with_sizing(recommendation_json: str | Path, rows: list[dict]) -> str:
    """One line per instance notebook 00 also sized (``recommendation.json``): its estimate
    beside this table's, which the one model makes equal for the same model and length."""
    path = Path(recommendation_json)
    if not path.is_file():
        return f"notebook 00 has not run into this run folder ({path.name} missing)"
    saved = json.loads(path.read_text())["recommendation"]
    sized = {r["instance"]: r for r in saved.get("inference", [])}
    lines = []
    for r in rows:
        other = sized.get(r["instance_type"])
        if other and r["throughput_basis"].startswith("estimate") and r["usd_per_1m"]:
            lines.append(
                f"{r['instance_type']}: notebook 00 {other['throughput_rps']:.1f}/s, "
                f"{other['usd_per_million']:.3f} USD per 1M ({saved['model']['name']}, "
                f"{saved['workload']['seq_len']} tokens); here {r['throughput_per_s']:.1f}/s, "
                f"{r['usd_per_1m']:.3f} USD per 1M"
            )
    return "\n".join(lines) or "notebook 00 sized none of these instances"


def batched_vs_single(batched: dict, load_test: dict) -> str:
    """The measured ratio between batching in process and one text per request (the load test
    through the serving stack), both on this machine when the emulator ran it."""
    rate = batched["throughput_samples_per_second"]
    single = load_test["throughput_per_s"]
    return (
        f"batched {batched['variant']} in this process ({batched['source']}): {rate:.1f}/s; one "
        f"text per request through the serving stack (the load test): {single:.1f}/s: "
        f"{rate / single:.1f}x"
    )


def served_variant(image: str | None, metrics: dict) -> str:
    """The predictor variant an endpoint on ``image`` serves, as notebook 02 measured it.

    Args:
        image: ``"dlc"`` (the AWS image: its handler serves fp32 ``eager``), ``"custom"`` (the
            project's image: ``PT2AWS_VARIANT=auto``, re-measured at start-up; notebook 02's
            ``auto`` choice stands in for it) or ``None`` (``eager``).
        metrics: notebook 02's ``inference/metrics.json`` (may be empty).
    """
    if image == "custom":
        return (metrics.get("auto_variant") or {}).get("variant") or "eager"
    return "eager"


def local_throughput(
    metrics_path: str | Path, model_dir: str | Path, texts: list[str], image: str | None = None
) -> dict:
    """Inferences/s of the served variant batched in this process on this machine: notebook
    02's batch-32 row (:func:`served_variant`), else a quick measurement of fp32 eager here.

    Returns:
        ``{"throughput_samples_per_second": float, "variant": str, "source": str}``.
    """
    metrics_path = Path(metrics_path)
    metrics = json.loads(metrics_path.read_text()) if metrics_path.is_file() else {}
    variant = served_variant(image, metrics)
    row = next((r for r in metrics.get("variants", []) if r.get("variant") == variant), None)
    if row and row.get("samples_per_s"):
        return {
            "throughput_samples_per_second": row["samples_per_s"],
            "variant": variant,
            "source": f"{metrics_path} ({variant}, batch 32)",
        }
    measured = measure_throughput(str(model_dir), texts)
    return {
        "throughput_samples_per_second": measured["throughput_samples_per_second"],
        "variant": "eager",
        "source": f"measured here (fp32 eager, {len(texts)} texts, median of 3)",
    }


def measure_throughput(
    model_dir: str, texts: list[str], *, batch_size: int = 32, repeats: int = 3
) -> dict:
    """Inferences per second of the fp32 eager model on this machine (a quick local figure).

    Timed by :func:`pt2aws.inference.measure.throughput`: one untimed pass over ``texts``, then
    ``repeats`` timed passes; the median rate is reported.

    Returns:
        ``{"throughput_samples_per_second": float, "seconds": [per timed pass], "texts": int,
        "batch_size": int, "vcpus": int, "torch_threads": int}``.
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


def cost_report(
    model,
    tokens: int,
    *,
    region: str = catalog.CATALOG_REGION,
    prices: dict | None = None,
    price_notes: list[str] | None = None,
    record: dict | None = None,
    instances: tuple[str, ...] = DEFAULT_COMPARISON,
    load_test_tokens: float | None = None,
) -> dict:
    """Notebook 03's cost table: the estimates notebook 00 shows, and the load test's row.

    Args:
        model: the deployed model's shape (see :func:`flops_per_request`).
        tokens: tokens per request (the length the model was trained at).
        region: the endpoint's region (prices).
        prices: live prices (:func:`pt2aws.sizing.pricing.refresh_prices`), preferred.
        price_notes: where the prices come from, in words (printed under the table).
        record: :func:`pt2aws.aws.endpoint.deployment_record`'s answer; its load test gives
            the deployed instance a measured row on AWS, or this machine's row on the emulator.
        instances: the rows to estimate.
        load_test_tokens: mean tokens per text of the load test's requests
            (:func:`mean_tokens`), stated in the measured row's basis beside the ``tokens`` the
            estimates count: a load test of short samples is not a request of ``tokens`` tokens.

    Returns:
        ``{"rows": [...] (:func:`cost_rows`, then the measured row), "table": markdown,
        "measured": the measured row or None}``.
    """
    load = (record or {}).get("load_test")
    measured_row = None
    rows = cost_rows(model, tokens, instances=instances, region=region, prices=prices)
    if load and load.get("requests"):
        rate = load["throughput_per_s"]
        if record["target"] == "aws":
            measured = {record["instance_type"]: rate}
            measured_row = cost_rows(
                model, tokens, instances=(), region=region, prices=prices, measured=measured
            )[0]
        else:
            what = f"load test through {record['answer_source']}, one text per request"
            measured_row = this_machine_row(rate, what)
        if load_test_tokens is not None:
            measured_row["throughput_basis"] += (
                f" ({load_test_tokens:.0f} tokens per request on average; the estimates count "
                f"{tokens})"
            )
        rows.append(measured_row)
    return {
        "rows": rows,
        "table": format_cost_table(rows, price_notes),
        "measured": measured_row,
    }
