"""Instances ranked by estimated training cost and time and by serving cost per 1M requests.

Training time = ``(6N + 12LdT) x tokens / (nodes x peak x MFU)`` (Kaplan et al. 2020 §2.1), 8/6 of
it with recomputation; the peak is bf16 on accelerators, fp32 on CPUs. Cost = (time + paid
start-up) x nodes x EC2 on-demand price. Serving: :mod:`pt2aws.sizing.serving_cost`'s rows."""

from __future__ import annotations

import dataclasses

from pt2aws.sizing import catalog, serving_cost, workload
from pt2aws.sizing.pricing import CATALOG_REGION, instance_cost
from pt2aws.train.throughput import training_flops_per_token

#: Assumed model FLOPs utilisation of training by device kind (ours: PaLM reached 46% at 540B on
#: TPU v4, Chowdhery et al. 2022 table 3; a 125M fine-tune at sequence 128 reaches less).
DEFAULT_MFU = {"gpu": 0.35, "trainium": 0.30, "cpu": 0.10}
#: Paid start-up per training run and node, seconds: boot, image pull, data and model load (ours).
DEFAULT_OVERHEAD_S = 600.0
#: Notebook 00's serving rows: notebook 03's endpoints, then GPU / Inferentia rows at EC2 prices.
DEFAULT_INFERENCE_INSTANCES = (
    *serving_cost.DEFAULT_COMPARISON, "g5.xlarge", "g6.xlarge", "g6e.xlarge", "inf2.xlarge"
)  # fmt: skip
#: Kinds pt2aws's training runs on as is (CUDA or CPU; Neuron needs a port).
RUNNABLE_KINDS = ("gpu", "cpu")


def training_flops(spec, w) -> float:
    """``(6N + 12LdT) x tokens`` of workload ``w``, N the non-embedding parameters of ``spec``."""
    n, layers, width = spec.non_embedding_parameters, spec.num_layers, spec.hidden_size
    per_token = training_flops_per_token(n, layers, width, w.seq_len)
    return per_token * w.train_examples * w.seq_len * w.epochs


def _flag(rows: list[dict], cost: str, speed) -> None:
    """Mark the cheapest priced row and the fastest (largest ``speed(row)``); sort by cost."""
    priced = [r for r in rows if r[cost] is not None]
    cheapest = min(priced, key=lambda r: (r[cost], -speed(r))) if priced else None
    fastest = max(rows, key=speed) if rows else None
    for r in rows:
        r["cheapest"], r["fastest"] = r is cheapest, r is fastest
    rows.sort(key=lambda r: (r[cost] is None, r[cost] or 0.0, -speed(r)))


def rank_training(w, mfu=None, overhead_s=DEFAULT_OVERHEAD_S, region=CATALOG_REGION) -> list[dict]:
    """Every catalog row that fits training :class:`~pt2aws.sizing.workload.Workload` ``w``,
    cheapest first, ``cheapest`` and ``fastest`` marked (``time_s``: compute only; ``cost_usd``
    None without a price); ``mfu``: one for all kinds (default :data:`DEFAULT_MFU`)."""
    spec = workload.model_spec(w.model)
    flops, rows = training_flops(spec, w), []
    for it in catalog.load_catalog():
        plan = workload.plan_training(spec, it, w.micro_batch, w.seq_len, w.precision)
        if not plan:
            continue
        nodes, kind_mfu = plan["nodes"], mfu or DEFAULT_MFU[it.kind]
        work = flops * (8 / 6 if plan["recompute"] else 1)  # recomputation repeats the forward
        time_s = work / (nodes * it.peak_tflops * 1e12 * kind_mfu)
        cost, price = instance_cost(it.name, "ec2", (time_s + overhead_s) / 3600, nodes, region)
        notes = ["needs the AWS Neuron SDK (torch-neuronx)"] if it.kind == "trainium" else []
        if not catalog.availability(it.name)["sagemaker_training"]:
            notes.append("EC2 only (not a SageMaker training type)")
        devices = f"{it.accelerator_count} x {it.accelerator}" if it.accelerator else None
        rows.append({
            "instance": it.name, "kind": it.kind,
            "accelerators": devices or f"{it.vcpus} vCPU {it.cpu}",
            "nodes": nodes, "strategy": plan["strategy"],
            "memory_per_device_gb": plan["memory_per_device_bytes"] / 1e9,
            "peak_tflops": it.peak_tflops * nodes, "peak_precision": it.peak_precision,
            "mfu": kind_mfu, "time_s": time_s,
            "usd_per_hour": price.usd_per_hour if price else None, "cost_usd": cost,
            "price": price.describe() if price else "no price known", "note": "; ".join(notes),
        })  # fmt: skip
    _flag(rows, "cost_usd", lambda r: -r["time_s"])
    return rows


def rank_inference(model, seq_len=128, region=CATALOG_REGION, prices=None):
    """The priced cost rows of :data:`DEFAULT_INFERENCE_INSTANCES` whose device memory holds the
    bf16 weights, cheapest first, ``cheapest`` and ``fastest`` (most inferences/s) marked; rows
    without an overhead (:data:`~pt2aws.sizing.serving_cost.UPPER_BOUND`) after them, unmarked."""
    spec = workload.model_spec(model)
    need = workload.inference_memory(spec, seq_len)["total"] / (1 - workload.MEMORY_RESERVE)
    memory = {n: catalog.instance_memory_bytes(n) for n in DEFAULT_INFERENCE_INSTANCES}
    names = [n for n, held in memory.items() if held is None or need <= held]
    rows = serving_cost.cost_rows(spec, seq_len, names, region=region, prices=prices)
    rows = [r for r in rows if r["usd_per_1m"] is not None]
    bound = [r for r in rows if r["anchor"].endswith(serving_cost.UPPER_BOUND)]
    ranked = [r for r in rows if r not in bound]
    for part in (bound, ranked):
        _flag(part, "usd_per_1m", lambda r: r["inferences_per_s"])
    for r in bound:
        r["cheapest"] = r["fastest"] = False
    return ranked + bound


def recommend(w, mfu=None, overhead_s=DEFAULT_OVERHEAD_S, region=CATALOG_REGION, prices=None):
    """Memory, workload class and both rankings of a :class:`~pt2aws.sizing.workload.Workload`
    (JSON); ``prices``: live serving prices; ``recommended``: the cheapest priced training row
    pt2aws runs as is."""
    w = dataclasses.replace(w, model=workload.model_spec(w.model))  # the shape, built once
    spec, shape = w.model, (w.micro_batch, w.seq_len, w.precision)
    training = rank_training(w, mfu, overhead_s, region)
    runnable = [r for r in training if r["kind"] in RUNNABLE_KINDS and r["cost_usd"] is not None]
    choice = runnable[0] if runnable else None
    flops = training_flops(spec, w)
    summary = dataclasses.asdict(w) | {"model": spec.name, "training_flops": flops}
    return {
        "model": dataclasses.asdict(spec),
        "workload": summary,
        "memory": {"training_one_device": workload.training_memory(spec, *shape),
                   "inference_bf16": workload.inference_memory(spec, w.seq_len)},
        "class": workload.workload_class(spec, *shape),
        "training": training,
        "inference": rank_inference(spec, w.seq_len, region, prices),
        "recommended": choice and {k: choice[k] for k in ("instance", "nodes", "strategy")},
        "region": region,
        "assumptions": {"mfu": dict.fromkeys(DEFAULT_MFU, mfu) if mfu else DEFAULT_MFU,
                        "overhead_s": overhead_s},
    }  # fmt: skip
