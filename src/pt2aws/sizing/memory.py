"""How much memory training and serving a transformer take, per device, in bytes.

* **Training state** per parameter, mixed precision with AdamW: 16 bytes = 2 (bf16/fp16 weights)
  + 2 (gradients) + 12 (fp32 master weights, Adam momentum and variance). Rajbhandari et al.,
  "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models", SC 2020, section 3.1
  ("2Ψ + 2Ψ + KΨ", K = 12). PyTorch autocast with fp32 weights gives the same 16 bytes
  (4 weights + 4 gradients + 8 Adam). Pure bf16 (weights, gradients and Adam states in bf16) is
  8 bytes; fp32 is 16 bytes. Sharding (FSDP FULL_SHARD / ZeRO-3) divides it by the shards.
* **Activations** stored for the backward pass, per transformer layer, 16-bit:
  ``s·b·h·(34 + 5·a·s/h)`` bytes (sequence s, micro-batch b, hidden h, heads a); with full
  activation recomputation ``2·s·b·h`` per layer. Korthikanti et al., "Reducing Activation
  Recomputation in Large Transformer Models", MLSys 2023, sections 4.1-4.2 (eq. 1). fp32 doubles it.
* **Inference**: the weights plus one layer's activations (nothing is kept for a backward pass).
"""

from __future__ import annotations

from pt2aws.sizing.catalog import InstanceType
from pt2aws.sizing.workload import ModelSpec, model_spec

#: Training state bytes per parameter by precision (see the module docstring for the sources).
STATE_BYTES_PER_PARAM = {
    "mixed": {"weights": 4.0, "gradients": 4.0, "optimizer": 8.0},  # 16: autocast / ZeRO mixed
    "bf16": {"weights": 2.0, "gradients": 2.0, "optimizer": 4.0},  # 8: pure bf16 incl. Adam
    "fp32": {"weights": 4.0, "gradients": 4.0, "optimizer": 8.0},  # 16
}


#: Bytes per weight at inference.
INFERENCE_BYTES_PER_PARAM = {"mixed": 2.0, "bf16": 2.0, "fp32": 4.0}


#: Fraction of accelerator memory kept free for the CUDA/Neuron context, allocator fragmentation
#: and workspaces (our assumption).
MEMORY_RESERVE = 0.10


def activation_bytes(
    spec: ModelSpec,
    micro_batch: int,
    seq_len: int,
    precision: str = "mixed",
    recompute: bool = False,
) -> float:
    """Activation memory kept for the backward pass, bytes, for one device.

    Korthikanti et al. 2023, sec. 4.1 eq. 1 and sec. 4.2: per layer ``s·b·h·(34 + 5·a·s/h)``
    bytes with 16-bit activations and no recomputation; ``2·s·b·h`` with full recomputation (only
    layer inputs kept) plus one layer's full activations during its recomputation. fp32 doubles it.
    """
    s, b, h, a, L = seq_len, micro_batch, spec.hidden_size, spec.num_heads, spec.num_layers
    per_layer = s * b * h * (34 + 5 * a * s / h)
    scale = 2.0 if precision == "fp32" else 1.0
    if recompute:
        return scale * (2 * s * b * h * L + per_layer)
    return scale * per_layer * L


def training_memory(
    model,
    micro_batch: int = 32,
    seq_len: int = 128,
    precision: str = "mixed",
    shards: int = 1,
    recompute: bool = False,
) -> dict:
    """Per-device training memory, bytes, split into weights / gradients / optimizer / activations.

    Args:
        model: anything :func:`model_spec` accepts.
        micro_batch: sequences per device per step.
        seq_len: tokens per sequence.
        precision: ``mixed`` (bf16 autocast, fp32 weights: 16 B/param), ``bf16`` (8 B/param),
            ``fp32`` (16 B/param).
        shards: devices the weights, gradients and optimizer states are sharded over (FSDP
            FULL_SHARD / ZeRO-3); 1 = replicated (single device or DDP).
        recompute: full activation recomputation (checkpointing).

    Returns:
        ``{"weights", "gradients", "optimizer", "activations", "total"}`` in bytes, plus
        ``"parameters"`` and the formula strings under ``"formulas"``.

    Raises:
        ValueError: unknown precision, or a non-positive batch / sequence / shard count.
    """
    if precision not in STATE_BYTES_PER_PARAM:
        raise ValueError(
            f"precision {precision!r}: choose one of {', '.join(STATE_BYTES_PER_PARAM)}"
        )
    if micro_batch < 1 or seq_len < 1 or shards < 1:
        raise ValueError(
            f"micro_batch ({micro_batch}), seq_len ({seq_len}) and shards ({shards}) must be >= 1"
        )
    spec = model_spec(model)
    per = STATE_BYTES_PER_PARAM[precision]
    out = {k: spec.parameters * v / shards for k, v in per.items()}
    out["activations"] = activation_bytes(spec, micro_batch, seq_len, precision, recompute)
    out["total"] = sum(out[k] for k in ("weights", "gradients", "optimizer", "activations"))
    out["parameters"] = spec.parameters
    out["formulas"] = {
        "state": f"{sum(per.values()):g} B/param x {spec.parameters:,} params / {shards} shard(s) "
        "(ZeRO paper, Rajbhandari et al. 2020, sec. 3.1)",
        "activations": ("2·s·b·h·L + one layer" if recompute else "s·b·h·(34 + 5·a·s/h)·L")
        + f" bytes, s={seq_len} b={micro_batch} h={spec.hidden_size} a={spec.num_heads} "
        f"L={spec.num_layers} (Korthikanti et al. 2023, sec. 4.1 eq. 1 and sec. 4.2)",
    }
    return out


def inference_memory(model, batch: int = 1, seq_len: int = 128, precision: str = "bf16") -> dict:
    """Inference memory, bytes: weights plus one layer's activations (nothing kept for backward).

    Returns:
        ``{"weights", "activations", "total", "parameters"}`` (bytes, except the count).
    """
    if precision not in INFERENCE_BYTES_PER_PARAM:
        raise ValueError(
            f"precision {precision!r}: choose one of {', '.join(INFERENCE_BYTES_PER_PARAM)}"
        )
    spec = model_spec(model)
    weights = spec.parameters * INFERENCE_BYTES_PER_PARAM[precision]
    layer = activation_bytes(spec, batch, seq_len, precision) / spec.num_layers
    return {
        "weights": weights,
        "activations": layer,
        "total": weights + layer,
        "parameters": spec.parameters,
    }


def usable_bytes(instance: InstanceType) -> float:
    """Memory of one device that the model may use, bytes (``1 - MEMORY_RESERVE`` of it)."""
    return instance.device_memory_bytes * (1 - MEMORY_RESERVE)
