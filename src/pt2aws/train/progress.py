"""The training bar through a pipe: the training process prints one :data:`PREFIX` + JSON line
per step (``PT2AWS_PROGRESS=lines``, set by a launcher), which :class:`ProgressDisplay` draws as
one ``tqdm.auto`` bar (a widget in a notebook) and ends with a plain summary line, which a saved
notebook keeps (JupyterLab does not save widget state). In a terminal training draws ``tqdm``."""

from __future__ import annotations

import json
import re
import sys
import time

PROGRESS_ENV = "PT2AWS_PROGRESS"
#: A progress line: this, then ``{"step", "total"[, "loss"][, "train_time_s"]}``.
PREFIX = "@pt2aws-progress "
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def strip_ansi(text: str) -> str:
    """``text`` without terminal escape sequences (colours, cursor moves)."""
    return _ANSI.sub("", text)


def report(step: int, total: int, **extra) -> None:
    """Print the progress line of step ``step`` (``extra``: ``loss``, ``train_time_s``)."""
    extra = {k: v for k, v in extra.items() if v is not None}
    print(PREFIX + json.dumps({"step": step, "total": total, **extra}), flush=True)


def parse(line: str) -> dict | None:
    """The record of a progress line, or ``None`` for any other line."""
    try:
        return json.loads(line[len(PREFIX) :]) if line.startswith(PREFIX) else None
    except json.JSONDecodeError:
        return None


class ProgressDisplay:
    """The launcher's side: progress lines become one bar; other lines are echoed (no colours)."""

    def __init__(self, stream=None, desc: str = "train"):
        self.stream, self.desc = stream or sys.stdout, desc
        self.bar, self.last, self.started = None, {}, time.perf_counter()

    def feed(self, line: str) -> None:
        """Handle one line of the subprocess's output."""
        record = parse(line)
        if record is None:
            text = strip_ansi(line).rstrip("\n")
            (self.bar.write if self.bar else print)(text, file=self.stream)
            return
        if self.bar is None:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=record["total"], desc=self.desc, unit="step", file=self.stream)
            self.started = time.perf_counter()
        self.bar.update(record["step"] - self.bar.n)
        if "loss" in record:
            self.bar.set_postfix(loss=f"{record['loss']:.4f}", refresh=False)
        self.last = record

    def close(self) -> str | None:
        """Close the bar; print and return the summary line (``None`` if no step came)."""
        if self.bar is None:
            return None
        self.bar.close()
        summary = f"{self.desc}: {self.last['step']}/{self.last['total']} steps in "
        summary += f"{time.perf_counter() - self.started:.0f} s"
        if "loss" in self.last:
            summary += f", last logged loss {self.last['loss']:.4f}"
        summary += " (wall clock: evaluation and saving included)"
        print(summary, file=self.stream, flush=True)
        return summary
