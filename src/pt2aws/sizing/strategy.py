"""The simplest parallelism that fits training on an instance, and the workload class of the
re:Invent 2022 talk CMP207 (small / intermediate / big / huge; the thresholds are ours)."""

from __future__ import annotations

import math

from pt2aws.sizing.catalog import get_instance, load_catalog
from pt2aws.sizing.memory import (
    MEMORY_RESERVE,
    STATE_BYTES_PER_PARAM,
    training_memory,
)
from pt2aws.sizing.workload import model_spec

#: Most nodes a plan may use.
MAX_NODES = 64
#: Small fits one 24 GB GPU (A10G / L4); big needs 2-16 nodes of the largest-memory 8-GPU row.
CLASS_SMALL_DEVICE_GB = 24
CLASS_BIG_MAX_NODES = 16
STRATEGIES = {
    "small": "single device; DDP over more GPUs only to go faster",
    "intermediate": "one node: DDP if a large-memory GPU holds it, else FSDP over the node's GPUs",
    "big": "multi-node FSDP over EFA (2-16 nodes), tensor parallel within a node for long sequences",
    "huge": "FSDP + tensor + pipeline parallel over many nodes (EC2 UltraClusters / SageMaker HyperPod)",
}


def plan_training(
    model, instance, micro_batch=32, seq_len=128, precision="mixed", max_nodes=MAX_NODES
):
    """The first that fits of: every device replicated (one device / DDP); FSDP over one node's
    devices; the same with activation recomputation; FSDP over the fewest EFA nodes (full
    activations first). Returns ``{"instance", "nodes", "devices", "strategy", "recompute",
    "memory_per_device_bytes"}`` or None (Inferentia, or nothing fits). Raises KeyError."""
    it = get_instance(instance) if isinstance(instance, str) else instance
    if it.kind == "inferentia":
        return None
    spec, n, cap = model_spec(model), it.devices, it.device_memory_bytes * (1 - MEMORY_RESERVE)
    single = "single device" if n == 1 else f"DDP over {n} devices"
    attempts = [(1, 1, single, False)]
    if n > 1:
        attempts.append((1, n, f"FSDP over the {n} devices of one node", False))
    attempts.append((1, n, (f"FSDP over {n} devices" if n > 1 else single) + " + recompute", True))
    if it.efa and it.accelerator_count:  # multi-node sharding needs EFA
        state = sum(STATE_BYTES_PER_PARAM[precision].values()) * spec.parameters
        for nodes in range(max(2, math.ceil(state / (cap * n))), max_nodes + 1):
            for recompute in (False, True):
                label = f"FSDP over {nodes} nodes x {n} devices (EFA)"
                attempts.append((nodes, nodes * n, label + " + recompute" * recompute, recompute))
    for nodes, shards, strategy, recompute in attempts:
        memory = training_memory(spec, micro_batch, seq_len, precision, shards, recompute)
        if memory["total"] <= cap:
            return {
                "instance": it.name,
                "nodes": nodes,
                "devices": nodes * n,
                "strategy": strategy,
                "recompute": recompute,
                "memory_per_device_bytes": memory["total"],
            }
    return None


def workload_class(model, micro_batch=32, seq_len=128, precision="mixed") -> dict:
    """CMP207's class: small (fits one 24 GB GPU), intermediate (one node of the catalog's
    largest-memory 8-GPU row), big (2-16 such nodes), huge (more). Returns ``{"class",
    "strategy", "reference_instance", "nodes", "training_bytes", "reason"}``."""
    spec = model_spec(model)
    total = training_memory(spec, micro_batch, seq_len, precision)["total"]
    ref = max(
        (i for i in load_catalog() if i.accelerator_count == 8 and i.kind == "gpu"),
        key=lambda i: i.accelerator_memory_gb,
    )
    gb = total / 1e9
    if total <= CLASS_SMALL_DEVICE_GB * 1e9 * (1 - MEMORY_RESERVE):
        cls, nodes, reason = "small", 1, f"{gb:.1f} GB of training memory fits one 24 GB GPU"
    else:
        plan = plan_training(spec, ref, micro_batch, seq_len, precision, max_nodes=10_000)
        nodes = plan["nodes"] if plan else None
        if nodes == 1:
            cls = "intermediate"
            reason = f"{gb:.1f} GB needs more than one 24 GB GPU but fits one {ref.name} ({plan['strategy']})"
        elif nodes is not None and nodes <= CLASS_BIG_MAX_NODES:
            cls, reason = "big", f"{gb:.0f} GB needs {nodes} x {ref.name} ({plan['strategy']})"
        else:
            cls, reason = "huge", f"{gb:.0f} GB needs more than {CLASS_BIG_MAX_NODES} x {ref.name}"
    return {
        "class": cls,
        "strategy": STRATEGIES[cls],
        "reference_instance": ref.name,
        "nodes": nodes,
        "training_bytes": total,
        "reason": reason,
    }
