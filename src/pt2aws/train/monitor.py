"""The one hook the training loop calls after each step: everything that watches training.

:class:`StepMonitor` keeps the bookkeeping out of :func:`pt2aws.train.recipe.train_step` and out
of the loop's algorithm: the throughput meter (:class:`~pt2aws.train.throughput.ThroughputMeter`),
the progress bar (:mod:`~pt2aws.train.progress`), the loss log (``train_log.jsonl``, every
``--logging_steps``), and the ``PT2AWS_FAIL_AT_STEP`` fault hook the tests use. The loop calls
:meth:`StepMonitor.after_step` once per optimizer step and wraps work that is not training
(checkpoints, evaluation) in :meth:`StepMonitor.paused`.

Fault hook: ``PT2AWS_FAIL_AT_STEP=N`` makes the last rank (or ``PT2AWS_FAIL_RANK``) die right
after step N on the first attempt only: ``os._exit(1)`` under torchrun, a ``RuntimeError``
in-process.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path

import torch

from pt2aws.config import TrainConfig
from pt2aws.train.checkpointing import TrainState, open_train_log
from pt2aws.train.distributed import DistInfo, all_reduce_sum
from pt2aws.train.progress import ProgressReporter
from pt2aws.train.throughput import ThroughputMeter


def maybe_fail(step: int, info: DistInfo) -> None:
    """The ``PT2AWS_FAIL_AT_STEP`` test hook (see the module docstring)."""
    fail_at = os.environ.get("PT2AWS_FAIL_AT_STEP")
    if not fail_at or int(fail_at) != step:
        return
    if os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0":
        return
    if info.rank != int(os.environ.get("PT2AWS_FAIL_RANK", info.world_size - 1)):
        return
    message = f"PT2AWS_FAIL_AT_STEP={step}: rank {info.rank} fails on purpose"
    if "TORCHELASTIC_RUN_ID" in os.environ:
        print(message, file=sys.stderr, flush=True)
        os._exit(1)
    raise RuntimeError(message)


class StepMonitor:
    """Throughput, progress, the loss log and the fault hook, behind one call per step.

    Use as a context manager around the training epochs: entering starts the clock (and opens
    the log on rank 0), leaving closes the bar and the log; :meth:`finish` stops the clock after
    the last step.

    Args:
        cfg: the run's configuration (``logging_steps``, ``benchmark_warmup_steps``).
        info: this rank.
        state: the training state; the monitor adds each micro-batch's loss to its
            ``loss_window`` (checkpointed, so a resumed run logs the same means).
        total_steps: optimizer steps of the whole run.
        steps_per_epoch: optimizer steps per epoch (for the logged ``epoch``).
        scheduler: read for the logged learning rate.
        out_dir: where rank 0 writes ``train_log.jsonl``.
    """

    def __init__(
        self,
        cfg: TrainConfig,
        info: DistInfo,
        state: TrainState,
        total_steps: int,
        steps_per_epoch: int,
        scheduler,
        out_dir: Path,
    ):
        self.cfg, self.info, self.state = cfg, info, state
        self.total_steps, self.steps_per_epoch = total_steps, steps_per_epoch
        self.scheduler, self.out_dir = scheduler, Path(out_dir)
        self.meter = ThroughputMeter(info.device, cfg.benchmark_warmup_steps, state.step)
        self.last_loss = float("nan")
        self.log_file = None
        self.progress: ProgressReporter | None = None

    def __enter__(self) -> StepMonitor:
        if self.info.is_main:
            self.log_file = open_train_log(
                self.out_dir / "train_log.jsonl", self.state.resumed_from
            )
        self.progress = ProgressReporter(
            self.total_steps, self.state.step, enabled=self.info.is_main
        )
        self.meter.start()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.close()
        if self.log_file:
            self.log_file.close()

    def after_step(self, micro_batches: list[dict], losses: list[torch.Tensor]) -> None:
        """Record optimizer step ``state.step``, just finished on ``micro_batches``.

        Args:
            micro_batches: the step's inputs (their ``attention_mask`` is counted).
            losses: each micro-batch's mean loss, as :func:`~pt2aws.train.recipe.train_step`
                returns them.
        """
        state = self.state
        for batch, loss in zip(micro_batches, losses, strict=True):
            self.meter.count(batch)
            state.loss_window[0] += loss.float()  # a tensor: no host sync per micro-batch
            state.loss_window[1] += 1
        maybe_fail(state.step, self.info)
        self.meter.step_done(state.step)
        logged = self._log_step()
        self.progress.update(
            state.step, self.last_loss if logged else None, train_time_s=self.meter.elapsed()
        )

    def _log_step(self) -> bool:
        """Every ``logging_steps``: log the mean loss over ranks and micro-batches since last."""
        state = self.state
        if state.step % self.cfg.logging_steps and state.step != self.total_steps:
            return False
        window = state.loss_window
        total, n = all_reduce_sum([float(window[0]), float(window[1])], self.info)
        state.loss_window = [0.0, 0]
        self.last_loss = total / max(n, 1)
        record = {
            "step": state.step,
            "epoch": round(state.step / self.steps_per_epoch, 4),
            "loss": self.last_loss,
            "learning_rate": self.scheduler.get_last_lr()[0],
            "train_time_s": self.meter.elapsed(),
        }
        if self.log_file:
            self.log_file.write(json.dumps(record) + "\n")
            self.log_file.flush()
        return True

    @contextlib.contextmanager
    def paused(self):
        """Leave the enclosed time (checkpoints, evaluation) out of the throughput."""
        with self.meter.paused():
            yield

    def write(self, text: str) -> None:
        """A line for the reader (rank 0), above the progress bar."""
        self.progress.write(text)

    def finish(self) -> None:
        """After the last step: stop the clock."""
        self.meter.stop()
