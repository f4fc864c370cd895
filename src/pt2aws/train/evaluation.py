"""Evaluation that counts every example exactly once across ranks (loss, accuracy, macro F1).

Accuracy and F1 are computed by the Hugging Face ``evaluate`` modules shipped in
:mod:`pt2aws.metrics` (offline), the same as notebook 02 reports.
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
        per-example cross-entropy (nats); accuracy and macro F1 come from the Hugging Face
        ``evaluate`` modules shipped in :mod:`pt2aws.metrics` (as notebook 02's).
    """
    from pt2aws.metrics import load_metric

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
    scores = {"predictions": preds, "references": refs}
    return {
        "loss": total_loss / n,
        "accuracy": load_metric("accuracy").compute(**scores)["accuracy"] if refs else 0.0,
        "f1": load_metric("f1").compute(**scores, average="macro")["f1"] if refs else 0.0,
        "num_examples": len(refs),
    }
