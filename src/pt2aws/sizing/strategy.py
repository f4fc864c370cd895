"""Training and serving memory per device (bytes), the simplest parallelism that fits training
on an instance, and the workload class of the re:Invent 2022 talk CMP207 (thresholds ours).

* Training state per parameter: 16 bytes in mixed precision with AdamW (ZeRO, Rajbhandari et
  al. 2020, section 3.1), 8 in pure bf16, 16 in fp32; sharding divides it by the shards.
* Activations per layer, 16-bit: ``s·b·h·(34 + 5·a·s/h)``; with full recomputation ``2·s·b·h``
  per layer plus one layer's (Korthikanti et al., MLSys 2023, 4.1-4.2); fp32 doubles them.
* Serving: the weights plus one layer's activations.
"""

from __future__ import annotations

import math

from pt2aws.sizing.catalog import get_instance, load_catalog
from pt2aws.sizing.workload import model_spec

#: Training state, bytes per parameter, by precision.
STATE_BYTES_PER_PARAM = {
    "mixed": {"weights": 4.0, "gradients": 4.0, "optimizer": 8.0},
    "bf16": {"weights": 2.0, "gradients": 2.0, "optimizer": 4.0},
    "fp32": {"weights": 4.0, "gradients": 4.0, "optimizer": 8.0},
}
INFERENCE_BYTES_PER_PARAM = {"mixed": 2.0, "bf16": 2.0, "fp32": 4.0}
#: Share of device memory kept free for the CUDA/Neuron context and fragmentation (ours).
MEMORY_RESERVE = 0.10
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


def activation_bytes(spec, micro_batch: int, seq_len: int, precision="mixed", recompute=False):
    """Activations one device keeps for the backward pass, bytes."""
    s, b, h, a = seq_len, micro_batch, spec.hidden_size, spec.num_heads
    layer = s * b * h * (34 + 5 * a * s / h)
    kept = 2 * s * b * h * spec.num_layers + layer if recompute else layer * spec.num_layers
    return kept * (2.0 if precision == "fp32" else 1.0)


def training_memory(
    model, micro_batch=32, seq_len=128, precision="mixed", shards=1, recompute=False
):
    """``{"weights", "gradients", "optimizer", "activations", "total", "parameters"}``, bytes per
    device. Raises ValueError: an unknown precision, or a batch, length or shards below 1."""
    if precision not in STATE_BYTES_PER_PARAM:
        choices = ", ".join(STATE_BYTES_PER_PARAM)
        raise ValueError(f"precision {precision!r}: choose one of {choices}")
    if min(micro_batch, seq_len, shards) < 1:
        raise ValueError(
            f"micro_batch, seq_len, shards must be >= 1: {micro_batch, seq_len, shards}"
        )
    spec = model_spec(model)
    out = {k: spec.parameters * v / shards for k, v in STATE_BYTES_PER_PARAM[precision].items()}
    out["activations"] = activation_bytes(spec, micro_batch, seq_len, precision, recompute)
    return out | {"total": sum(out.values()), "parameters": spec.parameters}


def inference_memory(model, batch: int = 1, seq_len: int = 128, precision: str = "bf16") -> dict:
    """``{"weights", "activations", "total", "parameters"}`` bytes to serve."""
    spec = model_spec(model)
    weights = spec.parameters * INFERENCE_BYTES_PER_PARAM[precision]
    layer = activation_bytes(spec, batch, seq_len, precision) / spec.num_layers
    return {"weights": weights, "activations": layer, "total": weights + layer,
            "parameters": spec.parameters}  # fmt: skip


def plan_training(
    model, instance, micro_batch=32, seq_len=128, precision="mixed", max_nodes=MAX_NODES
):
    """The first that fits of: replicas (one device / DDP); FSDP over one node; the same with
    recomputation; FSDP over the fewest EFA nodes. ``{"instance", "nodes", "devices",
    "strategy", "recompute", "memory_per_device_bytes"}`` or None. Raises KeyError."""
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
        memory = training_memory(spec, micro_batch, seq_len, precision, shards, recompute)["total"]
        if memory <= cap:
            return {"instance": it.name, "nodes": nodes, "devices": nodes * n, "strategy": strategy,
                    "recompute": recompute, "memory_per_device_bytes": memory}  # fmt: skip
    return None


def workload_class(model, micro_batch=32, seq_len=128, precision="mixed") -> dict:
    """CMP207's class: small (one 24 GB GPU), intermediate (one node of the largest-memory
    8-GPU row), big (2-16 such nodes), huge (more). ``{"class", "strategy",
    "reference_instance", "nodes", "training_bytes", "reason"}``."""
    spec = model_spec(model)
    total = training_memory(spec, micro_batch, seq_len, precision)["total"]
    eight = [i for i in load_catalog() if i.accelerator_count == 8 and i.kind == "gpu"]
    ref, gb = max(eight, key=lambda i: i.accelerator_memory_gb), total / 1e9
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
    return {"class": cls, "strategy": STRATEGIES[cls], "reference_instance": ref.name,
            "nodes": nodes, "training_bytes": total, "reason": reason}  # fmt: skip
