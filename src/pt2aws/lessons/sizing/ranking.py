"""Rank instances by estimated training cost and time, and by inference cost per 1M requests.

Formulas (each stated again where it is used):

* **Training compute**: ``(6·N + 12·L·d·T) · tokens`` FLOPs, ``N`` the non-embedding parameters,
  ``12·L·d·T`` the attention scores and weighted sum (Kaplan et al., "Scaling Laws for Neural
  Language Models", 2020, section 2.1; PaLM appendix B; the formula torchtitan's and nanoGPT's MFU
  use: :func:`pt2aws.train.throughput.training_flops_per_token`, the same function as the training
  run's ``mfu``); the forward's share is 8/6 more with activation recomputation, which repeats
  it. Time = FLOPs / (nodes · peak · MFU), the peak of the precision the run computes in: bf16 on
  accelerators, fp32 on CPUs (the recipe trains CPUs in fp32: ``--bf16 auto`` is off there). The
  MFU (model FLOPs utilisation) is an assumption (:data:`DEFAULT_MFU`), stated in every result.
* **Training cost** = (time + paid start-up per node) / 3600 · nodes · EC2 on-demand USD/hour.
* **Inference compute**: ``2 · parameters · tokens`` FLOPs per request (same source), at an
  assumed utilisation of peak (:data:`DEFAULT_INFERENCE_UTILISATION`) unless measured.

Peaks and prices come from the catalog (:mod:`pt2aws.catalog`); which parallelism fits
from :mod:`pt2aws.lessons.sizing.strategy`. :func:`recommend` puts it all together for notebook
00 and ``pt2aws recommend``.
"""

from __future__ import annotations

import dataclasses

from pt2aws.catalog import (
    InstanceType,
    architecture,
    availability,
    catalog_meta,
    load_catalog,
)
from pt2aws.lessons.sizing.memory import (
    MEMORY_RESERVE,
    inference_memory,
    training_memory,
    usable_bytes,
)
from pt2aws.lessons.sizing.strategy import plan_training, workload_class
from pt2aws.lessons.sizing.workload import ModelSpec, Workload, model_spec
from pt2aws.train.throughput import training_flops_per_token

#: Assumed model FLOPs utilisation for training by device kind (our assumptions, not
#: measurements: PaLM reports 46 % for a 540B model on TPU v4 (Chowdhery et al. 2022, table 3);
#: a 125M-parameter fine-tune at sequence 128 reaches less, so 35 % on GPUs; Neuron and CPUs lower).
DEFAULT_MFU = {"gpu": 0.35, "trainium": 0.30, "inferentia": 0.30, "cpu": 0.10}
#: Assumed utilisation of peak for online inference (batch of 1 to a few requests is memory- and
#: latency-bound). Replace with measured throughput (notebook 02, benchmarks/) where you have it.
DEFAULT_INFERENCE_UTILISATION = {"gpu": 0.10, "trainium": 0.10, "inferentia": 0.10, "cpu": 0.10}
#: Paid start-up per training run and node, seconds: boot, DLC image pull, data and model load
#: (our assumption; it keeps tiny workloads from favouring the largest instances).
DEFAULT_OVERHEAD_S = 600.0
#: Instances :func:`rank_inference` compares by default: one small size per family.
DEFAULT_INFERENCE_INSTANCES = (
    "c7g.xlarge",
    "c8g.xlarge",
    "m7g.xlarge",
    "m8g.xlarge",
    "c7i.xlarge",
    "m7i.xlarge",
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
    """``(peak TFLOP/s, precision)`` a training run gets on ``it``: fp32 on CPUs, else bf16.

    The recipe trains CPUs in fp32 (``--bf16 auto`` is off there), so a CPU instance counts at
    the catalog's fp32 vector peak (:func:`pt2aws.catalog.serving_peak`'s figure for a CPU
    family); accelerators at their dense bf16 peak.
    """
    if it.kind == "cpu":
        try:
            from pt2aws.catalog import serving_peak
        except ImportError:  # TODO(merge): the catalog's fp32 CPU peaks are on branch aws
            serving_peak = None
        fp32 = serving_peak(it.name) if serving_peak else None
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
    it: InstanceType, plan: dict, flops: float, mfu: float, overhead_s: float
) -> dict:
    """One row of :func:`rank_training` for a plan of :func:`plan_training`."""
    work = flops * (8 / 6 if plan["recompute"] else 1.0)  # recomputation repeats the forward
    peak, precision = training_peak_tflops(it)
    time_s = work / (plan["nodes"] * peak * 1e12 * mfu)
    price = it.price_usd_per_hour
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

    Returns:
        Rows with ``instance, kind, accelerators, nodes, strategy, memory_per_device_gb,
        peak_tflops, peak_precision, mfu, time_s, price_usd_per_hour, cost_usd, verified, note,
        cheapest,
        fastest``; instances that do not fit are left out; ``cost_usd`` is None where the price
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
            rows.append(_training_row(it, plan, flops, mfus[it.kind], overhead_s))
    _mark(rows, "time_s")
    return rows


def rank_inference(
    model,
    seq_len: int = 128,
    throughput_rps: dict | None = None,
    utilisation: dict | float | None = None,
    precision: str = "bf16",
    instances: list[str] | None = None,
) -> list[dict]:
    """Cost per 1M requests per instance: Graviton vs x86 vs GPU vs Inferentia.

    Throughput is either given (``throughput_rps``: measured requests/s per instance) or estimated
    as ``peak_bf16 · utilisation / (2 · params · seq_len)`` requests/s, with the utilisation stated
    (default :data:`DEFAULT_INFERENCE_UTILISATION`). cost per 1M requests =
    ``price_usd_per_hour / (3600 · rps) · 1e6`` (EC2 on-demand prices). Instances whose device
    memory cannot hold the weights, or without a price, are left out.

    Args:
        model: anything :func:`model_spec` accepts.
        seq_len: tokens per request.
        throughput_rps: measured requests/s by instance name (``ml.`` prefix accepted).
        utilisation: assumed fraction of peak, one number or per kind.
        precision: weights' precision for the memory check (see :func:`inference_memory`).
        instances: names to compare (default :data:`DEFAULT_INFERENCE_INSTANCES`).

    Returns:
        Rows with ``instance, kind, processor, arch, throughput_rps, throughput_source,
        price_usd_per_hour, usd_per_million, latency_floor_ms, note, cheapest, fastest``
        sorted by cost; ``fastest`` is the highest throughput.
    """
    spec = model_spec(model)
    need = inference_memory(spec, 1, seq_len, precision)["total"]
    utils = _per_kind(utilisation, DEFAULT_INFERENCE_UTILISATION)
    measured = {k.removeprefix("ml."): v for k, v in (throughput_rps or {}).items()}
    wanted = _names(instances) or set(DEFAULT_INFERENCE_INSTANCES)
    rows = []
    for it in load_catalog():
        if it.name not in wanted or it.price_usd_per_hour is None or need > usable_bytes(it):
            continue
        if it.name in measured:
            rps, src = float(measured[it.name]), "measured (given)"
        else:
            u = utils[it.kind]
            rps = it.peak_bf16_tflops * 1e12 * u / (2 * spec.parameters * seq_len)
            src = f"estimate: peak x {u:.0%} / (2 x params x {seq_len} tokens)"
        rows.append(
            {
                "instance": it.name,
                "kind": it.kind,
                "processor": it.accelerator or it.cpu,
                "arch": architecture(it.name),
                "throughput_rps": rps,
                "throughput_source": src,
                "price_usd_per_hour": it.price_usd_per_hour,
                "usd_per_million": it.price_usd_per_hour / (3600 * rps) * 1e6,
                "latency_floor_ms": 1000 / rps,
                "note": _notes(it, "hosting"),
                "cheapest": False,
                "fastest": False,
                "time_s": -rps,  # for _mark: fastest = highest throughput; removed below
            }
        )
    _mark(rows, "time_s", "usd_per_million")
    for r in rows:
        del r["time_s"]
    return rows


def _model_summary(spec: ModelSpec) -> dict:
    return {
        "name": spec.name,
        "parameters": spec.parameters,
        "hidden_size": spec.hidden_size,
        "num_layers": spec.num_layers,
        "num_heads": spec.num_heads,
    }


def _workload_summary(workload: Workload, spec: ModelSpec) -> dict:
    fields = {k: v for k, v in dataclasses.asdict(workload).items() if k != "model"}
    return fields | {
        "train_tokens_per_epoch": workload.train_tokens,
        "training_flops": training_flops(
            spec, workload.train_tokens * workload.epochs, workload.seq_len
        ),
    }


def _assumptions(mfu: dict | float | None, overhead_s: float) -> dict:
    return {
        "mfu": DEFAULT_MFU if mfu is None else mfu,
        "inference_utilisation": DEFAULT_INFERENCE_UTILISATION,
        "memory_reserve": MEMORY_RESERVE,
        "overhead_s": overhead_s,
        "time": "6 x params x tokens / (nodes x peak bf16 x MFU), compute only; cost adds "
        f"{overhead_s:.0f} s of paid start-up per node; linear scaling over nodes",
        "price": "EC2 on-demand us-east-1; SageMaker ml.* costs more",
    }


def _pick(rows: list[dict], flag: str) -> str | None:
    return next((r["instance"] for r in rows if r[flag]), None)


def recommend(
    workload: Workload, mfu: dict | float | None = None, overhead_s: float = DEFAULT_OVERHEAD_S
) -> dict:
    """Memory breakdown, workload class, training ranking and inference ranking for ``workload``.

    Args:
        workload: what to size (model, examples, sequence length, epochs, batch, precision).
        mfu: assumed MFU, one number or per kind (default :data:`DEFAULT_MFU`).
        overhead_s: paid start-up per node, seconds.

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
    )
    inference = rank_inference(spec, w.seq_len)
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
        "assumptions": _assumptions(mfu, overhead_s),
        "catalog": catalog_meta(),
    }
