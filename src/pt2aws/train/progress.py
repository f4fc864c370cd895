"""The training bar: :class:`ProgressDisplay` draws ``{"step", "total"[, "loss"]}`` records as
one ``tqdm.auto`` bar (a widget in a notebook) ending in a plain line a saved notebook keeps. Under
a launcher (``PT2AWS_PROGRESS=lines``) training prints them as :data:`PREFIX` + JSON lines."""

from __future__ import annotations

import json
import re
import sys

PROGRESS_ENV = "PT2AWS_PROGRESS"
PREFIX = "@pt2aws-progress "
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def strip_ansi(text: str) -> str:
    """``text`` without terminal escape sequences (colours, cursor moves)."""
    return _ANSI.sub("", text)


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
            self.write(strip_ansi(line).rstrip("\n"))
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
