"""Training and serving memory per device, bytes.

* Training state per parameter: 16 bytes in mixed precision with AdamW (Rajbhandari et al.,
  "ZeRO", SC 2020, section 3.1: 2 + 2 + 12; autocast over fp32 weights: 4 + 4 + 8), 8 in pure
  bf16, 16 in fp32; sharding (FSDP / ZeRO-3) divides it by the shards.
* Activations kept for the backward pass, per layer, 16-bit: ``s·b·h·(34 + 5·a·s/h)``; with full
  recomputation ``2·s·b·h`` per layer plus one layer's (Korthikanti et al., MLSys 2023, sections
  4.1-4.2); fp32 doubles them.
* Serving: the weights plus one layer's activations.
"""

from __future__ import annotations

from pt2aws.sizing.workload import model_spec

#: Training state, bytes per parameter, by precision.
STATE_BYTES_PER_PARAM = {
    "mixed": {"weights": 4.0, "gradients": 4.0, "optimizer": 8.0},
    "bf16": {"weights": 2.0, "gradients": 2.0, "optimizer": 4.0},
    "fp32": {"weights": 4.0, "gradients": 4.0, "optimizer": 8.0},
}
#: Bytes per weight when serving.
INFERENCE_BYTES_PER_PARAM = {"mixed": 2.0, "bf16": 2.0, "fp32": 4.0}
#: Share of device memory kept free for the CUDA/Neuron context and fragmentation (ours).
MEMORY_RESERVE = 0.10


def activation_bytes(spec, micro_batch: int, seq_len: int, precision="mixed", recompute=False):
    """Activations one device keeps for the backward pass, bytes (module docstring)."""
    s, b, h, a = seq_len, micro_batch, spec.hidden_size, spec.num_heads
    layer = s * b * h * (34 + 5 * a * s / h)
    kept = 2 * s * b * h * spec.num_layers + layer if recompute else layer * spec.num_layers
    return kept * (2.0 if precision == "fp32" else 1.0)


def training_memory(
    model, micro_batch=32, seq_len=128, precision="mixed", shards=1, recompute=False
):
    """``{"weights", "gradients", "optimizer", "activations", "total"}`` bytes per device, and
    ``"parameters"``; ``shards``: devices the state is sharded over (1: replicated).

    Raises:
        ValueError: an unknown precision, or a batch, length or shard count below 1.
    """
    if precision not in STATE_BYTES_PER_PARAM:
        raise ValueError(
            f"precision {precision!r}: choose one of {', '.join(STATE_BYTES_PER_PARAM)}"
        )
    if min(micro_batch, seq_len, shards) < 1:
        raise ValueError(
            f"micro_batch, seq_len and shards must be >= 1: {micro_batch}, {seq_len}, {shards}"
        )
    spec = model_spec(model)
    out = {k: spec.parameters * v / shards for k, v in STATE_BYTES_PER_PARAM[precision].items()}
    out["activations"] = activation_bytes(spec, micro_batch, seq_len, precision, recompute)
    return out | {"total": sum(out.values()), "parameters": spec.parameters}


def inference_memory(model, batch: int = 1, seq_len: int = 128, precision: str = "bf16") -> dict:
    """``{"weights", "activations", "total"}`` bytes to serve, and ``"parameters"``."""
    spec = model_spec(model)
    weights = spec.parameters * INFERENCE_BYTES_PER_PARAM[precision]
    layer = activation_bytes(spec, batch, seq_len, precision) / spec.num_layers
    return {
        "weights": weights,
        "activations": layer,
        "total": weights + layer,
        "parameters": spec.parameters,
    }
