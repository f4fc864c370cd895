"""Which instance to train and serve on, and what it costs: catalog, memory estimate, ranking.

The figures (vCPUs, memory, accelerators, peak bf16 TFLOP/s, interconnect, on-demand price) live in
one file, ``catalog/instances.json``; each names its source and date, and says whether it was
verified in stored material. Edit that file to update prices; nothing here hard-codes them.

Formulas (all stated again where they are used):

* **Training state** per parameter, mixed precision with AdamW: 16 bytes = 2 (bf16/fp16 weights)
  + 2 (gradients) + 12 (fp32 master weights, Adam momentum and variance). Rajbhandari et al.,
  "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models", SC 2020, section 3.1
  ("2Ψ + 2Ψ + KΨ", K = 12). PyTorch autocast with fp32 weights gives the same 16 bytes
  (4 weights + 4 gradients + 8 Adam). Pure bf16 (weights, gradients and Adam states in bf16) is
  8 bytes; fp32 is 16 bytes.
* **Activations** stored for the backward pass, per transformer layer, 16-bit:
  ``s·b·h·(34 + 5·a·s/h)`` bytes (sequence s, micro-batch b, hidden h, heads a); with full
  activation recomputation ``2·s·b·h`` per layer. Korthikanti et al., "Reducing Activation
  Recomputation in Large Transformer Models", MLSys 2023, sections 4.1-4.2 (eq. 1). fp32 doubles it.
* **Training compute**: ``6 · parameters · tokens`` FLOPs (forward 2, backward 4; Kaplan et al.,
  "Scaling Laws for Neural Language Models", 2020, section 2.1). Time = FLOPs / (peak x MFU);
  the MFU (model FLOPs utilisation) is an assumption, stated in every result.
* **Inference compute**: ``2 · parameters · tokens`` FLOPs per request (same source).

Workload classes follow the re:Invent 2022 talk CMP207 ("Choosing the right accelerator for
training and inference": small / intermediate / big / huge); the thresholds are ours and are in
:func:`workload_class`.
"""

from __future__ import annotations

import dataclasses
import math

from pt2aws.sizing.catalog import (
    InstanceType,
    availability,
    catalog_meta,
    get_instance,
    load_catalog,
)
from pt2aws.sizing.memory import (
    MEMORY_RESERVE,
    STATE_BYTES_PER_PARAM,
    inference_memory,
    training_memory,
    usable_bytes,
)
from pt2aws.sizing.workload import Workload, model_spec

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


#: Largest number of nodes the ranking will plan for.
MAX_NODES = 64


def _notes(it: InstanceType, use: str) -> str:
    notes = []
    if it.kind in ("trainium", "inferentia"):
        notes.append("needs the AWS Neuron SDK (torch-neuronx); pt2aws runs CUDA/CPU as is")
    if it.kind == "cpu":
        notes.append("CPU peak is our estimate")
    avail = availability(it.name)
    key = "sagemaker_training" if use == "training" else "sagemaker_hosting"
    if not avail[key]:
        notes.append(f"EC2 only (not a SageMaker {use} type)")
    return "; ".join(notes)


def plan_training(
    model,
    instance: InstanceType | str,
    micro_batch: int = 32,
    seq_len: int = 128,
    precision: str = "mixed",
    max_nodes: int = MAX_NODES,
) -> dict | None:
    """The simplest way to fit training of ``model`` on ``instance`` nodes, or None if none fits.

    Tried in order: replicate on every device (single device / DDP); shard over the devices of one
    node (FSDP); shard over ``k`` nodes (FSDP multi-node), first with full activations, then with
    activation recomputation. The smallest ``k <= max_nodes`` that fits wins. Multi-node plans
    are made only for instances with EFA.

    Returns:
        ``{"instance", "nodes", "devices", "strategy", "recompute", "memory_per_device_bytes",
        "usable_per_device_bytes"}`` or None.
    """
    it = get_instance(instance) if isinstance(instance, str) else instance
    if not it.trains:
        return None
    cap = usable_bytes(it)
    n = it.devices

    def result(nodes, shards, strategy, recompute):
        mem = training_memory(model, micro_batch, seq_len, precision, shards, recompute)
        if mem["total"] > cap:
            return None
        return {
            "instance": it.name,
            "nodes": nodes,
            "devices": nodes * n,
            "strategy": strategy,
            "recompute": recompute,
            "memory_per_device_bytes": mem["total"],
            "usable_per_device_bytes": cap,
        }

    single = "single device" if n == 1 else f"DDP over {n} devices"
    attempts = [(1, 1, single, False)]
    if n > 1:
        attempts.append((1, n, f"FSDP over the {n} devices of one node", False))
    attempts.append((1, n, (f"FSDP over {n} devices" if n > 1 else single) + " + recompute", True))
    for nodes, shards, strategy, recompute in attempts:
        found = result(nodes, shards, strategy, recompute)
        if found:
            return found
    if not it.efa or not it.accelerator_count:
        return None  # multi-node sharding needs EFA (NCCL over TCP is far too slow for FSDP)
    spec = model_spec(model)
    state = sum(STATE_BYTES_PER_PARAM[precision].values()) * spec.parameters
    k0 = max(2, math.ceil(state / (cap * n)))
    for nodes in range(k0, max_nodes + 1):
        for recompute in (False, True):
            found = result(
                nodes,
                nodes * n,
                f"FSDP over {nodes} nodes x {n} devices (EFA)"
                + (" + recompute" if recompute else ""),
                recompute,
            )
            if found:
                return found
    return None


#: Boundaries of the workload classes (our thresholds for CMP207's small / intermediate / big / huge).
CLASS_SMALL_DEVICE_GB = 24  # fits one 24 GB GPU (A10G / L4): g5 / g6 class


CLASS_BIG_MAX_NODES = 16  # big: 2-16 nodes of the largest-memory 8-GPU node; huge: more


STRATEGIES = {
    "small": "single device; DDP over more GPUs only to go faster",
    "intermediate": "one node: DDP if a large-memory GPU holds it, else FSDP over the node's GPUs",
    "big": "multi-node FSDP over EFA (2-16 nodes), tensor parallel within a node for long sequences",
    "huge": "FSDP + tensor + pipeline parallel over many nodes (EC2 UltraClusters / SageMaker HyperPod)",
}


def workload_class(
    model, micro_batch: int = 32, seq_len: int = 128, precision: str = "mixed"
) -> dict:
    """CMP207's workload class for training ``model``, with the strategy it implies.

    * small: training state + activations fit one 24 GB accelerator (A10G / L4);
    * intermediate: fit one node of the catalog's largest-memory 8-GPU instance (one device, or
      FSDP over its 8);
    * big: need 2-16 such nodes; huge: more than 16.

    Returns:
        ``{"class", "strategy", "reference_instance", "nodes", "training_bytes", "reason"}``.
    """
    mem = training_memory(model, micro_batch, seq_len, precision)
    small_cap = CLASS_SMALL_DEVICE_GB * 1e9 * (1 - MEMORY_RESERVE)
    gpu_nodes = [i for i in load_catalog() if i.kind == "gpu" and i.accelerator_count == 8]
    ref = max(gpu_nodes, key=lambda i: i.accelerator_memory_gb)
    if mem["total"] <= small_cap:
        cls, nodes = "small", 1
        reason = f"{mem['total'] / 1e9:.1f} GB of training memory fits one {CLASS_SMALL_DEVICE_GB} GB GPU"
    else:
        plan = plan_training(model, ref, micro_batch, seq_len, precision, max_nodes=10_000)
        nodes = plan["nodes"] if plan else None
        if nodes == 1:
            cls = "intermediate"
            reason = f"{mem['total'] / 1e9:.1f} GB needs more than one 24 GB GPU but fits one {ref.name} ({plan['strategy']})"
        elif nodes is not None and nodes <= CLASS_BIG_MAX_NODES:
            cls = "big"
            reason = f"{mem['total'] / 1e9:.0f} GB needs {nodes} x {ref.name} ({plan['strategy']})"
        else:
            cls = "huge"
            reason = (
                f"{mem['total'] / 1e9:.0f} GB needs more than {CLASS_BIG_MAX_NODES} x {ref.name}"
            )
    return {
        "class": cls,
        "strategy": STRATEGIES[cls],
        "reference_instance": ref.name,
        "nodes": nodes,
        "training_bytes": mem["total"],
        "reason": reason,
    }


def training_flops(parameters: float, tokens: float) -> float:
    """``6 · parameters · tokens`` (Kaplan et al. 2020, sec. 2.1), FLOPs."""
    return 6.0 * parameters * tokens


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

    time_s = 6 · params · train_tokens · epochs / (nodes · peak_bf16 · MFU) (8 instead of 6 with
    activation recomputation, which repeats the forward pass);
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
        peak_tflops, mfu, time_s, price_usd_per_hour, cost_usd, cheapest, fastest``; instances
        that do not fit are left out; ``cost_usd`` is None where the price is unknown.
        ``cheapest`` / ``fastest`` mark the minimum cost / time (among priced rows for cost).

    Raises:
        ValueError: non-positive tokens or epochs.
    """
    if train_tokens <= 0 or epochs <= 0:
        raise ValueError(
            f"train_tokens ({train_tokens}) and epochs ({epochs}) must be positive: tokens = "
            "training examples x tokens per example"
        )
    spec = model_spec(model)
    flops = training_flops(spec.parameters, train_tokens * epochs)
    mfus = dict(DEFAULT_MFU) if mfu is None else mfu
    if isinstance(mfus, (int, float)):
        mfus = dict.fromkeys(DEFAULT_MFU, float(mfus))
    rows = []
    for it in load_catalog():
        if instances and it.name not in {n.removeprefix("ml.") for n in instances}:
            continue
        plan = plan_training(spec, it, micro_batch, seq_len, precision)
        if plan is None:
            continue
        m = mfus[it.kind]
        # full recomputation repeats the forward pass: 8 instead of 6 FLOPs per param and token
        work = flops * (8 / 6 if plan["recompute"] else 1.0)
        time_s = work / (plan["nodes"] * it.peak_bf16_tflops * 1e12 * m)
        price = it.price_usd_per_hour
        rows.append(
            {
                "instance": it.name,
                "kind": it.kind,
                "accelerators": f"{it.accelerator_count} x {it.accelerator}"
                if it.accelerator
                else f"{it.vcpus} vCPU {it.cpu}",
                "nodes": plan["nodes"],
                "strategy": plan["strategy"],
                "memory_per_device_gb": plan["memory_per_device_bytes"] / 1e9,
                "peak_tflops": it.peak_bf16_tflops * plan["nodes"],
                "mfu": m,
                "time_s": time_s,
                "price_usd_per_hour": price,
                "cost_usd": None
                if price is None
                else (time_s + overhead_s) / 3600 * plan["nodes"] * price,
                "verified": it.verified,
                "note": _notes(it, "training"),
                "cheapest": False,
                "fastest": False,
            }
        )
    _mark(rows, "time_s")
    return rows


def _mark(rows: list[dict], time_key: str, cost_key: str = "cost_usd") -> None:
    priced = [r for r in rows if r[cost_key] is not None]
    if priced:
        min(priced, key=lambda r: (r[cost_key], r[time_key]))["cheapest"] = True
    if rows:
        min(rows, key=lambda r: r[time_key])["fastest"] = True
    rows.sort(key=lambda r: (r[cost_key] is None, r[cost_key] or 0.0, r[time_key]))


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
    ``price_usd_per_hour / (3600 · rps) · 1e6``. Instances whose device memory cannot hold the
    weights are left out. Defaults to one small size per family.

    Returns:
        Rows with ``instance, kind, processor, throughput_rps, throughput_source, price_usd_per_hour,
        usd_per_million, cheapest, fastest`` sorted by cost.
    """
    spec = model_spec(model)
    need = inference_memory(spec, 1, seq_len, precision)["total"]
    utils = dict(DEFAULT_INFERENCE_UTILISATION) if utilisation is None else utilisation
    if isinstance(utils, (int, float)):
        utils = dict.fromkeys(DEFAULT_INFERENCE_UTILISATION, float(utils))
    measured = {k.removeprefix("ml."): v for k, v in (throughput_rps or {}).items()}
    default = {
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
    }
    wanted = {n.removeprefix("ml.") for n in instances} if instances else default
    rows = []
    for it in load_catalog():
        if it.name not in wanted or it.price_usd_per_hour is None:
            continue
        if need > usable_bytes(it):
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
                "arch": "arm64" if it.cpu.startswith("Graviton") else "x86_64",
                "throughput_rps": rps,
                "throughput_source": src,
                "price_usd_per_hour": it.price_usd_per_hour,
                "usd_per_million": it.price_usd_per_hour / (3600 * rps) * 1e6,
                "latency_floor_ms": 1000 / rps,
                "note": _notes(it, "hosting"),
                "cheapest": False,
                "fastest": False,
            }
        )
    for r in rows:
        r["time_s"] = -r["throughput_rps"]  # fastest = highest throughput
    _mark(rows, "time_s", "usd_per_million")
    for r in rows:
        del r["time_s"]
    return rows


#: Kinds pt2aws's training script runs on as is (CUDA or CPU; Neuron needs a port).
RUNNABLE_KINDS = ("gpu", "cpu")


def recommend(
    workload: Workload, mfu: dict | float | None = None, overhead_s: float = DEFAULT_OVERHEAD_S
) -> dict:
    """Memory breakdown, workload class, training ranking and inference ranking for ``workload``.

    Returns:
        A JSON-serialisable dict: ``model`` (name, parameters), ``workload``, ``memory``
        (training per device on one device, inference), ``class``, ``training`` (rows of
        :func:`rank_training`), ``inference`` (rows of :func:`rank_inference`), ``cheapest`` /
        ``fastest`` (instance names), ``assumptions`` and ``catalog`` (meta).
    """
    spec = model_spec(workload.model)
    train_mem = training_memory(spec, workload.micro_batch, workload.seq_len, workload.precision)
    infer_mem = inference_memory(spec, 1, workload.seq_len)
    training = rank_training(
        spec,
        workload.train_tokens,
        workload.epochs,
        workload.micro_batch,
        workload.seq_len,
        workload.precision,
        mfu,
        overhead_s=overhead_s,
    )
    inference = rank_inference(spec, workload.seq_len)
    pick = lambda rows, key: next((r["instance"] for r in rows if r[key]), None)  # noqa: E731
    return {
        "model": {
            "name": spec.name,
            "parameters": spec.parameters,
            "hidden_size": spec.hidden_size,
            "num_layers": spec.num_layers,
            "num_heads": spec.num_heads,
        },
        "workload": {k: v for k, v in dataclasses.asdict(workload).items() if k != "model"}
        | {
            "train_tokens_per_epoch": workload.train_tokens,
            "training_flops": training_flops(
                spec.parameters, workload.train_tokens * workload.epochs
            ),
        },
        "memory": {"training_one_device": train_mem, "inference_bf16": infer_mem},
        "class": workload_class(spec, workload.micro_batch, workload.seq_len, workload.precision),
        "training": training,
        "inference": inference,
        "cheapest": pick(training, "cheapest"),
        "fastest": pick(training, "fastest"),
        "inference_cheapest": pick(inference, "cheapest"),
        "recommended": next(
            (
                {"instance": r["instance"], "nodes": r["nodes"], "strategy": r["strategy"]}
                for r in training
                if r["kind"] in RUNNABLE_KINDS and r["cost_usd"] is not None
            ),
            None,
        ),
        "assumptions": {
            "mfu": DEFAULT_MFU if mfu is None else mfu,
            "inference_utilisation": DEFAULT_INFERENCE_UTILISATION,
            "memory_reserve": MEMORY_RESERVE,
            "overhead_s": overhead_s,
            "time": "6 x params x tokens / (nodes x peak bf16 x MFU), compute only; cost adds "
            f"{overhead_s:.0f} s of paid start-up per node; linear scaling over nodes",
            "price": "EC2 on-demand us-east-1; SageMaker ml.* costs more",
        },
        "catalog": catalog_meta(),
    }
