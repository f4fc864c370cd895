"""A/B of training-step changes on CPU, side by side in one process (the ``local`` profile).

The ``local`` profile's step (MiniLM-L6, batch 32, length-bucketed tweets, fp32, fused AdamW)
against one change at a time; blocks of steps alternate A, B, B, A ... so a load that drifts on
a shared machine hits both arms alike, and every arm of a block trains on the same batches (their
lengths differ from block to block); samples/s is the median over blocks::

    python benchmarks/train_step_cpu.py                          # every experiment
    python benchmarks/train_step_cpu.py --experiments pad,optimizer --blocks 6
    ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 python benchmarks/train_step_cpu.py
    python benchmarks/train_step_cpu.py --clock cpu      # on a busy machine: CPU time, 1 thread

Experiments (``EXPERIMENTS``; arm A is always what ``pt2aws.train`` does today):

* ``pad``: batches padded to a multiple of 8 tokens vs to their longest text;
* ``optimizer``: ``AdamW(fused=True)`` vs ``foreach=True`` vs the for-loop;
* ``threads``: all available cores vs one intra-op thread;
* ``attn_dropout``: attention dropout 0.1 (the checkpoint's) vs 0, which lets SDPA use its fused
  CPU kernel instead of the math path (bmm + softmax + dropout);
* ``collate``: collation on the step vs batches collated before the clock starts;
* ``bf16``: fp32 vs bf16 autocast.

Also ``--profile``: a ``torch.profiler`` table of arm A's step (top ops by self CPU time) and
the share of collation, forward + backward and optimizer in the step. Never pass/fail; the
load average is printed beside the numbers.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field

EXPERIMENTS = ("pad", "optimizer", "threads", "attn_dropout", "collate", "bf16")


@dataclass
class Arm:
    """One side of an A/B: what differs from the default step."""

    name: str
    pad_to: int | None = 8
    optimizer: str = "fused"
    threads: int | None = None
    attn_dropout: float | None = None
    precollate: bool = False
    bf16: bool = False
    samples_per_s: list[float] = field(default_factory=list)


def arms_for(experiment: str) -> list[Arm]:
    """The arms of ``experiment`` (first: today's default)."""
    return {
        "pad": [Arm("pad to x8"), Arm("pad to longest", pad_to=None)],
        "optimizer": [
            Arm("fused AdamW"),
            Arm("foreach AdamW", optimizer="foreach"),
            Arm("for-loop AdamW", optimizer="forloop"),
        ],
        "threads": [Arm("all cores"), Arm("1 thread", threads=1)],
        "attn_dropout": [Arm("attn dropout 0.1"), Arm("attn dropout 0", attn_dropout=0.0)],
        "collate": [Arm("collate on step"), Arm("pre-collated", precollate=True)],
        "bf16": [Arm("fp32"), Arm("bf16 autocast", bf16=True)],
    }[experiment]


class Bench:
    """The local profile's data and model, and a step function that takes an :class:`Arm`."""

    def __init__(self, max_train_samples: int):
        import torch
        from transformers import DataCollatorWithPadding, get_constant_schedule

        from pt2aws.config import TrainConfig
        from pt2aws.train.distributed import epoch_batches
        from pt2aws.train.loop import load_data_and_model, tokenize_splits

        cfg = TrainConfig(
            profile="local", output_dir=tempfile.mkdtemp(), max_train_samples=max_train_samples
        )
        data, tokenizer, self.model, _ = load_data_and_model(cfg)
        self.max_length = cfg.max_length
        self.rows = tokenize_splits(data, tokenizer, cfg.max_length)["train"]
        lengths = [len(r["input_ids"]) for r in self.rows]
        self.batches = epoch_batches(lengths, 32, seed=cfg.seed, bucketing=True)
        self.collators = {
            p: DataCollatorWithPadding(tokenizer, pad_to_multiple_of=p, return_tensors="pt")
            for p in (8, None)
        }
        self.precollated = {p: [c([self.rows[j] for j in b]) for b in self.batches]
                            for p, c in self.collators.items()}  # fmt: skip
        self.attention_dropouts = [
            m for n, m in self.model.named_modules()
            if n.endswith("attention.self.dropout") and isinstance(m, torch.nn.Dropout)
        ]  # fmt: skip
        self.torch, self.threads = torch, torch.get_num_threads()
        self.schedule = get_constant_schedule
        self.preps: dict = {}
        self.model.train()

    def prep(self, arm: Arm):
        """The model prepared for ``arm`` (its own optimizer and autocast), built once."""
        from pt2aws.train.recipe import prepare_model_and_optimizer

        key = (arm.optimizer, arm.bf16)
        if key not in self.preps:
            torch = self.torch
            prep = prepare_model_and_optimizer(
                self.model,
                torch.device("cpu"),
                amp_dtype=torch.bfloat16 if arm.bf16 else None,
                fused_adamw=arm.optimizer == "fused",
            )
            if arm.optimizer == "foreach":
                prep.optimizer = torch.optim.AdamW(
                    prep.optimizer.param_groups, lr=5e-5, fused=False, foreach=True
                )
            self.preps[key] = (prep, self.schedule(prep.optimizer))
        return self.preps[key]

    def block(self, arm: Arm, first: int, steps: int, clock=time.perf_counter) -> float:
        """Steps on batches ``first`` .. ``first + steps - 1`` as ``arm`` says (every arm of a
        round trains on the same batches); returns samples per second of ``clock``."""
        from pt2aws.train.recipe import train_step

        self.torch.set_num_threads(arm.threads or self.threads)
        for m in self.attention_dropouts:
            m.p = 0.1 if arm.attn_dropout is None else arm.attn_dropout
        prep, schedule = self.prep(arm)
        samples = 0
        start = clock()
        for i in range(first, first + steps):
            k = i % len(self.batches)
            if arm.precollate:
                batch = self.precollated[arm.pad_to][k]
            else:
                batch = self.collators[arm.pad_to]([self.rows[j] for j in self.batches[k]])
            train_step(prep, [batch], schedule)
            samples += len(batch["input_ids"])
        return samples / (clock() - start)


def profile_step(bench: Bench, steps: int, rows: int) -> None:
    """Print where arm A's step spends its time (torch.profiler) and the step's three parts."""
    from torch.profiler import ProfilerActivity, profile

    arm = Arm("default")
    prep, schedule = bench.prep(arm)
    bench.block(arm, 0, 2)  # warm-up
    parts = {"collate": 0.0, "forward+backward": 0.0, "optimizer": 0.0}
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for k in range(2, 2 + steps):
            t0 = time.perf_counter()
            batch = bench.collators[8]([bench.rows[j] for j in bench.batches[k]])
            t1 = time.perf_counter()
            with prep.autocast():
                prep.model(**batch).loss.backward()
            t2 = time.perf_counter()
            prep.optimizer.step()
            schedule.step()
            prep.optimizer.zero_grad(set_to_none=True)
            t3 = time.perf_counter()
            for name, dt in zip(parts, (t1 - t0, t2 - t1, t3 - t2)):
                parts[name] += dt
    total = sum(parts.values())
    print("step time: " + ", ".join(f"{k} {v / total:.1%}" for k, v in parts.items()))
    print(
        prof.key_averages().table(
            sort_by="self_cpu_time_total", row_limit=rows, max_name_column_width=40
        )
    )


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiments", default=",".join(EXPERIMENTS))
    parser.add_argument("--blocks", type=int, default=4, help="blocks per arm, interleaved")
    parser.add_argument("--steps", type=int, default=3, help="steps per block")
    parser.add_argument("--train-samples", type=int, default=3000, help="tweets to batch")
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="wall: samples per second; cpu: samples per CPU-second of this process, with one "
        "thread (what the step costs, little moved by other processes on a shared machine)",
    )
    parser.add_argument("--profile", action="store_true", help="profile arm A first")
    parser.add_argument("--json", default="", help="write every block's figure here")
    parser.add_argument("--profile-steps", type=int, default=5)
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    experiments = [e for e in args.experiments.split(",") if e]
    unknown = set(experiments) - set(EXPERIMENTS)
    if unknown:
        parser.error(f"unknown experiment(s) {sorted(unknown)}: choose from {EXPERIMENTS}")
    bench = Bench(args.train_samples)
    import torch

    clock = time.perf_counter
    if args.clock == "cpu":
        clock, bench.threads = time.process_time, 1
        if "threads" in experiments:
            experiments.remove("threads")  # threads need the wall clock

    caps = {
        k: os.environ[k] for k in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA") if k in os.environ
    }
    print(
        f"torch {torch.__version__}, ATen {torch.backends.cpu.get_cpu_capability()}, clock "
        f"{args.clock}, caps "
        f"{caps or 'none'}; {bench.threads} threads, {torch.get_num_interop_threads()} "
        f"interop, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}; max_length "
        f"{bench.max_length}, {len(bench.batches)} batches",
        flush=True,
    )
    if args.profile:
        print(f"load average {os.getloadavg()[0]:.2f}")
        profile_step(bench, args.profile_steps, 22)
    results = {}
    for experiment in experiments:
        arms = arms_for(experiment)
        load = [os.getloadavg()[0]]
        for arm in arms:
            bench.block(arm, 0, 1)  # warm-up: optimizer state, kernels for the shapes
        for block in range(args.blocks):
            first = 1 + block * args.steps
            for arm in arms if block % 2 == 0 else arms[::-1]:
                arm.samples_per_s.append(bench.block(arm, first, args.steps, clock))
        load.append(os.getloadavg()[0])
        base = arms[0].samples_per_s
        print(f"\n{experiment} (load average {load[0]:.2f} -> {load[1]:.2f}):")
        for arm in arms:
            median = statistics.median(arm.samples_per_s)
            # paired: each block's ratio to arm A on the same batches, then the median
            paired = statistics.median(x / b for x, b in zip(arm.samples_per_s, base))
            runs = " ".join(f"{x:.1f}" for x in arm.samples_per_s)
            unit = "samples/CPU-s" if args.clock == "cpu" else "samples/s"
            print(f"  {arm.name:18s} {median:7.2f} {unit}  {paired:.2f}x (paired)   [{runs}]")
        results[experiment] = {
            "load": load,
            "arms": {a.name: a.samples_per_s for a in arms},
        }
        sys.stdout.flush()
    if args.json:
        import json
        from pathlib import Path

        record = {"clock": args.clock, "isa": torch.backends.cpu.get_cpu_capability(), "caps": caps}
        Path(args.json).write_text(json.dumps(record | {"experiments": results}, indent=2))
    return results


if __name__ == "__main__":
    main()
