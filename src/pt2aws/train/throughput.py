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


def training_flops_per_token(
    non_embedding_params: float, num_layers: int, hidden_size: int, seq_len: float
) -> float:
    """Training FLOPs per token as the field counts them: ``6·N + 12·L·d·T``.

    ``6·N``: forward (2 FLOPs per weight: a multiply and an add) plus backward (4: the gradients
    of the activations and of the weights) for every weight matrix; ``N`` leaves out the
    embeddings, which are looked up, not multiplied (Kaplan et al. 2020, "Scaling Laws for
    Neural Language Models", section 2.1). ``12·L·d·T``: the attention scores ``QKᵀ`` and their
    weighted sum over the values, ``2·d·T`` FLOPs each per token and layer in the forward,
    times 3 with the backward. The same formula as PaLM (Chowdhery et al. 2022, appendix B),
    torchtitan's ``get_num_flop_per_token`` and nanoGPT's ``estimate_mfu``
    (https://github.com/karpathy/nanoGPT/blob/master/model.py); MFU divides it by the peak.

    Args:
        non_embedding_params: ``N``, trainable parameters outside the embedding tables
            (:func:`non_embedding_parameters`).
        num_layers: ``L``, transformer layers.
        hidden_size: ``d``, the model width.
        seq_len: ``T``, tokens per sequence as computed (the padded length).

    Returns:
        FLOPs per trained token (forward and backward).
    """
    return 6.0 * non_embedding_params + 12.0 * num_layers * hidden_size * seq_len


def non_embedding_parameters(model: torch.nn.Module) -> int:
    """Parameters outside ``nn.Embedding`` tables (word, position, token-type embeddings).

    Under FSDP2 the parameters are DTensors, whose ``numel()`` is the global size.
    """
    embedding = sum(
        p.numel()
        for m in model.modules()
        if isinstance(m, torch.nn.Embedding)
        for p in m.parameters(recurse=False)
    )
    return sum(p.numel() for p in model.parameters()) - embedding


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

    def summary(
        self, info: DistInfo, model: torch.nn.Module, config, peak_flops: float | None
    ) -> dict:
        """Throughput over all ranks (a collective: call on every rank).

        Args:
            info: this rank.
            model: the trained module (for :func:`non_embedding_parameters`).
            config: its ``transformers`` config (``num_hidden_layers``, ``hidden_size``).
            peak_flops: peak dense FLOP/s of one device in the precision the run computes in,
                or ``None`` (no MFU then).

        Returns:
            ``train_runtime_s``, ``warmup_time_s``, ``steady_state_steps``,
            ``train_samples_per_second``, ``train_tokens_per_second`` (real tokens, not
            padding), ``step_time_s``, ``pad_fraction``, ``flops_per_token``
            (:func:`training_flops_per_token` at the mean padded length) and ``mfu`` (model
            FLOPs utilisation: ``flops_per_token x tokens/s`` over the peak of all devices;
            ``None`` without a peak). With too few steps to leave the warm-up out, the whole
            run counts.
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
        flops_per_token = training_flops_per_token(
            non_embedding_parameters(model),
            config.num_hidden_layers,
            config.hidden_size,
            totals[2] / totals[0] if totals[0] else 0.0,  # mean padded length
        )
        mfu = flops_per_token * tokens_per_s / (peak_flops * world) if peak_flops else None
        return {
            "train_runtime_s": self.runtime_s,
            "warmup_time_s": warm_time,
            "steady_state_steps": steady_steps,
            "train_samples_per_second": steady_samples / steady_time if steady_time > 0 else 0.0,
            "train_tokens_per_second": tokens_per_s,
            "step_time_s": steady_time / max(steady_steps, 1),
            "pad_fraction": 1.0 - totals[1] / totals[2] if totals[2] else 0.0,
            "flops_per_token": flops_per_token,
            "mfu": mfu,
        }
