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

import math
from dataclasses import dataclass


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
        from pt2aws.sizing.memory import STATE_BYTES_PER_PARAM  # memory imports this module

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
