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
import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

CATALOG_PATH = Path(__file__).parent / "catalog" / "instances.json"

#: Training state bytes per parameter by precision (see the module docstring for the sources).
STATE_BYTES_PER_PARAM = {
    "mixed": {"weights": 4.0, "gradients": 4.0, "optimizer": 8.0},  # 16: autocast / ZeRO mixed
    "bf16": {"weights": 2.0, "gradients": 2.0, "optimizer": 4.0},  # 8: pure bf16 incl. Adam
    "fp32": {"weights": 4.0, "gradients": 4.0, "optimizer": 8.0},  # 16
}
#: Bytes per weight at inference.
INFERENCE_BYTES_PER_PARAM = {"mixed": 2.0, "bf16": 2.0, "fp32": 4.0}
#: Assumed model FLOPs utilisation for training by device kind (our assumptions, not
#: measurements: PaLM reports 46 % for a 540B model on TPU v4 (Chowdhery et al. 2022, table 3);
#: a 125M-parameter fine-tune at sequence 128 reaches less, so 35 % on GPUs; Neuron and CPUs lower).
DEFAULT_MFU = {"gpu": 0.35, "trainium": 0.30, "inferentia": 0.30, "cpu": 0.10}
#: Assumed utilisation of peak for online inference (batch of 1 to a few requests is memory- and
#: latency-bound). Replace with measured throughput (notebook 02, benchmarks/) where you have it.
DEFAULT_INFERENCE_UTILISATION = {"gpu": 0.10, "trainium": 0.10, "inferentia": 0.10, "cpu": 0.10}
#: Fraction of accelerator memory kept free for the CUDA/Neuron context, allocator fragmentation
#: and workspaces (our assumption).
MEMORY_RESERVE = 0.10
#: Paid start-up per training run and node, seconds: boot, DLC image pull, data and model load
#: (our assumption; it keeps tiny workloads from favouring the largest instances).
DEFAULT_OVERHEAD_S = 600.0
#: Largest number of nodes the ranking will plan for.
MAX_NODES = 64


class CatalogError(ValueError):
    """The instance catalog is missing a field or names an unknown accelerator/source."""


# ----------------------------------------------------------------------------------------------
# catalog
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class InstanceType:
    """One instance type from the catalog (EC2 name; SageMaker prefixes ``ml.``).

    Attributes:
        name: EC2 instance type, e.g. ``"p4d.24xlarge"``.
        kind: ``gpu`` | ``trainium`` | ``inferentia`` | ``cpu``.
        cpu: processor family, e.g. ``"Graviton3"``.
        vcpus: virtual CPUs.
        memory_gib: instance RAM, GiB.
        accelerator: accelerator name (key of the catalog's ``accelerators``) or None.
        accelerator_count: accelerators per instance.
        accelerator_memory_gb: memory per accelerator, GB (1e9 bytes); 0 for CPU instances.
        peak_bf16_tflops: dense bf16 peak of the whole instance, TFLOP/s.
        interconnect: accelerator interconnect and network, in words.
        efa: whether the instance has an Elastic Fabric Adapter.
        price_usd_per_hour: EC2 on-demand price, us-east-1, USD/hour; None when unknown.
        sources: ``{"specs", "price", "peak"}`` -> source entries of the catalog (url, date, verified).
    """

    name: str
    kind: str
    cpu: str
    vcpus: int
    memory_gib: float
    accelerator: str | None
    accelerator_count: int
    accelerator_memory_gb: float
    peak_bf16_tflops: float
    interconnect: str
    efa: bool
    price_usd_per_hour: float | None
    sources: dict

    @property
    def devices(self) -> int:
        """Training devices per instance: accelerators, or 1 (the CPU) for CPU instances."""
        return self.accelerator_count or 1

    @property
    def device_memory_bytes(self) -> float:
        """Memory of one training device in bytes (accelerator memory, else instance RAM)."""
        if self.accelerator_count:
            return self.accelerator_memory_gb * 1e9
        return self.memory_gib * 2**30

    @property
    def verified(self) -> bool:
        """True when every figure of this entry was verified in stored material."""
        return all(s.get("verified") for s in self.sources.values())

    @property
    def trains(self) -> bool:
        """Inferentia is for inference only; everything else can train."""
        return self.kind != "inferentia"


@lru_cache(maxsize=4)
def _read_catalog(path: str) -> dict:
    return json.loads(Path(path).read_text())


def load_catalog(path: str | Path | None = None) -> list[InstanceType]:
    """The instance types of ``catalog/instances.json`` (or ``path``), in file order.

    Raises:
        CatalogError: a missing field, an unknown accelerator/CPU, or an unknown source id.
    """
    data = _read_catalog(str(path or CATALOG_PATH))
    sources, accels, cpus = data["sources"], data["accelerators"], data["cpus"]
    out = []
    for row in data["instances"]:
        try:
            name = row["name"]
            srcs = {k: dict(sources[v], id=v) for k, v in row["sources"].items()}
            if row["accelerator"]:
                acc = accels[row["accelerator"]]
                mem_gb, peak = acc["memory_gb"], acc["peak_bf16_tflops"] * row["accelerator_count"]
                srcs["peak"] = dict(sources[acc["source"]], id=acc["source"])
            else:
                cpu = cpus[row["cpu"]]
                mem_gb, peak = 0.0, cpu["peak_bf16_tflops_per_vcpu"] * row["vcpus"]
                srcs["peak"] = dict(sources[cpu["source"]], id=cpu["source"])
            out.append(
                InstanceType(
                    name=name,
                    kind=row["kind"],
                    cpu=row["cpu"],
                    vcpus=int(row["vcpus"]),
                    memory_gib=float(row["memory_gib"]),
                    accelerator=row["accelerator"],
                    accelerator_count=int(row["accelerator_count"]),
                    accelerator_memory_gb=float(mem_gb),
                    peak_bf16_tflops=float(peak),
                    interconnect=row["interconnect"],
                    efa=bool(row["efa"]),
                    price_usd_per_hour=row["price_usd_per_hour"],
                    sources=srcs,
                )
            )
        except KeyError as exc:
            raise CatalogError(
                f"catalog entry {row.get('name', row)!r}: missing or unknown {exc}; every instance "
                "needs name, kind, cpu, vcpus, memory_gib, accelerator, accelerator_count, "
                "interconnect, efa, price_usd_per_hour and sources naming ids under 'sources'"
            ) from None
    return out


def catalog_meta(path: str | Path | None = None) -> dict:
    """The catalog's ``meta`` block (region, price basis, checked date, verification rule)."""
    return dict(_read_catalog(str(path or CATALOG_PATH))["meta"])


def get_instance(name: str) -> InstanceType:
    """The catalog entry for ``name`` (``"p4d.24xlarge"`` or ``"ml.p4d.24xlarge"``).

    Raises:
        KeyError: not in the catalog; the message lists what is.
    """
    bare = name.removeprefix("ml.")
    for it in load_catalog():
        if it.name == bare:
            return it
    raise KeyError(
        f"{name!r} is not in the catalog ({CATALOG_PATH.name}); known: "
        + ", ".join(i.name for i in load_catalog())
        + ". Add it to the catalog file with its sources."
    )


@lru_cache(maxsize=1)
def _botocore_enums() -> dict[str, frozenset]:
    import botocore.session

    session = botocore.session.get_session()
    sm = session.get_service_model("sagemaker")
    return {
        "ec2": frozenset(session.get_service_model("ec2").shape_for("InstanceType").enum),
        "training": frozenset(sm.shape_for("TrainingInstanceType").enum),
        "hosting": frozenset(sm.shape_for("ProductionVariantInstanceType").enum),
    }


def availability(name: str) -> dict[str, bool]:
    """Whether EC2, SageMaker training and SageMaker real-time hosting accept ``name``.

    Read from botocore's service models (the API's own enums), so it follows the installed botocore.

    Returns:
        ``{"ec2": bool, "sagemaker_training": bool, "sagemaker_hosting": bool}``.
    """
    bare = name.removeprefix("ml.")
    enums = _botocore_enums()
    return {
        "ec2": bare in enums["ec2"],
        "sagemaker_training": f"ml.{bare}" in enums["training"],
        "sagemaker_hosting": f"ml.{bare}" in enums["hosting"],
    }


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


def catalog_rows() -> list[dict]:
    """The catalog as table rows (one dict per instance) for display."""
    rows = []
    for it in load_catalog():
        rows.append(
            {
                "instance": it.name,
                "kind": it.kind,
                "vcpus": it.vcpus,
                "memory_gib": it.memory_gib,
                "accelerators": f"{it.accelerator_count} x {it.accelerator}"
                if it.accelerator
                else f"CPU ({it.cpu})",
                "accelerator_memory_gb": it.accelerator_memory_gb or None,
                "peak_bf16_tflops": round(it.peak_bf16_tflops, 1),
                "interconnect": it.interconnect,
                "price_usd_per_hour": it.price_usd_per_hour,
                "verified": it.verified,
            }
        )
    return rows


# ----------------------------------------------------------------------------------------------
# model size
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelSpec:
    """What the estimate needs to know about a transformer.

    Attributes:
        name: a label.
        parameters: trainable parameters (count).
        hidden_size: h.
        num_layers: L.
        num_heads: a.
    """

    name: str
    parameters: int
    hidden_size: int
    num_layers: int
    num_heads: int

    def __post_init__(self) -> None:
        for field in ("parameters", "hidden_size", "num_layers", "num_heads"):
            if int(getattr(self, field)) <= 0:
                raise ValueError(
                    f"ModelSpec.{field} must be a positive integer, got {getattr(self, field)!r}"
                )

    @classmethod
    def from_config(cls, config, name: str | None = None, build: bool = False) -> ModelSpec:
        """Parameters of ``AutoModelForSequenceClassification.from_config(config)``.

        BERT and RoBERTa configs are counted in closed form (exact; checked against the built
        model in the tests): embeddings ``(vocab + positions + token types)·h + 2h``, per layer
        ``4(h² + h) + 2(h·f) + f + h + 4h`` (attention q/k/v/out, FFN, two LayerNorms), head
        ``h² + h + h·n + n`` (BERT pooler + classifier, or RoBERTa's dense + out_proj). Other
        configs (or ``build=True``) are counted by building the model on PyTorch's ``meta``
        device: nothing is allocated or downloaded.

        Args:
            config: a ``transformers.PretrainedConfig`` (e.g. ``RobertaConfig()``).
            name: label; default the config's ``_name_or_path`` or ``model_type``.
            build: count by building the model even for BERT/RoBERTa.
        """
        if config.model_type in ("bert", "roberta") and not build:
            h, f, n = config.hidden_size, config.intermediate_size, config.num_labels
            embeddings = (
                config.vocab_size + config.max_position_embeddings + config.type_vocab_size
            ) * h + 2 * h
            layer = 4 * (h * h + h) + (h * f + f) + (f * h + h) + 4 * h
            params = embeddings + config.num_hidden_layers * layer + (h * h + h) + (h * n + n)
        else:
            import torch
            from transformers import AutoModelForSequenceClassification

            with torch.device("meta"):
                model = AutoModelForSequenceClassification.from_config(config)
            params = sum(p.numel() for p in model.parameters())
        return cls(
            name=name or getattr(config, "_name_or_path", "") or config.model_type,
            parameters=int(params),
            hidden_size=int(config.hidden_size),
            num_layers=int(config.num_hidden_layers),
            num_heads=int(config.num_attention_heads),
        )

    @classmethod
    def from_parameters(
        cls,
        parameters: float,
        name: str | None = None,
        hidden_size: int | None = None,
        num_layers: int | None = None,
        num_heads: int | None = None,
    ) -> ModelSpec:
        """A spec from a parameter count; missing shape fields are estimated.

        Estimate (our assumption, close to published LLM shapes): ``parameters ≈ 12·L·h²`` with
        ``h = 128·L`` (width/depth 128), heads ``h/128``. For 70e9 this gives L = 71, h = 9088, a = 71
        (Llama-2-70B: 80, 8192, 64).
        """
        if parameters <= 0:
            raise ValueError(f"parameters must be positive, got {parameters!r}")
        if num_layers is None:
            num_layers = max(1, round((parameters / (12 * 128**2)) ** (1 / 3)))
        if hidden_size is None:
            hidden_size = max(64, int(round(math.sqrt(parameters / (12 * num_layers)) / 64) * 64))
        if num_heads is None:
            num_heads = max(1, hidden_size // 128)
        return cls(
            name=name or f"{parameters / 1e9:.3g}B-param model",
            parameters=int(parameters),
            hidden_size=hidden_size,
            num_layers=num_layers,
            num_heads=num_heads,
        )


def roberta_base_config(num_labels: int = 2):
    """``RobertaConfig`` with the values of ``FacebookAI/roberta-base``'s ``config.json``.

    ``RobertaConfig()`` defaults are roberta-base's architecture except two embedding sizes:
    roberta-base has ``max_position_embeddings=514`` (512 + padding offset 2) and
    ``type_vocab_size=1`` (source: huggingface.co/FacebookAI/roberta-base/blob/main/config.json).
    """
    from transformers import RobertaConfig

    config = RobertaConfig(max_position_embeddings=514, type_vocab_size=1, num_labels=num_labels)
    config._name_or_path = "FacebookAI/roberta-base"
    return config


def model_spec(model) -> ModelSpec:
    """A :class:`ModelSpec` from a spec, a ``transformers`` config, a number or a known name.

    Args:
        model: a :class:`ModelSpec`; a ``PretrainedConfig``; a parameter count (int/float); or one
            of ``"roberta-base"`` / ``"FacebookAI/roberta-base"`` (built offline),
            ``"roberta-large"``, ``"tiny-roberta"``, ``"minilm-l6"``, or ``"<n>B"`` (e.g. ``"70B"``).

    Raises:
        ValueError: an unknown name (the message lists the accepted forms).
    """
    if isinstance(model, ModelSpec):
        return model
    if isinstance(model, (int, float)):
        return ModelSpec.from_parameters(model)
    if hasattr(model, "num_hidden_layers"):
        return ModelSpec.from_config(model)
    key = str(model).strip()
    low = key.lower().removeprefix("facebookai/")
    if low == "roberta-base":
        return ModelSpec.from_config(roberta_base_config(), name="roberta-base")
    if low == "roberta-large":
        from transformers import RobertaConfig

        config = RobertaConfig(
            hidden_size=1024,
            num_hidden_layers=24,
            num_attention_heads=16,
            intermediate_size=4096,
            max_position_embeddings=514,
            type_vocab_size=1,
        )
        return ModelSpec.from_config(config, name="roberta-large")
    if low in ("tiny-roberta", "minilm-l6"):
        from transformers import BertConfig, RobertaConfig

        if low == "tiny-roberta":  # pt2aws.modeling.build_tiny_roberta, its largest vocab
            config = RobertaConfig(
                vocab_size=2000,
                hidden_size=64,
                num_hidden_layers=2,
                num_attention_heads=2,
                intermediate_size=128,
                max_position_embeddings=130,
                type_vocab_size=1,
            )
        else:  # all-MiniLM-L6-v2 (BERT, 6 layers, hidden 384)
            config = BertConfig(
                hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536
            )
        return ModelSpec.from_config(config, name=low)
    if low.endswith("b") and low[:-1].replace(".", "", 1).isdigit():
        return ModelSpec.from_parameters(float(low[:-1]) * 1e9, name=key)
    if low.endswith("m") and low[:-1].replace(".", "", 1).isdigit():
        return ModelSpec.from_parameters(float(low[:-1]) * 1e6, name=key)
    raise ValueError(
        f"unknown model {model!r}: pass a transformers config, a parameter count (e.g. 7e9), "
        "'70B' / '350M', or one of roberta-base, roberta-large, tiny-roberta, minilm-l6"
    )


# ----------------------------------------------------------------------------------------------
# memory
# ----------------------------------------------------------------------------------------------
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


# ----------------------------------------------------------------------------------------------
# fitting, classes, ranking
# ----------------------------------------------------------------------------------------------
def usable_bytes(instance: InstanceType) -> float:
    """Memory of one device that the model may use, bytes (``1 - MEMORY_RESERVE`` of it)."""
    return instance.device_memory_bytes * (1 - MEMORY_RESERVE)


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


# ----------------------------------------------------------------------------------------------
# the recommendation (notebook 00 and `pt2aws recommend`)
# ----------------------------------------------------------------------------------------------
@dataclass
class Workload:
    """What to size: model, data, schedule. Every field has a default except ``model``.

    Attributes:
        model: anything :func:`model_spec` accepts (name, config, count).
        train_examples: training examples (sequences).
        seq_len: tokens per example (padded length).
        epochs: passes over the data.
        micro_batch: sequences per device per step.
        precision: ``mixed`` | ``bf16`` | ``fp32``.
    """

    model: object
    train_examples: int = 1_000_000
    seq_len: int = 128
    epochs: float = 3.0
    micro_batch: int = 32
    precision: str = "mixed"

    def __post_init__(self) -> None:
        if int(self.train_examples) < 1:
            raise ValueError(f"train_examples must be >= 1, got {self.train_examples!r}")
        if self.precision not in STATE_BYTES_PER_PARAM:
            raise ValueError(
                f"precision {self.precision!r}: choose one of {', '.join(STATE_BYTES_PER_PARAM)}"
            )

    @property
    def train_tokens(self) -> int:
        """Tokens per epoch = examples x seq_len."""
        return int(self.train_examples) * int(self.seq_len)


def profile_workload(
    profile: str, train_examples: int | None = None, model=None, epochs: float | None = None
) -> Workload:
    """The :class:`Workload` of a pt2aws profile (its model, data size, length, batch, epochs).

    Args:
        profile: ``smoke`` | ``local`` | ``full``.
        train_examples: override; default the profile's ``max_train_samples``, else the size of
            the profile's training split (loads the data once, a few seconds).
        model: override the profile's model (anything :func:`model_spec` accepts).
        epochs: override the profile's epochs.
    """
    from pt2aws.config import get_profile

    prof = get_profile(profile)
    if train_examples is None:
        train_examples = prof.max_train_samples
    if train_examples is None:
        from pt2aws.data import load_sentiment_data

        train_examples = len(load_sentiment_data(prof.dataset).splits["train"])
    return Workload(
        model=model if model is not None else prof.model_name_or_path,
        train_examples=int(train_examples),
        seq_len=prof.max_length,
        epochs=float(epochs if epochs is not None else prof.num_train_epochs),
        micro_batch=prof.per_device_train_batch_size,
    )


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


def _hours(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def training_table(rec: dict, limit: int | None = None) -> str:
    """Markdown table of the training ranking (cheapest first)."""
    lines = [
        "| instance | accelerators | nodes | strategy | GB/device | time | USD | | note |",
        "| --- | --- | ---: | --- | ---: | ---: | ---: | --- | --- |",
    ]
    for r in rec["training"][:limit]:
        mark = " ".join(
            m for m, on in (("cheapest", r["cheapest"]), ("fastest", r["fastest"])) if on
        )
        cost = "n/a (no price)" if r["cost_usd"] is None else f"{r['cost_usd']:.2f}"
        lines.append(
            f"| {r['instance']} | {r['accelerators']} | {r['nodes']} | {r['strategy']} | "
            f"{r['memory_per_device_gb']:.1f} | {_hours(r['time_s'])} | {cost} | {mark} | "
            f"{r['note']} |"
        )
    return "\n".join(lines)


def inference_table(rec: dict) -> str:
    """Markdown table of the inference ranking (cost per 1M requests)."""
    if not rec["inference"]:
        need = rec["memory"]["inference_bf16"]["total"] / 1e9
        return (
            f"no single-accelerator or CPU instance of the inference list holds the {need:.1f} GB "
            "of bf16 weights: serve sharded over a multi-GPU instance (out of pt2aws's scope)"
        )
    lines = [
        "| instance | processor | arch | requests/s | USD/hour | USD per 1M requests | | note |",
        "| --- | --- | --- | ---: | ---: | ---: | --- | --- |",
    ]
    for r in rec["inference"]:
        mark = " ".join(
            m for m, on in (("cheapest", r["cheapest"]), ("fastest", r["fastest"])) if on
        )
        lines.append(
            f"| {r['instance']} | {r['processor']} | {r['arch']} | {r['throughput_rps']:.0f} | "
            f"{r['price_usd_per_hour']:.4g} | {r['usd_per_million']:.3f} | {mark} | {r['note']} |"
        )
    return "\n".join(lines)


def format_sizing(rec: dict) -> str:
    """Model, data, memory breakdown and workload class (the head of the recommendation)."""
    m, w, c = rec["model"], rec["workload"], rec["class"]
    mem, inf = rec["memory"]["training_one_device"], rec["memory"]["inference_bf16"]
    gb = 1e9
    lines = [
        f"model {m['name']}: {m['parameters']:,} parameters (h={m['hidden_size']}, "
        f"L={m['num_layers']}, a={m['num_heads']})",
        f"data: {w['train_examples']:,} examples x {w['seq_len']} tokens x {w['epochs']:g} epochs "
        f"= {w['train_tokens_per_epoch'] * w['epochs']:.3g} tokens; {w['training_flops']:.3g} FLOPs "
        "(6 x params x tokens)",
        f"training memory on one device ({w['precision']}, micro-batch {w['micro_batch']}): "
        f"weights {mem['weights'] / gb:.2f} + gradients {mem['gradients'] / gb:.2f} + AdamW "
        f"{mem['optimizer'] / gb:.2f} + activations {mem['activations'] / gb:.2f} = "
        f"{mem['total'] / gb:.2f} GB",
        f"inference memory (bf16, batch 1): {inf['total'] / gb:.3f} GB",
        f"workload class: {c['class']} ({c['reason']}) -> {c['strategy']}",
    ]
    return "\n".join(lines)


def format_recommendation(rec: dict, limit: int | None = 12) -> str:
    """The text that notebook 00 and ``pt2aws recommend`` print."""
    lines = [
        format_sizing(rec),
        "",
        "Training: instances that fit, cheapest first (MFU "
        + ", ".join(f"{k} {v:.0%}" for k, v in rec["assumptions"]["mfu"].items())
        + f"; cost = (time + {rec['assumptions']['overhead_s']:.0f} s start-up) x nodes x EC2 "
        "on-demand us-east-1)",
        training_table(rec, limit),
        "",
        "Inference: cost per 1M requests (throughput estimated from peak; replace with measured)",
        inference_table(rec),
        "",
        f"cheapest training: {rec['cheapest']}; fastest: {rec['fastest']}; cheapest inference: "
        f"{rec['inference_cheapest']}",
        "recommended for pt2aws as is (cheapest CUDA/CPU instance): "
        + (
            f"{rec['recommended']['nodes']} x {rec['recommended']['instance']} "
            f"({rec['recommended']['strategy']})"
            if rec["recommended"]
            else "none fits"
        ),
        f"catalog checked {rec['catalog']['checked']}; figures marked verified=false in "
        "src/pt2aws/catalog/instances.json must be checked before quoting",
    ]
    return "\n".join(lines)
