"""Fine-tune a sequence classifier: one process on CPU, or N GPUs/nodes under ``torchrun``.

Run it as::

    python -m pt2aws.train --profile smoke --output_dir runs/x/train            # 1 process
    torchrun --nproc_per_node 8 -m pt2aws.train --profile full --output_dir …   # 8 GPUs, DDP
    torchrun --nnodes 2 --nproc_per_node 8 --rdzv-backend c10d --rdzv-endpoint HOST:29400 \\
        -m pt2aws.train --profile full --resume auto --save_steps 200 …         # 2 nodes

Every performance choice is a flag resolved against the hardware and printed once with its reason:

* ``--bf16``: autocast to bfloat16. ``auto`` turns it on for GPUs with bf16 (Ampere and newer);
  on a GPU without bf16 it falls back to fp16 autocast with a ``GradScaler``; off on CPU, where
  it was slower for these small models in our measurements. ``off`` means plain fp32.
* ``--torch_compile`` (``--torch_compile_mode``): ``torch.compile`` the model. ``auto``: on for
  CUDA, off on CPU (compiling costs 25-55 s per process on 2 cores, no gain for small models).
  Order: DDP wraps the *compiled* module (nanoGPT's order, so ``no_sync`` and DDP's gradient
  hooks stay eager and work unchanged); FSDP2 shards first and compiles the sharded module
  (``fully_shard`` hooks are traceable; compiling first would hide the submodules from it).
* ``--fused_adamw``: ``torch.optim.AdamW(fused=True)``, one kernel for the whole update, where the
  installed torch supports the device; otherwise the for-loop implementation ``foreach=False``
  (the benchmark's baseline relies on exactly that).
* ``--tf32``: TF32 tensor-core matmuls for fp32 work on Ampere+ GPUs (``auto``); no-op on CPU.
* ``--attn_implementation sdpa``: PyTorch's fused scaled-dot-product attention where the model
  supports it (falls back to ``eager`` with the reason printed).
* ``--length_bucketing``: batches of similar length (sorted inside windows of 50 global batches,
  then shuffled), padded to a multiple of 8: less padding and few distinct shapes to compile.
* ``--parallelism ddp|fsdp``: ``DistributedDataParallel`` (default) or FSDP2 ``fully_shard``
  (each encoder layer, then the whole model) for models that do not fit one device.

Gradient accumulation skips the gradient all-reduce (``no_sync`` / FSDP2
``set_requires_gradient_sync(False)``) on all but the last micro-step; every micro-batch's loss is
weighted by its share of the step's examples, so ``4 x 2`` equals ``8 x 1`` exactly. Every rank
runs the same number of steps (the data is split like ``DistributedSampler``, padded to equal
counts), so an uneven split cannot hang; evaluation shards the data without padding and gathers
predictions, so each example counts exactly once.

Checkpoints (see :mod:`pt2aws.checkpoint`) every ``--save_steps`` and at the end; ``--resume
auto`` continues from the newest complete one to the same losses as an uninterrupted run, also
after ``torchrun --max-restarts`` restarted the job. Test hook: the environment variable
``PT2AWS_FAIL_AT_STEP=N`` makes the last rank (or ``PT2AWS_FAIL_RANK``) die right after optimizer
step N on the first attempt only (``TORCHELASTIC_RESTART_COUNT`` unset or 0): ``os._exit(1)``
under torchrun, a ``RuntimeError`` in-process.

Outputs in ``--output_dir``: ``model/`` (``save_pretrained`` of the unwrapped, uncompiled model and
its tokenizer, with the label names), ``metrics.json``, ``train_log.jsonl`` (one line per
logging step), ``train_config.json`` (the resolved configuration) and ``checkpoints/``.
"""

from __future__ import annotations

import math

import torch

from pt2aws.train.distributed import DistInfo, all_gather


@torch.no_grad()
def evaluate(
    model, examples: list[dict], collator, info: DistInfo, batch_size: int, amp, lockstep: bool
) -> dict:
    """Loss, accuracy and macro F1 over ``examples``, each counted exactly once across ranks.

    Rank ``r`` takes examples ``r, r + world, …`` (no padding); predictions are gathered. Under
    FSDP every rank runs the same number of forward passes (extra ones on a dummy batch are
    discarded), since each forward all-gathers parameters.

    Args:
        examples: tokenized rows (``input_ids``, ``attention_mask``, ``labels``).
        amp: autocast dtype (``torch.bfloat16``/``torch.float16``) or ``None``.
        lockstep: run the same number of forward passes on every rank (FSDP).

    Returns:
        ``{"loss", "accuracy", "f1", "num_examples"}`` (same on all ranks); loss is the mean
        per-example cross-entropy (nats).
    """
    from sklearn.metrics import accuracy_score, f1_score

    model.eval()
    mine = examples[info.rank :: info.world_size]
    batches = [mine[i : i + batch_size] for i in range(0, len(mine), batch_size)]
    needed = math.ceil(math.ceil(len(examples) / info.world_size) / batch_size)
    if lockstep:
        batches += [None] * (needed - len(batches))
    total_loss, preds, refs = 0.0, [], []
    for rows in batches:
        batch = collator(rows or examples[:1])
        batch = {k: v.to(info.device) for k, v in batch.items()}
        with torch.autocast(info.device.type, dtype=amp or torch.float32, enabled=amp is not None):
            out = model(**batch)
        if rows is None:
            continue
        total_loss += float(out.loss) * len(rows)
        preds += out.logits.argmax(-1).tolist()
        refs += batch["labels"].tolist()
    model.train()
    gathered = all_gather((total_loss, preds, refs), info)
    total_loss = sum(g[0] for g in gathered)
    preds = [p for g in gathered for p in g[1]]
    refs = [r for g in gathered for r in g[2]]
    n = max(len(refs), 1)
    return {
        "loss": total_loss / n,
        "accuracy": float(accuracy_score(refs, preds)) if refs else 0.0,
        "f1": float(f1_score(refs, preds, average="macro")) if refs else 0.0,
        "num_examples": len(refs),
    }
