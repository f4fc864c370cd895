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

Variants and shared settings: :mod:`pt2aws.lessons.training_ab.variants`.

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
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from pt2aws.env.machine import available_cpus, cpu_name
from pt2aws.lessons.training_ab.variants import BenchSettings, Variant, default_variants
from pt2aws.processes import die_with_parent
from pt2aws.train.progress import PREFIX as PROGRESS_PREFIX
from pt2aws.train.progress import PROGRESS_ENV

logger = logging.getLogger(__name__)


#: Mean of the last this many per-step losses is the reported final loss.
FINAL_LOSS_STEPS = 10


def _final_loss(log: list[dict]) -> float | None:
    losses = [r["loss"] for r in log if "loss" in r]
    return statistics.fmean(losses[-FINAL_LOSS_STEPS:]) if losses else None


def read_run(output_dir: str | Path) -> dict:
    """The benchmark figures of one finished run, from its ``metrics.json`` and per-step log.

    Args:
        output_dir: the run's ``--output_dir``.

    Returns:
        ``{"samples_per_s", "tokens_per_s" (non-pad tokens), "warmup_s" (seconds of the
        ``--benchmark_warmup_steps`` excluded from both rates), "peak_memory_bytes",
        "final_loss" (mean of the last :data:`FINAL_LOSS_STEPS` logged losses), "pad_fraction",
        "num_compiles", "steps"}``; a figure the run did not write is ``None``.

    Raises:
        FileNotFoundError: no ``metrics.json`` (the run failed before writing it).
    """
    from pt2aws.rundir import read_jsonl

    output_dir = Path(output_dir)
    metrics = json.loads((output_dir / "metrics.json").read_text())
    log_path = output_dir / "train_log.jsonl"
    log = read_jsonl(log_path) if log_path.is_file() else []
    return {
        "samples_per_s": metrics.get("train_samples_per_second"),
        "tokens_per_s": metrics.get("train_tokens_per_second"),
        "warmup_s": metrics.get("warmup_time_s"),
        "peak_memory_bytes": metrics.get("peak_memory_bytes"),
        "final_loss": _final_loss(log),
        "pad_fraction": metrics.get("pad_fraction"),
        "num_compiles": metrics.get("num_compiles"),
        "steps": metrics.get("train_steps", len(log)),
    }


def _progress_record(line: str) -> dict | None:
    """The JSON object of a progress line (:mod:`pt2aws.train.progress`), else None."""
    if not line.startswith(PROGRESS_PREFIX):
        return None
    try:
        return json.loads(line[len(PROGRESS_PREFIX) :])
    except json.JSONDecodeError:
        return None


def read_partial_run(output: str, settings: BenchSettings) -> dict | None:
    """What a run stopped at the time budget measured, from the progress lines it printed.

    Both runners report each optimizer step with its training seconds so far
    (:mod:`pt2aws.train.progress`); every step trains ``settings.batch_size`` examples.

    Args:
        output: the run's output up to the stop.
        settings: the A/B's settings (batch size, warm-up steps).

    Returns:
        :func:`read_run`'s keys (``samples_per_s`` over the steps after the warm-up when there
        are any, else over all steps done; figures the run never wrote are ``None``) plus
        ``stopped_at_budget: True``; ``None`` if no step finished.
    """
    times, losses = {}, []
    for line in output.splitlines():
        record = _progress_record(line)
        if record and record.get("step", 0) > 0 and "train_time_s" in record:
            times[record["step"]] = record["train_time_s"]
            if "loss" in record:
                losses.append({"loss": record["loss"]})
    if not times:
        return None
    done, warm = max(times), settings.warmup_steps
    first = warm if done > warm and warm in times else 0
    start = times[first] if first else 0.0
    elapsed = times[done] - start
    return {
        "samples_per_s": (done - first) * settings.batch_size / elapsed if elapsed > 0 else None,
        "tokens_per_s": None,
        "warmup_s": start if first else None,
        "peak_memory_bytes": None,
        "final_loss": _final_loss(losses),
        "pad_fraction": None,
        "num_compiles": None,
        "steps": done,
        "stopped_at_budget": True,
    }


def run_variant(
    variant: Variant,
    settings: BenchSettings,
    output_dir: str | Path,
    stream=None,
    time_limit_s: float | None = None,
) -> dict:
    """Run one variant once in a fresh process; returns :func:`read_run`, ``wall_s``, ``train_s``.

    Args:
        variant: what to run.
        settings: what every variant shares.
        output_dir: the run's folder.
        stream: where the one "done" line goes; ``None``: quiet.
        time_limit_s: this run's share of the A/B's time budget, in seconds of training (its
            start-up, evaluation and saving do not count): the run is stopped after the step
            that reaches it and reports the steps it did (:func:`read_partial_run`). ``None``:
            no budget.

    Returns:
        The figures, with ``wall_s`` (the process, start to end) and ``train_s`` (its seconds
        of training, what the budget counts).

    Raises:
        RuntimeError: the process failed, or ran past ``settings.timeout_s`` (with the tail of
            its output).
    """
    output_dir = Path(output_dir)
    module = "pt2aws.train" if variant.runner == "pt2aws" else "pt2aws.lessons.training_ab"
    cmd = [sys.executable, "-m", module]
    if variant.runner == "trainer":
        cmd.append("trainer")
    cmd += settings.train_args(variant, output_dir)
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "TOKENIZERS_PARALLELISM": "false",
        PROGRESS_ENV: "lines",  # each step with its training seconds: what the budget counts
        **settings.extra_env,
    }
    output: list[str] = []
    train_s, at_budget, timed_out = 0.0, False, threading.Event()
    started = time.perf_counter()
    with subprocess.Popen(
        cmd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=die_with_parent(),
    ) as proc:
        watchdog = threading.Timer(settings.timeout_s, lambda: (timed_out.set(), proc.kill()))
        watchdog.start()
        try:
            for line in proc.stdout:
                output.append(line)
                record = _progress_record(line)
                if not record or "train_time_s" not in record:
                    continue
                train_s = record["train_time_s"]
                last = record["step"] >= record["total"]
                if time_limit_s is not None and train_s >= time_limit_s and not last:
                    at_budget = True
                    proc.kill()
                    break
        finally:
            watchdog.cancel()
        code = proc.wait()
    wall = time.perf_counter() - started
    if timed_out.is_set():
        raise RuntimeError(f"{variant.name}: no result within {settings.timeout_s} s")
    if at_budget:
        partial = read_partial_run("".join(output), settings)
        if stream is not None:
            print(
                f"  {variant.name:18s} stopped at its budget share ({time_limit_s:.0f} s of "
                f"training) after {partial['steps']} of {settings.max_steps} steps",
                file=stream,
                flush=True,
            )
        shutil.rmtree(output_dir, ignore_errors=True)  # a half-written run is not kept
        return {**partial, "wall_s": wall, "train_s": train_s}
    if code != 0:
        lines = [ln.rstrip("\n") for ln in output if _progress_record(ln) is None]
        tail = "\n".join(lines[-25:])
        raise RuntimeError(f"{variant.name} failed (exit {code}):\n{tail}")
    if stream is not None:
        print(f"  {variant.name:18s} done in {wall:5.1f} s", file=stream, flush=True)
    result = {**read_run(output_dir), "wall_s": wall, "train_s": train_s}
    if not settings.keep_models:
        for sub in ("model", "trainer", "checkpoints"):
            shutil.rmtree(output_dir / sub, ignore_errors=True)
    return result


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

    With ``settings.budget_s`` the whole A/B keeps to that many seconds of training (the
    processes' start-up, evaluation and saving come on top, about 10-20 s per run on 2 cores):
    each run gets an equal share of what is left (a run that finishes early leaves more to the
    next), and a run that reaches its share is stopped after that step and reports the steps it
    did (:func:`read_partial_run`). A run whose share is spent still does one step.

    Args:
        settings: what all variants share.
        out_dir: folder for the runs (``<variant>/<repeat>/``) and ``ab.json``.
        variants: default :func:`pt2aws.lessons.training_ab.variants.default_variants`.
        stream: where progress lines go (e.g. ``sys.stdout``); ``None`` = quiet.
        on_result: called with the partial result after every run (e.g. to rewrite a table).

    Returns:
        ``{"settings", "device", "torch", "rows", "runs", "failed"}``; ``rows`` as from
        :func:`summarize`, ``runs`` ``{variant: [read_run + wall_s, ...]}``, ``failed``
        ``{variant: error}`` (a failed variant is not run again).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    variants = list(variants or default_variants())
    runs: dict[str, list[dict]] = {v.name: [] for v in variants}
    failed: dict[str, str] = {}
    device = _device_name()
    plan = [(r, v) for r in range(settings.repeats) for v in variants]
    spent = 0.0  # seconds of training so far, what the budget counts
    for i, (r, v) in enumerate(plan):
        if v.name in failed:
            continue
        if stream is not None and settings.repeats > 1 and v is variants[0]:
            print(f"repeat {r + 1}/{settings.repeats}", file=stream, flush=True)
        share = None
        if settings.budget_s:  # this run's fair share of what is left
            left = max(settings.budget_s - spent, 0.0)
            share = left / sum(1 for _, w in plan[i:] if w.name not in failed)
        slug = v.name.replace(" ", "_").replace("+", "plus_")
        try:
            runs[v.name].append(
                run_variant(v, settings, out_dir / slug / str(r), stream, time_limit_s=share)
            )
            spent += runs[v.name][-1].get("train_s") or 0.0
        except RuntimeError as err:
            failed[v.name] = str(err)
            if stream is not None:
                print(f"  {v.name}: FAILED ({str(err).splitlines()[0]})", file=stream)
            else:
                logger.error("%s", err)
        # after every run, so a time limit still leaves the table so far
        _save(_result(settings, device, variants, runs, failed), out_dir, on_result)
    return _save(_result(settings, device, variants, runs, failed), out_dir, on_result)


def _device_name() -> str:
    import torch

    if torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return f"CPU x{available_cpus()} ({cpu_name()})"


def _result(settings, device, variants, runs, failed) -> dict:
    import torch

    return {
        "settings": dataclasses.asdict(settings),
        "device": device,
        "torch": torch.__version__,
        "rows": summarize(variants, runs),
        "runs": runs,
        "failed": failed,
    }


def _save(result: dict, out_dir: Path, on_result) -> dict:
    (out_dir / "ab.json").write_text(json.dumps(result, indent=2, default=str))
    if on_result is not None:
        on_result(result)
    return result


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
            "steps",
        ):
            row[key] = _median([run.get(key) for run in done])
        row["stopped_at_budget"] = sum(bool(run.get("stopped_at_budget")) for run in done)
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
    budget = f" | budget {s['budget_s']:.0f} s of training" if s.get("budget_s") else ""
    lines = [
        f"device: {result['device']} | torch {result['torch']} | model {s['model']} | "
        f"batch {s['batch_size']} | max_length {s['max_length']} | {s['max_steps']} steps "
        f"({s['warmup_steps']} warm-up excluded){budget} | median of up to {s['repeats']} "
        "interleaved repeats (n: runs done)",
        "",
        "| variant | samples/s | tokens/s | vs baseline | vs Trainer | warm-up s | peak mem MB "
        "| final loss | pad frac | compiles | run s | steps | n |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in result["rows"]:
        mem = row["peak_memory_bytes"] / 2**20 if row["peak_memory_bytes"] else None
        steps = _fmt(row.get("steps"), ".0f")
        if row.get("stopped_at_budget"):
            steps += " (budget)"
        lines.append(
            f"| {row['variant']} | {_fmt(row['samples_per_s'], '.1f')} "
            f"| {_fmt(row['tokens_per_s'], ',.0f')} | {_fmt(row['vs_baseline'], '.2f')}x "
            f"| {_fmt(row['vs_trainer'], '.2f')}{'x' if row['vs_trainer'] else ''} "
            f"| {_fmt(row['warmup_s'], '.1f')} | {_fmt(mem, ',.0f')} "
            f"| {_fmt(row['final_loss'], '.4f')} | {_fmt(row['pad_fraction'], '.3f')} "
            f"| {_fmt(row['num_compiles'], 'd') if isinstance(row['num_compiles'], int) else _fmt(row['num_compiles'], '.0f')} "
            f"| {_fmt(row['wall_s'], '.0f')} | {steps} | {row['repeats']} |"
        )
    for name, err in result.get("failed", {}).items():
        lines.append(f"\nFAILED {name}: {err.splitlines()[0]}")
    lines.append(
        "\nsamples/s and tokens/s (non-pad tokens) are steady-state, after the warm-up steps; "
        "warm-up s includes compilation. vs baseline / vs Trainer (HF Trainer at the same flags) are "
        "medians of per-repeat ratios. "
        "peak mem: CUDA max allocated on GPU, process peak RSS on CPU. final loss: mean of the "
        f"last {FINAL_LOSS_STEPS} steps. steps: optimizer steps done; (budget): stopped at its "
        "share of the A/B's time budget, its samples/s are over the steps it did."
    )
    return "\n".join(lines)
