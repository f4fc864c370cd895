"""Run the training A/B: each variant in a fresh process, repeats interleaved, one bar over every
step, a table of medians. A run's speed is its batch over the median of its steady-state step
times (a stall of a few steps does not move it); a row whose run saw a busy machine is named
under the table. The single-flag rows' ratios are recorded for the training's ``auto`` flags."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

from pt2aws.env.machine import available_cpus, cpu_name, default_num_threads
from pt2aws.lessons.training_ab.variants import FLAG_OF, BenchSettings, Variant
from pt2aws.processes import stream_child
from pt2aws.train.progress import PROGRESS_ENV, parse

#: Mean of the last this many per-step losses is the reported final loss.
FINAL_LOSS_STEPS = 10
#: A run shared a busy machine where its slowest steady step took this many times its fastest,
#: or where other processes kept the load average above half the CPUs.
BUSY_SPREAD = 2.0


def _figures(records: list[dict], settings: BenchSettings, output_dir: Path | None) -> dict:
    """One run's figures: speed from its progress ``records``; memory, padding, compiles, tokens
    and the final loss from a finished run's ``output_dir``."""
    times = {r["step"]: r["train_time_s"] for r in records if "train_time_s" in r}
    times.setdefault(0, 0.0)
    done, warm = max(times), settings.warmup_steps
    first = warm if done > warm and warm in times else 0
    durations = [times[s] - times[s - 1] for s in range(first + 1, done + 1) if s - 1 in times]
    median = statistics.median(durations) if durations else None
    losses = [r["loss"] for r in records if "loss" in r]
    out = {
        "samples_per_s": settings.batch_size / median if median else None,
        "spread": max(durations) / min(durations) if durations and min(durations) > 0 else None,
        "warmup_s": times[first] if first else None,
        "steps": done,
        **dict.fromkeys(("tokens_per_s", "peak_memory_bytes", "pad_fraction", "num_compiles")),
    }
    if output_dir is not None:
        metrics = json.loads((output_dir / "metrics.json").read_text())
        log = output_dir / "train_log.jsonl"
        losses = [json.loads(line)["loss"] for line in log.read_text().splitlines()]
        per_sample = metrics["train_tokens_per_second"] / metrics["train_samples_per_second"]
        out |= {k: metrics.get(k) for k in ("peak_memory_bytes", "pad_fraction", "num_compiles")}
        out["tokens_per_s"] = per_sample * out["samples_per_s"] if out["samples_per_s"] else None
    out["final_loss"] = statistics.fmean(losses[-FINAL_LOSS_STEPS:]) if losses else None
    return out


def run_variant(variant: Variant, settings: BenchSettings, output_dir, on_step, limit_s=None):
    """Run ``variant`` once in a fresh process: :func:`_figures` plus ``wall_s``, ``train_s``,
    ``other_load`` (the highest load average seen, less this run's threads) and
    ``stopped_at_budget`` (after ``limit_s`` seconds of training); ``on_step(step)`` as steps
    finish. Raises RuntimeError: the process failed or ran past ``settings.timeout_s``."""
    output_dir, threads = Path(output_dir), settings.num_threads or default_num_threads()
    peer = variant.runner == "trainer"
    module = "pt2aws.lessons.training_ab.trainer_peer" if peer else "pt2aws.train"
    env = {"TOKENIZERS_PARALLELISM": "false", PROGRESS_ENV: "lines"}
    records, load, started = [], os.getloadavg()[0], time.perf_counter()

    def on_line(line: str) -> bool:  # True: stop the run, its budget share is spent
        record = parse(line) or {}
        if "train_time_s" in record:
            records.append(record)
            on_step(record["step"])
            over = limit_s is not None and record["train_time_s"] >= limit_s
            return over and record["step"] < record["total"]
        return False

    cmd = [sys.executable, "-m", module, *settings.train_args(variant, output_dir)]
    stopped = stream_child(cmd, on_line, what=variant.name, env=env, timeout_s=settings.timeout_s)
    if not records:
        raise RuntimeError(f"{variant.name}: no training step reported")
    figures = _figures(records, settings, None if stopped else output_dir)
    for sub in ("model", "trainer", "checkpoints") if not stopped else ("",):  # all, if stopped
        shutil.rmtree(output_dir / sub, ignore_errors=True)
    return figures | {
        "wall_s": time.perf_counter() - started,
        "train_s": records[-1]["train_time_s"],
        "other_load": max(load, os.getloadavg()[0]) - threads,
        "stopped_at_budget": stopped,
    }


def run_ab(settings: BenchSettings, out_dir, variants, stream=None, on_result=None) -> dict:
    """Every variant ``settings.repeats`` times, interleaved; ``ab.json`` and ``on_result``
    after every run. With ``settings.budget_s`` each run gets an equal share of the training
    seconds left. ``stream``: where the bar and lines go (None: quiet). Returns ``{"settings",
    "device", "torch", "cpus", "rows", "runs", "failed"}``."""
    import torch
    from tqdm.auto import tqdm

    out_dir, variants, cuda = Path(out_dir), list(variants), torch.cuda.is_available()
    out_dir.mkdir(parents=True, exist_ok=True)
    runs, failed = {v.name: [] for v in variants}, {}
    device = torch.cuda.get_device_name(0) if cuda else f"CPU x{available_cpus()} ({cpu_name()})"
    result = {
        "settings": dataclasses.asdict(settings),
        "device": device,
        "torch": torch.__version__,
        "cpus": available_cpus(),
        "rows": [],
        "runs": runs,
        "failed": failed,
    }
    plan = [(r, v) for r in range(settings.repeats) for v in variants]
    started, spent, steps, quiet = time.perf_counter(), 0.0, settings.max_steps, stream is None
    bar = tqdm(total=len(plan) * steps, desc="A/B", unit="step", file=stream, disable=quiet)
    for i, (r, v) in enumerate(plan):
        if v.name in failed:
            continue
        share = None
        if settings.budget_s:
            left = sum(1 for _, w in plan[i:] if w.name not in failed)
            share = max(settings.budget_s - spent, 0.0) / left
        folder = out_dir / v.name.replace(" ", "_").replace("+", "plus_") / str(r)
        try:
            run = run_variant(
                v, settings, folder, lambda s, b=i * steps: bar.update(b + s - bar.n), share
            )
            runs[v.name].append(run)
            spent += run["train_s"]
            line = f"{v.name:18s} {run['samples_per_s']:7.1f} samples/s, {run['steps']} steps"
            line += " (stopped at its budget share)" if run["stopped_at_budget"] else ""
        except RuntimeError as err:
            failed[v.name], line = str(err), f"{v.name}: FAILED ({str(err).splitlines()[0]})"
        bar.update((i + 1) * steps - bar.n)
        if not quiet:
            bar.write(line, file=stream)
        result["rows"] = summarize(variants, runs)
        (out_dir / "ab.json").write_text(json.dumps(result, indent=2, default=str))
        if on_result is not None:
            on_result(result)
    bar.update(bar.total - bar.n)
    bar.close()
    if not quiet:
        done, wall = sum(map(len, runs.values())), time.perf_counter() - started
        print(f"A/B: {done} runs in {wall:.0f} s, {len(failed)} failed", file=stream, flush=True)
    if not cuda:
        record_flags(result, settings)
    return result


def summarize(variants: list[Variant], runs: dict[str, list[dict]]) -> list[dict]:
    """Per variant with runs: the median of each figure, ``vs_baseline`` and ``vs_trainer``
    (medians of per-repeat ratios: slow load drifts cancel), the highest ``other_load``, ``n``."""
    rows = {}
    for v in variants:
        done = runs.get(v.name) or []
        if done:
            keys = ("samples_per_s", "tokens_per_s", "warmup_s", "peak_memory_bytes",
                    "final_loss", "pad_fraction", "num_compiles", "wall_s", "steps", "spread")  # fmt: skip
            row = {k: _median([run.get(k) for run in done]) for k in keys}
            row |= {"variant": v.name, "peer": v.peer, "n": len(done)}
            row["other_load"] = max(run.get("other_load") or 0.0 for run in done)
            row["stopped_at_budget"] = sum(bool(run.get("stopped_at_budget")) for run in done)
            rows[v.name] = row | {"samples_per_s_all": [run["samples_per_s"] for run in done]}
    for row in rows.values():
        for key, other in (("vs_baseline", "baseline"), ("vs_trainer", row["peer"])):
            ref = rows.get(other or "", {}).get("samples_per_s_all") or []
            pairs = [a / b for a, b in zip(row["samples_per_s_all"], ref, strict=False) if a and b]
            row[key] = statistics.median(pairs) if pairs else None
    return list(rows.values())


def _median(values):
    values = [x for x in values if x is not None]
    return statistics.median(values) if values else None


def table(result: dict):
    """The rows as a ``pandas.DataFrame`` for display (HTML in a notebook; no ``NaN``)."""
    import pandas as pd

    columns = {
        "samples_per_s": "samples/s", "tokens_per_s": "tokens/s", "vs_baseline": "vs baseline",
        "vs_trainer": "vs Trainer", "warmup_s": "warm-up s", "peak_memory_bytes": "peak mem MiB",
        "final_loss": "final loss", "pad_fraction": "pad frac", "num_compiles": "compiles",
        "wall_s": "run s", "steps": "steps", "spread": "step spread", "n": "n",
    }  # fmt: skip
    frame = pd.DataFrame(result["rows"], columns=["variant", *columns]).set_index("variant")
    frame["peak_memory_bytes"] = frame["peak_memory_bytes"] / 2**20
    frame = frame.rename(columns=columns).round(
        {"samples/s": 1, "tokens/s": 0, "vs baseline": 2, "vs Trainer": 2, "warm-up s": 1,
         "peak mem MiB": 0, "final loss": 4, "pad frac": 3, "run s": 0, "step spread": 2}
    )  # fmt: skip
    return frame.astype(object).where(frame.notna(), "")  # a figure a run has not: blank


def describe(result: dict) -> str:
    """What the table measured, and each row whose runs shared a busy machine, by how much."""
    s = result["settings"]
    lines = [
        f"{result['device']}, torch {result['torch']}: {s['model']}, batch {s['batch_size']} x "
        f"{s['max_length']} tokens, {s['max_steps']} steps ({s['warmup_steps']} warm-up left "
        f"out), median of up to {s['repeats']} interleaved run(s) per variant"
        + (f", {s['budget_s']:.0f} s of training in all" if s.get("budget_s") else "")
    ]
    for row in result["rows"]:
        if _busy(row, result["cpus"]):
            lines.append(
                f"{row['variant']}: a busy machine: its steady step times varied "
                f"{row['spread'] or 1:.1f}x within a run, other processes' load average "
                f"{row['other_load']:.1f} on {result['cpus']} CPUs; its speed and ratios can be "
                "off by about that much (AB_REPEATS = 3: medians of interleaved runs)"
            )
    lines += [f"FAILED {name}: {err.splitlines()[0]}" for name, err in result["failed"].items()]
    return "\n".join(lines)


def _busy(row: dict | None, cpus: int) -> bool:
    return bool(row) and ((row["spread"] or 1.0) > BUSY_SPREAD or row["other_load"] > cpus / 2)


def speedup_bars(result: dict) -> dict[str, float]:
    """``{variant: vs_baseline}`` for a bar plot (variants with a result)."""
    return {r["variant"]: r["vs_baseline"] for r in result["rows"] if r["vs_baseline"]}


def record_flags(result: dict, settings: BenchSettings) -> None:
    """Record each single-flag row's ratio to baseline for the training's ``auto`` on this CPU,
    unless its runs shared a busy machine."""
    from pt2aws.train.flags import measure_key, record

    threads = settings.num_threads or default_num_threads()
    key = measure_key(settings.model, settings.batch_size, settings.max_length, threads)
    rows, cpus = {row["variant"]: row for row in result["rows"]}, result["cpus"]
    for row in rows.values():
        flag, base = FLAG_OF.get(row["variant"]), rows.get("baseline")
        if flag and row["vs_baseline"] and not (_busy(row, cpus) or _busy(base, cpus)):
            how = f"notebook 01's A/B, {row['variant']} vs baseline, median of {row['n']} run(s)"
            record(flag, key, row["vs_baseline"], how)
