"""What to size and what it needs: a model's shape (:class:`ModelSpec`), a training job
(:class:`Workload`), training and serving memory per device (bytes), the simplest parallelism
that fits training on an instance, and the workload class of the re:Invent 2022 talk CMP207
(thresholds ours).

* Training state per parameter: 16 bytes in mixed precision with AdamW (ZeRO, Rajbhandari et
  al. 2020, section 3.1), 8 in pure bf16, 16 in fp32; sharding divides it by the shards.
* Activations per layer, 16-bit: ``s·b·h·(34 + 5·a·s/h)``; with full recomputation ``2·s·b·h``
  per layer plus one layer's (Korthikanti et al., MLSys 2023, 4.1-4.2); fp32 doubles them.
* Serving: the bf16 weights plus one layer's activations."""

from __future__ import annotations

import math
from dataclasses import dataclass

from pt2aws.sizing import catalog

#: Training state, bytes per parameter, by precision (``mixed``: bf16 autocast over fp32 weights
#: and AdamW states).
STATE_BYTES_PER_PARAM = {
    "mixed": {"weights": 4.0, "gradients": 4.0, "optimizer": 8.0},
    "bf16": {"weights": 2.0, "gradients": 2.0, "optimizer": 4.0},
    "fp32": {"weights": 4.0, "gradients": 4.0, "optimizer": 8.0},
}
PRECISIONS = tuple(STATE_BYTES_PER_PARAM)
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


@dataclass(frozen=True)
class ModelSpec:
    """A transformer's parameters, width, layers, heads and embedding-table parameters (looked
    up, not multiplied: out of the FLOPs; 0 when unknown)."""

    name: str
    parameters: int
    hidden_size: int
    num_layers: int
    num_heads: int
    embedding_parameters: int = 0

    @property
    def non_embedding_parameters(self) -> int:
        return self.parameters - self.embedding_parameters

    @classmethod
    def from_config(cls, config, name: str | None = None) -> ModelSpec:
        """The shape of ``AutoModelForSequenceClassification.from_config(config)``, built on the
        ``meta`` device (no memory, no weights)."""
        import torch
        from transformers import AutoModelForSequenceClassification

        from pt2aws.modeling import count_parameters
        from pt2aws.train.throughput import non_embedding_parameters

        with torch.device("meta"):
            model = AutoModelForSequenceClassification.from_config(config)
        total, name = count_parameters(model), name or getattr(config, "_name_or_path", "")
        shape = (config.hidden_size, config.num_hidden_layers, config.num_attention_heads)
        embedding = total - non_embedding_parameters(model)
        return cls(name or config.model_type, total, *shape, embedding)

    @classmethod
    def from_parameters(cls, parameters: float, name: str | None = None) -> ModelSpec:
        """A shape for a bare count (ours: parameters = 12 L h², h = 128 L, heads h / 128; 70e9
        gives L 71, h 9088, Llama-2-70B has 80, 8192)."""
        if parameters <= 0:
            raise ValueError(f"parameters must be positive, got {parameters!r}")
        layers = max(1, round((parameters / (12 * 128**2)) ** (1 / 3)))
        hidden = max(64, round(math.sqrt(parameters / (12 * layers)) / 64) * 64)
        label = name or f"{parameters / 1e9:.3g}B-param model"
        return cls(label, int(parameters), hidden, layers, max(1, hidden // 128))


def model_spec(model) -> ModelSpec:
    """A :class:`ModelSpec` from a spec, a ``transformers`` config, a count, ``"70B"`` /
    ``"350M"``, or a name of the catalog's ``models``. Raises ValueError for anything else."""
    if isinstance(model, ModelSpec):
        return model
    if isinstance(model, (int, float)):
        return ModelSpec.from_parameters(model)
    if hasattr(model, "num_hidden_layers"):
        return ModelSpec.from_config(model)
    text = str(model).strip()
    name = text.lower().removeprefix("facebookai/")
    if name in catalog.data()["models"] and name != "note":  # a config built from its fields
        from transformers import AutoConfig

        from pt2aws.modeling import TINY_ROBERTA_SIZES

        known, sizes = catalog.data()["models"][name], TINY_ROBERTA_SIZES
        fields = {**(sizes if name == "tiny-roberta" else {}), **known["config"]}
        return ModelSpec.from_config(AutoConfig.for_model(known["model_type"], **fields), name)
    number, scale = text[:-1], {"b": 1e9, "m": 1e6}.get(text[-1:].lower())
    if scale and number.replace(".", "", 1).isdigit():
        return ModelSpec.from_parameters(float(number) * scale, name=text)
    raise ValueError(
        f"unknown model {model!r}: pass a transformers config, a parameter count (e.g. 7e9), "
        f"'70B' / '350M', or one of {', '.join(k for k in catalog.data()['models'] if k != 'note')}"
    )


@dataclass
class Workload:
    """A training job: the model (anything :func:`model_spec` takes), examples, padded tokens per
    example, epochs, sequences per device per step, precision (:data:`PRECISIONS`)."""

    model: object
    train_examples: int = 1_000_000
    seq_len: int = 128
    epochs: float = 3.0
    micro_batch: int = 32
    precision: str = "mixed"

    def __post_init__(self) -> None:
        counts = (self.train_examples, self.seq_len, self.micro_batch)
        if min(counts) < 1 or self.epochs <= 0:
            raise ValueError(f"need train_examples, seq_len, micro_batch >= 1 and epochs > 0: "
                             f"{counts}, {self.epochs!r}")  # fmt: skip
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision {self.precision!r}: choose one of {', '.join(PRECISIONS)}")


def profile_workload(profile: str, train_examples=None, model=None, epochs=None) -> Workload:
    """The :class:`Workload` of a pt2aws profile (``train_examples`` default: the profile's cap,
    else its training split's size)."""
    from pt2aws.config import get_profile

    prof = get_profile(profile)
    examples = train_examples or prof.max_train_samples
    if examples is None:
        from pt2aws.data import load_sentiment_data

        examples = len(load_sentiment_data(prof.dataset).splits["train"])
    return Workload(
        model=model if model is not None else prof.model_name_or_path,
        train_examples=int(examples),
        seq_len=prof.max_length,
        epochs=float(epochs or prof.num_train_epochs),
        micro_batch=prof.per_device_train_batch_size,
    )


def activation_bytes(spec, micro_batch: int, seq_len: int, precision="mixed", recompute=False):
    """Activations one device keeps for the backward pass, bytes."""
    s, b, h, a = seq_len, micro_batch, spec.hidden_size, spec.num_heads
    layer = s * b * h * (34 + 5 * a * s / h)
    kept = 2 * s * b * h * spec.num_layers + layer if recompute else layer * spec.num_layers
    return kept * (2.0 if precision == "fp32" else 1.0)


def training_memory(
    spec, micro_batch=32, seq_len=128, precision="mixed", shards=1, recompute=False
):
    """``{"weights", "gradients", "optimizer", "activations", "total", "parameters"}``, bytes per
    device of a :class:`ModelSpec` (the shape checked by :class:`Workload`)."""
    out = {k: spec.parameters * v / shards for k, v in STATE_BYTES_PER_PARAM[precision].items()}
    out["activations"] = activation_bytes(spec, micro_batch, seq_len, precision, recompute)
    return out | {"total": sum(out.values()), "parameters": spec.parameters}


def inference_memory(spec, seq_len: int = 128) -> dict:
    """``{"weights", "activations", "total", "parameters"}`` bytes to serve one text in bf16."""
    weights = spec.parameters * 2.0
    layer = activation_bytes(spec, 1, seq_len) / spec.num_layers
    return {"weights": weights, "activations": layer, "total": weights + layer,
            "parameters": spec.parameters}  # fmt: skip


def plan_training(spec, it, micro_batch=32, seq_len=128, precision="mixed", max_nodes=MAX_NODES):
    """The first that fits on :class:`~pt2aws.sizing.catalog.InstanceType` ``it`` of: replicas
    (one device / DDP); FSDP over one node; the same with recomputation; FSDP over the fewest EFA
    nodes. ``{"nodes", "strategy", "recompute", "memory_per_device_bytes"}`` or None."""
    if it.kind == "inferentia":
        return None
    n, cap = it.devices, it.device_memory_bytes * (1 - MEMORY_RESERVE)
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
            return {"nodes": nodes, "strategy": strategy, "recompute": recompute,
                    "memory_per_device_bytes": memory}  # fmt: skip
    return None


def workload_class(spec, micro_batch=32, seq_len=128, precision="mixed") -> dict:
    """CMP207's class: small (one 24 GB GPU), intermediate (one node of the largest-memory
    8-GPU row), big (2-16 such nodes), huge (more). ``{"class", "strategy", "reason"}``."""
    total = training_memory(spec, micro_batch, seq_len, precision)["total"]
    eight = [i for i in catalog.load_catalog() if i.accelerator_count == 8 and i.kind == "gpu"]
    ref, gb = max(eight, key=lambda i: i.accelerator_memory_gb), total / 1e9
    if total <= CLASS_SMALL_DEVICE_GB * 1e9 * (1 - MEMORY_RESERVE):
        cls, reason = "small", f"{gb:.1f} GB of training memory fits one 24 GB GPU"
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
    return {"class": cls, "strategy": STRATEGIES[cls], "reason": reason}
