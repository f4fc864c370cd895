"""Training throughput: samples/s and tokens/s in steady state, padding, MFU, compile count.

Steady state leaves out the first ``--benchmark_warmup_steps`` optimizer steps (compilation,
allocator warm-up) and the time spent saving checkpoints and evaluating; counts are summed over
all ranks.
"""

from __future__ import annotations

import contextlib
import time

import torch

from pt2aws.train.distributed import DistInfo, all_reduce_sum


def num_compiled_graphs() -> int:
    """Graphs Dynamo compiled so far in this process (each recompile or graph break adds one)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


class ThroughputMeter:
    """Counts what one rank trains on and when, and turns it into throughput figures.

    Call :meth:`start` before the first step, :meth:`count` per micro-batch, :meth:`step_done`
    after each optimizer step, wrap checkpoints and evaluation in :meth:`paused`, and call
    :meth:`stop` after the last step.
    """

    def __init__(self, device: torch.device, warmup_steps: int, first_step: int = 0):
        self.device, self.warmup_steps, self.first_step = device, warmup_steps, first_step
        self.counts = [0, 0, 0]  # samples, real tokens, padded tokens (this rank)
        self.warm_counts: list[int] | None = None  # the same, at the end of the warm-up
        self.warm_time: float | None = None
        self.paused_s = 0.0
        self.runtime_s = 0.0
        self.t_start = 0.0
        self.steps_done = 0

    def _synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def elapsed(self) -> float:
        """Seconds of training so far, without the paused time."""
        return time.perf_counter() - self.t_start - self.paused_s

    def start(self) -> None:
        """Start the clock (before the first step)."""
        self.t_start = time.perf_counter()

    def count(self, batch: dict) -> None:
        """Add one micro-batch (``attention_mask`` of shape ``(batch, padded_length)``)."""
        mask = batch["attention_mask"]
        self.counts[0] += len(mask)
        self.counts[1] += int(mask.sum())
        self.counts[2] += mask.numel()

    def step_done(self, step: int) -> None:
        """Record that optimizer step ``step`` finished (marks the end of the warm-up)."""
        self.steps_done = step - self.first_step
        if self.steps_done == self.warmup_steps:
            self._synchronize()
            self.warm_time = self.elapsed()
            self.warm_counts = list(self.counts)

    @contextlib.contextmanager
    def paused(self):
        """Leave the enclosed time (checkpoints, evaluation) out of the throughput."""
        self._synchronize()
        t_pause = time.perf_counter()
        try:
            yield
        finally:
            self.paused_s += time.perf_counter() - t_pause

    def stop(self) -> None:
        """Stop the clock (after the last step): fixes ``runtime_s``."""
        self._synchronize()
        self.runtime_s = self.elapsed()

    def summary(self, info: DistInfo, num_params: int, peak_flops: float | None) -> dict:
        """Throughput over all ranks (a collective: call on every rank).

        Args:
            info: this rank.
            num_params: trainable parameters (global count under FSDP).
            peak_flops: peak dense bf16 FLOP/s of one device, or ``None`` (no MFU then).

        Returns:
            ``train_runtime_s``, ``warmup_time_s``, ``steady_state_steps``,
            ``train_samples_per_second``, ``train_tokens_per_second`` (real tokens, not
            padding), ``step_time_s``, ``pad_fraction`` and ``mfu`` (model FLOPs utilisation:
            ``6 x params x tokens/s`` over the peak of all devices; ``None`` without a peak).
            With too few steps to leave the warm-up out, the whole run counts.
        """
        done, warm = self.steps_done, self.warmup_steps
        totals = all_reduce_sum(self.counts + (self.warm_counts or [0, 0, 0]), info)
        if self.warm_counts is not None and done > warm:
            steady_steps, steady_time = done - warm, self.runtime_s - self.warm_time
            steady_samples, steady_tokens = totals[0] - totals[3], totals[1] - totals[4]
            warm_time = self.warm_time
        else:
            steady_steps, steady_time, warm_time = done, self.runtime_s, self.warm_time or 0.0
            steady_samples, steady_tokens = totals[0], totals[1]
        tokens_per_s = steady_tokens / steady_time if steady_time > 0 else 0.0
        world = info.world_size
        return {
            "train_runtime_s": self.runtime_s,
            "warmup_time_s": warm_time,
            "steady_state_steps": steady_steps,
            "train_samples_per_second": steady_samples / steady_time if steady_time > 0 else 0.0,
            "train_tokens_per_second": tokens_per_s,
            "step_time_s": steady_time / max(steady_steps, 1),
            "pad_fraction": 1.0 - totals[1] / totals[2] if totals[2] else 0.0,
            "mfu": 6 * num_params * tokens_per_s / (peak_flops * world) if peak_flops else None,
        }
