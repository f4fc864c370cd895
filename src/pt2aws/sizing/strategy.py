"""How to fit training on an instance, and the workload class that names the strategy.

:func:`plan_training` finds the simplest parallelism that fits one instance type's device
memory: replicate (one device, or DDP over the node's devices), shard over the node's devices
(FSDP), then shard over several nodes over EFA, each first with full activations and then with
activation recomputation. :func:`workload_class` places a model in one of the four classes of
the re:Invent 2022 talk CMP207 ("Choosing the right accelerator for training and inference":
small / intermediate / big / huge); the thresholds are ours and are named below.
"""

from __future__ import annotations

import math

from pt2aws.sizing.catalog import InstanceType, get_instance, load_catalog
from pt2aws.sizing.memory import (
    MEMORY_RESERVE,
    STATE_BYTES_PER_PARAM,
    training_memory,
    usable_bytes,
)
from pt2aws.sizing.workload import model_spec

#: Largest number of nodes the ranking will plan for.
MAX_NODES = 64
#: Boundaries of the workload classes (our thresholds for CMP207's small / intermediate / big /
#: huge): small fits one 24 GB GPU (A10G / L4: the g5 / g6 class); big needs 2-16 nodes of the
#: catalog's largest-memory 8-GPU instance; huge needs more.
CLASS_SMALL_DEVICE_GB = 24
CLASS_BIG_MAX_NODES = 16

STRATEGIES = {
    "small": "single device; DDP over more GPUs only to go faster",
    "intermediate": "one node: DDP if a large-memory GPU holds it, else FSDP over the node's GPUs",
    "big": "multi-node FSDP over EFA (2-16 nodes), tensor parallel within a node for long sequences",
    "huge": "FSDP + tensor + pipeline parallel over many nodes (EC2 UltraClusters / SageMaker HyperPod)",
}


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

    Args:
        model: anything :func:`pt2aws.sizing.workload.model_spec` accepts.
        instance: a catalog entry or its name (``ml.`` prefix accepted).
        micro_batch, seq_len, precision: see :func:`pt2aws.sizing.memory.training_memory`.
        max_nodes: the most nodes to try.

    Returns:
        ``{"instance", "nodes", "devices", "strategy", "recompute", "memory_per_device_bytes",
        "usable_per_device_bytes"}`` (bytes) or None.

    Raises:
        KeyError: an instance name not in the catalog.
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
    gb = mem["total"] / 1e9
    small_cap = CLASS_SMALL_DEVICE_GB * 1e9 * (1 - MEMORY_RESERVE)
    gpu_nodes = [i for i in load_catalog() if i.kind == "gpu" and i.accelerator_count == 8]
    ref = max(gpu_nodes, key=lambda i: i.accelerator_memory_gb)
    if mem["total"] <= small_cap:
        cls, nodes = "small", 1
        reason = f"{gb:.1f} GB of training memory fits one {CLASS_SMALL_DEVICE_GB} GB GPU"
    else:
        plan = plan_training(model, ref, micro_batch, seq_len, precision, max_nodes=10_000)
        nodes = plan["nodes"] if plan else None
        if nodes == 1:
            cls = "intermediate"
            reason = (
                f"{gb:.1f} GB needs more than one {CLASS_SMALL_DEVICE_GB} GB GPU but fits one "
                f"{ref.name} ({plan['strategy']})"
            )
        elif nodes is not None and nodes <= CLASS_BIG_MAX_NODES:
            cls = "big"
            reason = f"{gb:.0f} GB needs {nodes} x {ref.name} ({plan['strategy']})"
        else:
            cls = "huge"
            reason = f"{gb:.0f} GB needs more than {CLASS_BIG_MAX_NODES} x {ref.name}"
    return {
        "class": cls,
        "strategy": STRATEGIES[cls],
        "reference_instance": ref.name,
        "nodes": nodes,
        "training_bytes": mem["total"],
        "reason": reason,
    }
