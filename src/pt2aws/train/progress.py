"""The one hook the loop calls after each step (:class:`StepMonitor`: clock and counts, the loss
log, the bar) and the bar (:class:`ProgressDisplay`: ``{"step", "total"[, "loss"]}`` records as
one ``tqdm.auto`` bar, a widget in a notebook, ending in a plain line a saved notebook keeps).
Under a launcher (``PT2AWS_PROGRESS=lines``) training prints the records as :data:`PREFIX` + JSON
lines and the launcher draws the bar."""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import time
from pathlib import Path

import torch

from pt2aws.train.distributed import DistInfo, all_reduce_sum

PROGRESS_ENV = "PT2AWS_PROGRESS"
PREFIX = "@pt2aws-progress "
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")  # colours, cursor moves


def report(step: int, total: int, **extra) -> None:
    """Print the progress line of step ``step`` (``extra``: ``loss``, ``train_time_s``; ``None``
    left out) in one write: ranks share the pipe, and a write is never split."""
    extra = {k: v for k, v in extra.items() if v is not None}
    sys.stdout.write(PREFIX + json.dumps({"step": step, "total": total, **extra}) + "\n")
    sys.stdout.flush()


def parse(line: str) -> dict | None:
    """The record of a progress line, or ``None`` for any other line."""
    try:
        return json.loads(line[len(PREFIX) :]) if line.startswith(PREFIX) else None
    except json.JSONDecodeError:
        return None


class ProgressDisplay:
    """Progress records as one bar; other lines echoed above it (without colours)."""

    def __init__(self, stream=None):
        self.stream, self.bar, self.loss = stream or sys.stdout, None, None

    def feed(self, line: str) -> None:
        """Handle one line of the training process's output."""
        record = parse(line)
        if record is None:
            self.write(_ANSI.sub("", line).rstrip("\n"))
        else:
            self.show(record)

    def write(self, text: str) -> None:
        (self.bar.write if self.bar else print)(text, file=self.stream)

    def show(self, record: dict) -> None:
        if self.bar is None:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=record["total"], desc="train", unit="step", file=self.stream)
        self.bar.update(record["step"] - self.bar.n)
        if record.get("loss") is not None:
            self.loss = record["loss"]
            self.bar.set_postfix(loss=f"{self.loss:.4f}", refresh=False)

    def close(self) -> str | None:
        """Close the bar; print and return the summary line (``None`` if no step came)."""
        if self.bar is None:
            return None
        self.bar.close()
        bar, loss = self.bar, f", last logged loss {self.loss:.4f}" if self.loss is not None else ""
        summary = f"train: {bar.n}/{bar.total} steps in {bar.format_dict['elapsed']:.0f} s"
        summary += f"{loss} (wall clock: evaluation and saving included)"
        print(summary, file=self.stream, flush=True)
        return summary


class StepMonitor:
    """Counts and clock (:meth:`paused` leaves checkpoints and evaluation out), the loss log
    (``train_log.jsonl``: the mean over ranks every ``logging_steps``; a resumed run keeps the
    lines up to its checkpoint) and the bar (rank 0), around the epochs."""

    def __init__(self, cfg, info: DistInfo, state, total_steps: int, steps_per_epoch: int):
        self.cfg, self.info, self.state = cfg, info, state
        self.total_steps, self.steps_per_epoch = total_steps, steps_per_epoch
        self.counts = [0, 0, 0]  # samples, real tokens, padded tokens (this rank)
        self.warm = None  # (seconds, counts, steps) when the warm-up steps are done
        self.first_step, self.steps_done, self.paused_s, self.runtime_s = state.step, 0, 0.0, 0.0
        self.last_loss, self.log_file = float("nan"), None
        lines = os.environ.get(PROGRESS_ENV) == "lines"  # then the launcher draws the bar
        self.bar = ProgressDisplay() if info.is_main and not lines else None

    def __enter__(self) -> StepMonitor:
        path, resumed = Path(self.cfg.output_dir) / "train_log.jsonl", self.state.resumed_from
        if self.info.is_main:
            kept = path.read_text().splitlines() if resumed is not None and path.is_file() else []
            self.log_file = path.open("w", buffering=1)  # line-buffered: each record lands
            self.log_file.writelines(f"{x}\n" for x in kept if json.loads(x)["step"] <= resumed)
            self._progress()
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self._sync()
        self.runtime_s = self.elapsed()  # the clock stops after the last step
        for opened in (self.bar, self.log_file):
            if opened is not None:
                opened.close()

    def _progress(self, **extra) -> None:
        record = {"step": self.state.step, "total": self.total_steps, **extra}
        if self.bar is not None:
            self.bar.show(record)
        elif self.info.is_main:
            report(**record)

    def elapsed(self) -> float:
        """Seconds of training so far."""
        return time.perf_counter() - self.t0 - self.paused_s

    def _sync(self) -> None:
        if self.info.device.type == "cuda":
            torch.cuda.synchronize(self.info.device)

    def after_step(self, micro_batches: list[dict], losses: list, scheduler) -> None:
        """Record step ``state.step``, just done on ``micro_batches`` with these losses."""
        state = self.state
        for batch, loss in zip(micro_batches, losses, strict=True):
            mask = batch["attention_mask"]
            for i, n in enumerate((len(mask), int(mask.sum()), mask.numel())):
                self.counts[i] += n
            state.loss_window[0] += loss.float()  # a tensor: no host sync per micro-batch
            state.loss_window[1] += 1
        self.steps_done = state.step - self.first_step
        if self.steps_done == self.cfg.benchmark_warmup_steps:
            self._sync()
            self.warm = (self.elapsed(), list(self.counts), self.steps_done)
        loss = None
        if state.step % self.cfg.logging_steps == 0 or state.step == self.total_steps:
            total, n = all_reduce_sum([float(x) for x in state.loss_window], self.info)
            state.loss_window, self.last_loss = [0.0, 0], total / max(n, 1)
            loss, lr = self.last_loss, scheduler.get_last_lr()[0]
            epoch = round(state.step / self.steps_per_epoch, 4)
            record = {"step": state.step, "epoch": epoch, "loss": loss, "learning_rate": lr}
            if self.log_file:
                print(json.dumps(record | {"train_time_s": self.elapsed()}), file=self.log_file)
        self._progress(loss=loss, train_time_s=self.elapsed())

    @contextlib.contextmanager
    def paused(self):
        """Leave the enclosed time (checkpoints, evaluation) out of the throughput."""
        self._sync()
        start = time.perf_counter()
        try:
            yield
        finally:
            self.paused_s += time.perf_counter() - start

    def write(self, text: str) -> None:
        """A line for the reader (rank 0), above the bar."""
        if self.info.is_main:
            (self.bar.write if self.bar else print)(text)
