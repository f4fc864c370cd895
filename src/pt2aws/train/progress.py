"""Training progress: one bar, drawn where the reader is.

Run in a terminal, ``python -m pt2aws.train`` draws a ``tqdm`` bar itself. Started by
:func:`pt2aws.train.launch.launch_training` (a notebook kernel, ``make run``), the subprocess's
output arrives through a pipe, where every redraw of a bar would become a line of its own. So
``launch_training`` sets ``PT2AWS_PROGRESS=lines`` for the subprocess: rank 0 then prints one
machine-readable line per optimizer step (:data:`PREFIX` and a JSON object), and the launcher
turns them into a single ``tqdm.auto`` bar in the kernel (a widget that updates in place in a
notebook; a bar on a terminal) and prints one summary line when training ends
(:class:`ProgressDisplay`). Everything else the subprocess prints passes through unchanged, with
terminal colour codes removed (transformers colours its load report even into a pipe).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time

#: Environment variable that switches the subprocess's progress to :data:`PREFIX` lines.
PROGRESS_ENV = "PT2AWS_PROGRESS"
#: Start of a progress line; the rest is a JSON object
#: ``{"step", "total"[, "loss"][, "train_time_s"]}``.
PREFIX = "@pt2aws-progress "

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def strip_ansi(text: str) -> str:
    """``text`` without terminal escape sequences (colours, bold, cursor moves)."""
    return _ANSI.sub("", text)


class ProgressReporter:
    """The training subprocess's side: a ``tqdm`` bar, or :data:`PREFIX` lines for a launcher.

    Args:
        total: optimizer steps of the whole run.
        initial: the step training starts from (after a resume).
        enabled: draw or report at all (rank 0 only).
        mode: ``"tqdm"`` or ``"lines"``; default from ``$PT2AWS_PROGRESS`` (``lines``), else
            ``tqdm``.
    """

    def __init__(self, total: int, initial: int = 0, enabled: bool = True, mode: str | None = None):
        self.mode = mode or ("lines" if os.environ.get(PROGRESS_ENV) == "lines" else "tqdm")
        self.total, self.step, self.enabled = total, initial, enabled
        self.bar = None
        if self.mode == "tqdm":
            from tqdm.auto import tqdm

            self.bar = tqdm(
                total=total, initial=initial, desc="train", disable=not enabled, mininterval=2.0
            )
        elif enabled:
            self._emit()

    def _emit(self, **extra) -> None:
        record = {"step": self.step, "total": self.total, **extra}
        print(PREFIX + json.dumps(record), flush=True)

    def update(
        self, step: int, loss: float | None = None, train_time_s: float | None = None
    ) -> None:
        """Optimizer step ``step`` is done.

        Args:
            step: the step just finished.
            loss: the loss logged at this step, if it was a logging step.
            train_time_s: seconds of training so far (without checkpoints and evaluation):
                what the A/B reads when it stops a run at its time budget.
        """
        if self.bar is not None:
            self.bar.update(step - self.step)
            if loss is not None:
                self.bar.set_postfix(loss=f"{loss:.4f}")
        elif self.enabled:
            self.step = step
            extra = {"loss": loss, "train_time_s": train_time_s}
            self._emit(**{k: v for k, v in extra.items() if v is not None})
        self.step = step

    def write(self, text: str) -> None:
        """A line of its own (an evaluation result), above the bar."""
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.write(text)
        else:
            print(text, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class ProgressDisplay:
    """The launcher's side: :data:`PREFIX` lines become one ``tqdm.auto`` bar; others are echoed.

    Args:
        stream: where the other lines go (and the summary line).
        desc: the bar's label.
    """

    def __init__(self, stream=None, desc: str = "train"):
        self.stream = stream or sys.stdout
        self.desc = desc
        self.bar = None
        self.last: dict = {}
        self.started = time.perf_counter()

    def feed(self, line: str) -> None:
        """Handle one line of the subprocess's output (with or without its newline)."""
        if line.startswith(PREFIX):
            try:
                record = json.loads(line[len(PREFIX) :])
            except json.JSONDecodeError:
                record = None
            if record is not None:
                self._advance(record)
                return
        text = strip_ansi(line).rstrip("\n")
        if self.bar is not None:
            self.bar.write(text, file=self.stream)
        else:
            print(text, file=self.stream, flush=True)

    def _advance(self, record: dict) -> None:
        if self.bar is None:
            from tqdm.auto import tqdm

            self.bar = tqdm(
                total=record["total"],
                initial=record["step"],
                desc=self.desc,
                unit="step",
                file=self.stream,
                mininterval=0.5,
            )
            self.started = time.perf_counter()
        else:
            self.bar.update(record["step"] - self.bar.n)
        if "loss" in record:
            self.bar.set_postfix(loss=f"{record['loss']:.4f}", refresh=False)
        self.last = record

    def close(self) -> str | None:
        """Close the bar; print and return the one summary line (None if no step was reported)."""
        if self.bar is None:
            return None
        self.bar.close()
        elapsed = time.perf_counter() - self.started
        summary = f"{self.desc}: {self.last['step']}/{self.last['total']} steps in {elapsed:.0f} s"
        if "loss" in self.last:
            summary += f", last logged loss {self.last['loss']:.4f}"
        # wall clock from the first step to the process's end; metrics.json's train_runtime_s
        # counts the training steps alone (the evaluations pause its clock)
        summary += " (wall clock: evaluation and saving included)"
        print(summary, file=self.stream, flush=True)
        return summary
