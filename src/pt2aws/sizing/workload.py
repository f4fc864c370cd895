"""What to size: a model's shape (:class:`ModelSpec`) and a training job (:class:`Workload`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from pt2aws.sizing import catalog

#: Training precisions (``mixed``: bf16 autocast over fp32 weights and AdamW states).
PRECISIONS = ("mixed", "bf16", "fp32")


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
        return cls(
            name or config.model_type, total, *shape, total - non_embedding_parameters(model)
        )

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


def _config(name: str):
    """The ``transformers`` config of a model the catalog knows by name (``models``)."""
    from transformers import AutoConfig

    from pt2aws.modeling import TINY_ROBERTA_SIZES

    known, sizes = (
        catalog.data()["models"][name],
        TINY_ROBERTA_SIZES if name == "tiny-roberta" else {},
    )
    return AutoConfig.for_model(known["model_type"], **sizes, **known["config"])


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
    if name in catalog.data()["models"] and name != "note":
        return ModelSpec.from_config(_config(name), name=name)
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
        if self.train_examples < 1 or self.epochs <= 0:
            raise ValueError(f"need train_examples >= 1 and epochs > 0: {self.train_examples!r}, "
                             f"{self.epochs!r}")  # fmt: skip
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision {self.precision!r}: choose one of {', '.join(PRECISIONS)}")

    @property
    def train_tokens(self) -> int:
        """Tokens per epoch."""
        return self.train_examples * self.seq_len


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
