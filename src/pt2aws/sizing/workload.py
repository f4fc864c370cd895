"""What to size: a model's shape (:class:`ModelSpec`) and a training job (:class:`Workload`).

:func:`model_spec` turns a name (``"roberta-base"``, ``"tiny-roberta"``, ``"70B"``), a
``transformers`` config or a parameter count into the few numbers the memory and compute
formulas need (parameters, hidden size, layers, heads), offline: nothing is downloaded.
:func:`profile_workload` builds the :class:`Workload` of a pt2aws profile.
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
        embedding_parameters: parameters in the embedding tables (looked up, not multiplied:
            left out of the training FLOPs); 0 where unknown (a bare parameter count).
    """

    name: str
    parameters: int
    hidden_size: int
    num_layers: int
    num_heads: int
    embedding_parameters: int = 0

    @property
    def non_embedding_parameters(self) -> int:
        """``N`` of the training FLOPs (:func:`pt2aws.train.throughput.training_flops_per_token`)."""
        return self.parameters - self.embedding_parameters

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
            tables = embeddings - 2 * h  # the embeddings' LayerNorm multiplies: not a table
        else:
            import torch
            from transformers import AutoModelForSequenceClassification

            from pt2aws.train.throughput import non_embedding_parameters

            with torch.device("meta"):
                model = AutoModelForSequenceClassification.from_config(config)
            params = sum(p.numel() for p in model.parameters())
            tables = params - non_embedding_parameters(model)
        return cls(
            name=name or getattr(config, "_name_or_path", "") or config.model_type,
            parameters=int(params),
            hidden_size=int(config.hidden_size),
            num_layers=int(config.num_hidden_layers),
            num_heads=int(config.num_attention_heads),
            embedding_parameters=int(tables),
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
        (Llama-2-70B: 80, 8192, 64). The embeddings are unknown here and counted as 0 (for a
        70B LLM they are about 1-2% of the parameters).
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


#: Models :func:`model_spec` knows by name (their configs are built offline).
KNOWN_MODELS = ("roberta-base", "roberta-large", "tiny-roberta", "minilm-l6")


def _named_config(name: str):
    """The ``transformers`` config of a model of :data:`KNOWN_MODELS`, else None."""
    if name not in KNOWN_MODELS:
        return None  # without importing transformers (seconds)
    from transformers import BertConfig, RobertaConfig

    if name == "roberta-base":
        return roberta_base_config()
    if name == "roberta-large":  # FacebookAI/roberta-large's config.json
        return RobertaConfig(
            hidden_size=1024,
            num_hidden_layers=24,
            num_attention_heads=16,
            intermediate_size=4096,
            max_position_embeddings=514,
            type_vocab_size=1,
        )
    if name == "tiny-roberta":  # pt2aws.modeling.build_tiny_roberta at its largest vocabulary
        from pt2aws.modeling import TINY_ROBERTA_SIZES

        # positions: the tokenizer's default 128 tokens + RoBERTa's padding offset 2
        return RobertaConfig(**TINY_ROBERTA_SIZES, max_position_embeddings=128 + 2)
    # minilm-l6: all-MiniLM-L6-v2 (BERT, 6 layers, hidden 384)
    return BertConfig(
        hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536
    )


def _parameter_count(text: str) -> float | None:
    """``"70B"`` -> 7e10, ``"350M"`` -> 3.5e8 (case-insensitive); None for anything else."""
    scale = {"b": 1e9, "m": 1e6}.get(text[-1:].lower())
    number = text[:-1]
    if scale is None or not number.replace(".", "", 1).isdigit():
        return None
    return float(number) * scale


def model_spec(model) -> ModelSpec:
    """A :class:`ModelSpec` from a spec, a ``transformers`` config, a number or a known name.

    Args:
        model: a :class:`ModelSpec`; a ``PretrainedConfig``; a parameter count (int/float); or one
            of ``"roberta-base"`` / ``"FacebookAI/roberta-base"`` (built offline),
            ``"roberta-large"``, ``"tiny-roberta"``, ``"minilm-l6"``, or ``"<n>B"`` / ``"<n>M"``
            (e.g. ``"70B"``, ``"350M"``).

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
    name = key.lower().removeprefix("facebookai/")
    config = _named_config(name)
    if config is not None:
        return ModelSpec.from_config(config, name=name)
    count = _parameter_count(key)
    if count is not None:
        return ModelSpec.from_parameters(count, name=key)
    raise ValueError(
        f"unknown model {model!r}: pass a transformers config, a parameter count (e.g. 7e9), "
        f"'70B' / '350M', or one of {', '.join(KNOWN_MODELS)}"
    )


#: Training precisions: ``mixed`` (bf16 autocast over fp32 weights and AdamW states), ``bf16``
#: (weights, gradients and AdamW states in bf16), ``fp32``; the memory tables of
#: :mod:`pt2aws.sizing.memory` have a row for each.
PRECISIONS = ("mixed", "bf16", "fp32")


@dataclass
class Workload:
    """What to size: model, data, schedule. Every field has a default except ``model``.

    Attributes:
        model: anything :func:`model_spec` accepts (name, config, count).
        train_examples: training examples (sequences).
        seq_len: tokens per example (padded length).
        epochs: passes over the data.
        micro_batch: sequences per device per step.
        precision: one of :data:`PRECISIONS`.
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
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision {self.precision!r}: choose one of {', '.join(PRECISIONS)}")

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

    Raises:
        ValueError: an unknown profile, or ``train_examples`` < 1.
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
