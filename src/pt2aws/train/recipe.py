"""The PyTorch 2 recipe in two functions a learner reads top to bottom (notebook 01 prints both):
:func:`prepare_model_and_optimizer` (compile, DDP/FSDP2, autocast, fused AdamW) and
:func:`train_step` (one optimizer step). The rest of :mod:`pt2aws.train` is bookkeeping."""

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
    """``module`` the plain model (FSDP-sharded in place; evaluated, saved), ``model`` what the
    step calls (compiled and/or DDP-wrapped), ``autocast()``, ``scaler`` (enabled for fp16)."""

    module: torch.nn.Module
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    autocast: Callable[[], contextlib.AbstractContextManager]
    scaler: torch.amp.GradScaler
    parallelism: Parallelism
    device: torch.device


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
    """Compile and wrap ``model`` (on ``device``) for ``parallelism``; AdamW; ``amp_dtype``
    autocast (``None``: fp32). FSDP2 shards before compile; DDP wraps the compiled module
    (nanoGPT's order: hooks and ``no_sync`` stay eager)."""
    if parallelism == "fsdp":  # shard each encoder layer, then compile the whole model
        from pt2aws.train.distributed import shard_fsdp

        shard_fsdp(model)
    step_model = torch.compile(model, mode=compile_mode) if compile_model else model
    if parallelism == "ddp":  # DDP wraps the compiled module; DDPOptimizer splits at buckets
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
        fused=fused_adamw,  # the whole update for many tensors per kernel launch
        foreach=None if fused_adamw else False,
    )
    # Autocast runs matmuls in bf16 (or fp16); weights, gradients and AdamW state stay fp32.
    autocast = functools.partial(
        torch.autocast, device.type, dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None
    )
    # fp16's 5-bit exponent underflows small gradients: scale the loss. bf16 has fp32's range.
    scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype == torch.float16)
    return Prepared(model, step_model, optimizer, autocast, scaler, parallelism, device)


def train_step(
    prep: Prepared, micro_batches: list[dict], scheduler, max_grad_norm: float = 1.0
) -> list[torch.Tensor]:
    """One optimizer step over ``micro_batches`` (model inputs with ``labels``, any device).

    Returns each micro-batch's mean loss, detached, on the device (no host sync here).
    """
    examples = sum(len(batch["labels"]) for batch in micro_batches)
    losses = []
    for i, batch in enumerate(micro_batches):
        last = i == len(micro_batches) - 1
        # Gradients add up in .grad; only the last micro-batch synchronises them across ranks.
        sync = contextlib.nullcontext()
        if prep.parallelism == "fsdp":
            prep.module.set_requires_gradient_sync(last)  # FSDP2: reduce-scatter only when last
        elif prep.parallelism == "ddp" and not last:
            sync = prep.model.no_sync()  # DDP: skip the all-reduce, keep the local gradients
        batch = {k: v.to(prep.device, non_blocking=True) for k, v in batch.items()}
        with sync:
            with prep.autocast():
                loss = prep.model(**batch).loss
            # weighted by its share of the step's examples: 4 x 2 gives the gradient of 1 x 8
            prep.scaler.scale(loss * (len(batch["labels"]) / examples)).backward()
        losses.append(loss.detach())
    prep.scaler.unscale_(prep.optimizer)  # fp16 only: true gradients before clipping
    torch.nn.utils.clip_grad_norm_(prep.module.parameters(), max_grad_norm)
    prep.scaler.step(prep.optimizer)
    prep.scaler.update()
    scheduler.step()
    prep.optimizer.zero_grad(set_to_none=True)
    return losses
