"""The PyTorch 2 recipe in three short functions a learner can read (notebook 01 prints them).

* :func:`prepare_model_and_optimizer`: ``torch.compile``, the DDP or FSDP2 wrap in the right
  order, the autocast context and ``torch.optim.AdamW(fused=True)``.
* :func:`micro_step`: one forward and backward of gradient accumulation, skipping the
  gradient all-reduce on all but the last micro-batch.
* :func:`optimizer_step`: clip, step, schedule, zero.

Everything else in :mod:`pt2aws.train` (data, resume, logging, checkpoints, metrics) is
bookkeeping around these lines.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch

Parallelism = Literal["none", "ddp", "fsdp"]


@dataclass
class Prepared:
    """The model ready to train and what trains it.

    Attributes:
        module: the plain ``nn.Module`` (FSDP-sharded in place for ``fsdp``): what is evaluated,
            checkpointed and saved (no ``_orig_mod.`` / ``module.`` prefixes in its keys).
        model: what the training step calls: ``module`` compiled and/or DDP-wrapped.
        optimizer: AdamW over ``module``'s parameters (weight decay on matrices only).
        autocast: ``autocast()`` opens the mixed-precision context for a forward pass.
        scaler: a ``GradScaler``, enabled only for fp16 (bf16 needs no loss scaling).
        parallelism: ``"none"`` (one process), ``"ddp"`` or ``"fsdp"``.
    """

    module: torch.nn.Module
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    autocast: Callable[[], contextlib.AbstractContextManager]
    scaler: torch.amp.GradScaler
    parallelism: Parallelism


def prepare_model_and_optimizer(
    model: torch.nn.Module,
    device: torch.device,
    *,
    parallelism: Parallelism = "none",
    compile_model: bool = False,
    compile_mode: str = "default",
    amp_dtype: torch.dtype | None = None,
    fused_adamw: bool = True,
    learning_rate: float = 5e-5,
    weight_decay: float = 0.01,
) -> Prepared:
    """Compile and wrap ``model`` for ``parallelism``, and build its autocast and fused AdamW.

    Args:
        model: the model, already on ``device``.
        device: this rank's device.
        parallelism: ``"none"``, ``"ddp"`` or ``"fsdp"`` (the last two need a process group).
        compile_model: ``torch.compile`` it (mode ``compile_mode``).
        amp_dtype: ``torch.bfloat16`` / ``torch.float16`` autocast, or ``None`` for fp32.
        fused_adamw: one fused kernel for the AdamW update (else the for-loop implementation).
        learning_rate: peak learning rate.
        weight_decay: AdamW decoupled weight decay on weight matrices (not biases or norms).

    Returns:
        A :class:`Prepared`.
    """
    if parallelism == "fsdp":
        from pt2aws.train.distributed import shard_fsdp

        shard_fsdp(model)  # FSDP2 first: compiling first would hide the layers from fully_shard
    step_model = model
    if compile_model:
        step_model = torch.compile(model, mode=compile_mode)
    if parallelism == "ddp":
        # DDP wraps the *compiled* module (nanoGPT's order): DDP's gradient hooks and no_sync()
        # stay eager and work unchanged; the compiled graph is the same on every rank.
        from torch.nn.parallel import DistributedDataParallel as DDP

        step_model = DDP(step_model, device_ids=[device.index] if device.type == "cuda" else None)

    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    optimizer = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=learning_rate,
        fused=fused_adamw,  # one kernel updates every tensor, instead of a loop over them
        foreach=None if fused_adamw else False,
    )
    # Autocast runs matmuls in bf16 (or fp16); weights, gradients and AdamW state stay fp32.
    autocast = functools.partial(
        torch.autocast, device.type, dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None
    )
    # fp16's 5-bit exponent underflows small gradients: scale the loss. bf16 has fp32's range.
    scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype == torch.float16)
    return Prepared(model, step_model, optimizer, autocast, scaler, parallelism)


def micro_step(prep: Prepared, batch: dict, *, weight: float, last: bool) -> torch.Tensor:
    """Forward and backward of one micro-batch of gradient accumulation.

    Gradients add up in ``.grad`` over the micro-batches of one optimizer step; only the last
    micro-batch synchronises them across ranks, so accumulation costs one all-reduce per step.

    Args:
        prep: from :func:`prepare_model_and_optimizer`.
        batch: model inputs with ``labels``, on the device.
        weight: this micro-batch's share of the step's examples (they sum to 1 over the step),
            so ``4 x 2`` accumulation gives the same gradient as a batch of 8.
        last: the last micro-batch of the step: all-reduce the gradients now.

    Returns:
        The micro-batch's mean loss (detached, not weighted).
    """
    sync = contextlib.nullcontext()
    if prep.parallelism == "fsdp":
        prep.module.set_requires_gradient_sync(last)  # FSDP2: reduce-scatter only when last
    elif prep.parallelism == "ddp" and not last:
        sync = prep.model.no_sync()  # DDP: skip the all-reduce, keep the local gradients
    with sync:
        with prep.autocast():
            loss = prep.model(**batch).loss
        prep.scaler.scale(loss * weight).backward()
    return loss.detach()


def optimizer_step(prep: Prepared, scheduler, max_grad_norm: float = 1.0) -> None:
    """Clip the (synchronised) gradients, update the weights and the learning rate, zero grads."""
    prep.scaler.unscale_(prep.optimizer)
    torch.nn.utils.clip_grad_norm_(prep.module.parameters(), max_grad_norm)
    prep.scaler.step(prep.optimizer)
    prep.scaler.update()
    scheduler.step()
    prep.optimizer.zero_grad(set_to_none=True)
