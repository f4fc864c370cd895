"""Rank instances by estimated training cost and time, and by inference cost per 1M requests.

Formulas (each stated again where it is used):

* **Training compute**: ``(6·N + 12·L·d·T) · tokens`` FLOPs, ``N`` the non-embedding parameters,
  ``12·L·d·T`` the attention scores and weighted sum (Kaplan et al., "Scaling Laws for Neural
  Language Models", 2020, section 2.1; PaLM appendix B; the formula torchtitan's and nanoGPT's MFU
  use: :func:`pt2aws.train.throughput.training_flops_per_token`, the same function as the training
  run's ``mfu``); the forward's share is 8/6 more with activation recomputation, which repeats
  it. Time = FLOPs / (nodes · peak · MFU), the peak of the precision each row assumes (its
  ``peak_precision``, printed in the training table): bf16 on accelerators, fp32 on CPUs. A CPU
  row is the fp32 case on purpose: the recipe trains in bf16 only on a CPU with native bf16
  (Graviton3+, Sapphire Rapids, AVX512-BF16) and for a profile that measured it faster
  (``local``), and the catalog has no CPU bf16 peak; such a CPU trains faster than its row says.
  The MFU (model FLOPs utilisation) is an assumption (:data:`DEFAULT_MFU`), stated in every
  result.
* **Training cost** = (time + paid start-up per node) / 3600 · nodes · EC2 on-demand USD/hour
  (the region's price where the catalog has one, else us-east-1's, said).
* **Serving cost** per 1M requests: the one throughput model of notebooks 00 and 03
  (:mod:`pt2aws.sizing.serving_cost`): peak FLOP/s per processor generation x an assumed
  utilisation / ``(2N + 4LdT) x T`` FLOPs per request, SageMaker hosting prices for ``ml.`` types.

Peaks and prices come from the catalog (:mod:`pt2aws.sizing.catalog`); which parallelism fits
from :mod:`pt2aws.sizing.strategy`. :func:`recommend` puts it all together for notebook
00 and ``pt2aws recommend``.
"""

from __future__ import annotations

import dataclasses

from pt2aws.sizing import serving_cost
from pt2aws.sizing.catalog import (
    CATALOG_REGION,
    InstanceType,
    availability,
    catalog_meta,
    ec2_price,
    get_instance,
    load_catalog,
    serving_peak,
)
from pt2aws.sizing.memory import (
    MEMORY_RESERVE,
    inference_memory,
    training_memory,
    usable_bytes,
)
from pt2aws.sizing.strategy import plan_training, workload_class
from pt2aws.sizing.workload import ModelSpec, Workload, model_spec
from pt2aws.train.throughput import training_flops_per_token

#: Assumed model FLOPs utilisation for training by device kind (our assumptions, not
#: measurements: PaLM reports 46 % for a 540B model on TPU v4 (Chowdhery et al. 2022, table 3);
#: a 125M-parameter fine-tune at sequence 128 reaches less, so 35 % on GPUs; Neuron and CPUs lower).
DEFAULT_MFU = {"gpu": 0.35, "trainium": 0.30, "inferentia": 0.30, "cpu": 0.10}
#: Assumed utilisation of the serving peak (one figure for every kind: the serving cost model's).
DEFAULT_INFERENCE_UTILISATION = serving_cost.DEFAULT_UTILISATION
#: Paid start-up per training run and node, seconds: boot, DLC image pull, data and model load
#: (our assumption; it keeps tiny workloads from favouring the largest instances).
DEFAULT_OVERHEAD_S = 600.0
#: Instances :func:`rank_inference` compares by default: notebook 03's SageMaker endpoints
#: (Graviton2/3/4 and a comparable x86 one, hosting prices), then one GPU / Inferentia size per
#: family at its EC2 price (the catalog has no SageMaker hosting price for them).
DEFAULT_INFERENCE_INSTANCES = (
    *serving_cost.DEFAULT_COMPARISON,
    "g5.xlarge",
    "g6.xlarge",
    "g6e.xlarge",
    "inf2.xlarge",
)
#: Kinds pt2aws's training script runs on as is (CUDA or CPU; Neuron needs a port).
RUNNABLE_KINDS = ("gpu", "cpu")


def training_flops(spec: ModelSpec, tokens: float, seq_len: float) -> float:
    """Training FLOPs of ``tokens`` tokens in sequences of ``seq_len``: ``(6·N + 12·L·d·T)·tokens``.

    Per token: :func:`pt2aws.train.throughput.training_flops_per_token` (N non-embedding).
    """
    return tokens * training_flops_per_token(
        spec.non_embedding_parameters, spec.num_layers, spec.hidden_size, seq_len
    )


def training_peak_tflops(it: InstanceType) -> tuple[float, str]:
    """``(peak TFLOP/s, precision)`` a training run is assumed to get on ``it``: fp32 on CPUs,
    else bf16.

    A CPU instance counts at the catalog's fp32 vector peak (:func:`pt2aws.sizing.catalog.serving_peak`'s
    figure for a CPU family): the fp32 case, as the catalog has no CPU bf16 peak. The recipe's
    ``--bf16 auto`` trains in bf16 on a CPU with native bf16 when the profile measured it faster
    (``local``: :attr:`pt2aws.config.Profile.cpu_bf16`), so there the estimate is pessimistic.
    Accelerators count at their dense bf16 peak.
    """
    if it.kind == "cpu":
        fp32 = serving_peak(it.name)
        if fp32 is not None and fp32["precision"] == "fp32":
            return fp32["flops"] / 1e12, "fp32"
    return it.peak_bf16_tflops, "bf16"


def _per_kind(value: dict | float | None, defaults: dict) -> dict:
    """A ``{kind: value}`` dict from None (the defaults), one number for every kind, or a dict."""
    if value is None:
        return dict(defaults)
    if isinstance(value, (int, float)):
        return dict.fromkeys(defaults, float(value))
    return value


def _names(instances: list[str] | None) -> set[str]:
    return {n.removeprefix("ml.") for n in instances or ()}


def _notes(it: InstanceType, use: str) -> str:
    notes = []
    if it.kind in ("trainium", "inferentia"):
        notes.append("needs the AWS Neuron SDK (torch-neuronx); pt2aws runs CUDA/CPU as is")
    if it.kind == "cpu":
        notes.append("CPU peak is our estimate")
    key = "sagemaker_training" if use == "training" else "sagemaker_hosting"
    if not availability(it.name)[key]:
        notes.append(f"EC2 only (not a SageMaker {use} type)")
    return "; ".join(notes)


def _mark(rows: list[dict], time_key: str, cost_key: str = "cost_usd") -> None:
    """Flag the cheapest (priced rows only) and the fastest row; sort by cost, then time."""
    priced = [r for r in rows if r[cost_key] is not None]
    if priced:
        min(priced, key=lambda r: (r[cost_key], r[time_key]))["cheapest"] = True
    if rows:
        min(rows, key=lambda r: r[time_key])["fastest"] = True
    rows.sort(key=lambda r: (r[cost_key] is None, r[cost_key] or 0.0, r[time_key]))


def _training_row(
    it: InstanceType,
    plan: dict,
    flops: float,
    mfu: float,
    overhead_s: float,
    region: str = CATALOG_REGION,
) -> dict:
    """One row of :func:`rank_training` for a plan of :func:`plan_training`."""
    work = flops * (8 / 6 if plan["recompute"] else 1.0)  # recomputation repeats the forward
    peak, precision = training_peak_tflops(it)
    time_s = work / (plan["nodes"] * peak * 1e12 * mfu)
    found = ec2_price(it.name, region)
    price = found.usd_per_hour if found else None
    return {
        "instance": it.name,
        "kind": it.kind,
        "accelerators": f"{it.accelerator_count} x {it.accelerator}"
        if it.accelerator
        else f"{it.vcpus} vCPU {it.cpu}",
        "nodes": plan["nodes"],
        "strategy": plan["strategy"],
        "memory_per_device_gb": plan["memory_per_device_bytes"] / 1e9,
        "peak_tflops": peak * plan["nodes"],
        "peak_precision": precision,
        "mfu": mfu,
        "time_s": time_s,
        "price_usd_per_hour": price,
        "price_region": found.region if found else None,
        "cost_usd": None if price is None else (time_s + overhead_s) / 3600 * plan["nodes"] * price,
        "verified": it.verified,
        "note": _notes(it, "training"),
        "cheapest": False,
        "fastest": False,
    }


def rank_training(
    model,
    train_tokens: float,
    epochs: float = 1.0,
    micro_batch: int = 32,
    seq_len: int = 128,
    precision: str = "mixed",
    mfu: dict | float | None = None,
    instances: list[str] | None = None,
    overhead_s: float = DEFAULT_OVERHEAD_S,
    region: str = CATALOG_REGION,
) -> list[dict]:
    """Instances that fit training, with estimated time and cost, sorted by cost then time.

    time_s = (6·N + 12·L·d·seq_len) · train_tokens · epochs / (nodes · peak · MFU), N the
    non-embedding parameters, the peak of the run's precision (:func:`training_peak_tflops`);
    8/6 of that with activation recomputation, which repeats the forward pass;
    cost_usd = (time_s + overhead_s) / 3600 · nodes · price_usd_per_hour. ``time_s`` is compute
    only (no start-up, data loading or evaluation); ``overhead_s`` is the paid start-up per node;
    scaling over nodes is assumed linear.

    Args:
        model: anything :func:`model_spec` accepts.
        train_tokens: tokens in one epoch of the training set (examples x tokens per example).
        epochs: passes over the data.
        micro_batch, seq_len, precision: see :func:`training_memory`.
        mfu: assumed model FLOPs utilisation: a number for all, or per kind; default
            :data:`DEFAULT_MFU`.
        instances: restrict to these names (default: the whole catalog).
        overhead_s: paid start-up per node, seconds (default :data:`DEFAULT_OVERHEAD_S`).
        region: EC2 prices of this region where the catalog has them, else us-east-1's.

    Returns:
        Rows with ``instance, kind, accelerators, nodes, strategy, memory_per_device_gb,
        peak_tflops, peak_precision, mfu, time_s, price_usd_per_hour, price_region, cost_usd,
        verified, note, cheapest, fastest``; instances that do not fit are left out; ``cost_usd``
        is None where the price
        is unknown. ``cheapest`` / ``fastest`` mark the minimum cost / time (among priced rows
        for cost).

    Raises:
        ValueError: non-positive tokens or epochs.
    """
    if train_tokens <= 0 or epochs <= 0:
        raise ValueError(
            f"train_tokens ({train_tokens}) and epochs ({epochs}) must be positive: tokens = "
            "training examples x tokens per example"
        )
    spec = model_spec(model)
    flops = training_flops(spec, train_tokens * epochs, seq_len)
    mfus, wanted = _per_kind(mfu, DEFAULT_MFU), _names(instances)
    rows = []
    for it in load_catalog():
        if wanted and it.name not in wanted:
            continue
        plan = plan_training(spec, it, micro_batch, seq_len, precision)
        if plan is not None:
            rows.append(_training_row(it, plan, flops, mfus[it.kind], overhead_s, region))
    _mark(rows, "time_s")
    return rows


def rank_inference(
    model,
    seq_len: int = 128,
    throughput_rps: dict | None = None,
    utilisation: float | None = None,
    precision: str = "bf16",
    instances: list[str] | None = None,
    region: str = CATALOG_REGION,
    prices: dict | None = None,
) -> list[dict]:
    """Cost per 1M requests per instance: Graviton generations vs x86 vs GPU vs Inferentia.

    The rows are :func:`pt2aws.sizing.serving_cost.cost_rows`' (the estimate notebook 03 shows
    for the same instance); instances whose memory cannot hold the weights, or without a
    price, are left out.

    Args:
        model: anything :func:`model_spec` accepts.
        seq_len: tokens per request.
        throughput_rps: measured requests/s by instance name: an extra, measured row each.
        utilisation: assumed fraction of the serving peak (default
            :data:`pt2aws.sizing.serving_cost.DEFAULT_UTILISATION`).
        precision: weights' precision for the memory check (see :func:`inference_memory`).
        instances: names to compare (default :data:`DEFAULT_INFERENCE_INSTANCES`; ``ml.``
            names are SageMaker endpoints at hosting prices, bare names EC2 instances).
        region: prices of this region where known.
        prices: prices read elsewhere (the AWS Price List API), preferred over the catalog's.

    Returns:
        Rows with ``instance, processor, arch, throughput_rps, throughput_source,
        price_usd_per_hour, price, usd_per_million, latency_floor_ms, note, cheapest, fastest``
        sorted by cost; ``fastest`` is the highest throughput.
    """
    spec = model_spec(model)
    need = inference_memory(spec, 1, seq_len, precision)["total"]
    names = list(instances or DEFAULT_INFERENCE_INSTANCES)
    fits = [n for n in names if _holds(n, need)]
    rows = []
    for r in serving_cost.cost_rows(
        spec,
        seq_len,
        instances=tuple(fits),
        region=region,
        prices=prices,
        measured=throughput_rps,
        utilisation=utilisation or DEFAULT_INFERENCE_UTILISATION,
    ):
        if r["usd_per_1m"] is None:
            continue
        rps = r["throughput_per_s"]
        rows.append(
            {
                "instance": r["instance_type"],
                "processor": r["processor"],
                "arch": r["arch"],
                "throughput_rps": rps,
                "throughput_source": r["throughput_basis"],
                "price_usd_per_hour": r["usd_per_hour"],
                "price": r["price"],
                "usd_per_million": r["usd_per_1m"],
                "latency_floor_ms": 1000 / rps,
                "note": _serving_note(r["instance_type"]),
                "cheapest": False,
                "fastest": False,
                "time_s": -rps,  # for _mark: fastest = highest throughput; removed below
            }
        )
    _mark(rows, "time_s", "usd_per_million")
    for r in rows:
        del r["time_s"]
    return rows


def _holds(name: str, need_bytes: float) -> bool:
    """Whether ``name``'s device memory holds ``need_bytes`` (True for a type without a row)."""
    try:
        return need_bytes <= usable_bytes(get_instance(name))
    except KeyError:
        return True


def _serving_note(name: str) -> str:
    """Neuron needs a port; a bare name is an EC2 price (no SageMaker hosting price known)."""
    notes = []
    bare = name.removeprefix("ml.")
    try:
        it = get_instance(bare)
    except KeyError:
        it = None
    if it is not None and it.kind in ("trainium", "inferentia"):
        notes.append("needs the AWS Neuron SDK (torch-neuronx); pt2aws runs CUDA/CPU as is")
    if not name.startswith("ml."):
        notes.append("EC2 price (no SageMaker hosting price in the catalog)")
    if not availability(bare)["sagemaker_hosting"]:
        notes.append("EC2 only (not a SageMaker hosting type)")
    return "; ".join(notes)


def _model_summary(spec: ModelSpec) -> dict:
    return {
        "name": spec.name,
        "parameters": spec.parameters,
        "hidden_size": spec.hidden_size,
        "num_layers": spec.num_layers,
        "num_heads": spec.num_heads,
        "embedding_parameters": spec.embedding_parameters,
    }


def _workload_summary(workload: Workload, spec: ModelSpec) -> dict:
    fields = {k: v for k, v in dataclasses.asdict(workload).items() if k != "model"}
    return fields | {
        "train_tokens_per_epoch": workload.train_tokens,
        "training_flops": training_flops(
            spec, workload.train_tokens * workload.epochs, workload.seq_len
        ),
    }


def _assumptions(mfu: dict | float | None, overhead_s: float, region: str) -> dict:
    return {
        "mfu": DEFAULT_MFU if mfu is None else mfu,
        "inference_utilisation": DEFAULT_INFERENCE_UTILISATION,
        "memory_reserve": MEMORY_RESERVE,
        "overhead_s": overhead_s,
        "time": "(6N + 12LdT) x tokens / (nodes x peak x MFU), N the non-embedding parameters; "
        "peak of the precision each row assumes (bf16 on accelerators, fp32 on CPUs); compute "
        f"only; cost adds {overhead_s:.0f} s of paid start-up per node; linear scaling over nodes",
        "serving": f"peak per processor generation x {DEFAULT_INFERENCE_UTILISATION:.0%} (our "
        f"assumption) / (2N + 4LdT) x T FLOPs per request ({serving_cost.FLOPS_SOURCE})",
        "price": (
            "us-east-1"
            if region == CATALOG_REGION
            else f"{region} where the catalog has a figure, else us-east-1 (each row says)"
        )
        + "; training: EC2 on-demand; serving: SageMaker hosting for ml.* (it costs more than "
        "EC2 for the same hardware)",
    }


def _pick(rows: list[dict], flag: str) -> str | None:
    return next((r["instance"] for r in rows if r[flag]), None)


def recommend(
    workload: Workload,
    mfu: dict | float | None = None,
    overhead_s: float = DEFAULT_OVERHEAD_S,
    region: str = CATALOG_REGION,
    prices: dict | None = None,
) -> dict:
    """Memory breakdown, workload class, training ranking and inference ranking for ``workload``.

    Args:
        workload: what to size (model, examples, sequence length, epochs, batch, precision).
        mfu: assumed MFU, one number or per kind (default :data:`DEFAULT_MFU`).
        overhead_s: paid start-up per node, seconds.
        region: prices of this region where known (else us-east-1's, said in each row).
        prices: serving prices read from the AWS Price List API
            (:func:`pt2aws.sizing.pricing.refresh_prices`), preferred over the catalog's.

    Returns:
        A JSON-serialisable dict: ``model`` (name, parameters, shape), ``workload``, ``memory``
        (training per device on one device, inference), ``class``, ``training`` (rows of
        :func:`rank_training`), ``inference`` (rows of :func:`rank_inference`), ``cheapest`` /
        ``fastest`` / ``inference_cheapest`` (instance names), ``recommended`` (the cheapest
        priced row pt2aws runs as is: ``{"instance", "nodes", "strategy"}`` or None),
        ``assumptions`` and ``catalog`` (meta).
    """
    spec = model_spec(workload.model)
    w = workload
    training = rank_training(
        spec,
        w.train_tokens,
        w.epochs,
        w.micro_batch,
        w.seq_len,
        w.precision,
        mfu=mfu,
        overhead_s=overhead_s,
        region=region,
    )
    inference = rank_inference(spec, w.seq_len, region=region, prices=prices)
    runnable = (r for r in training if r["kind"] in RUNNABLE_KINDS and r["cost_usd"] is not None)
    return {
        "model": _model_summary(spec),
        "workload": _workload_summary(w, spec),
        "memory": {
            "training_one_device": training_memory(spec, w.micro_batch, w.seq_len, w.precision),
            "inference_bf16": inference_memory(spec, 1, w.seq_len),
        },
        "class": workload_class(spec, w.micro_batch, w.seq_len, w.precision),
        "training": training,
        "inference": inference,
        "cheapest": _pick(training, "cheapest"),
        "fastest": _pick(training, "fastest"),
        "inference_cheapest": _pick(inference, "cheapest"),
        "recommended": next(
            ({k: r[k] for k in ("instance", "nodes", "strategy")} for r in runnable), None
        ),
        "region": region,
        "assumptions": _assumptions(mfu, overhead_s, region),
        "catalog": catalog_meta(),
    }
