"""Evaluation that counts every example exactly once across ranks (loss, accuracy, macro F1)."""

from __future__ import annotations

import math

import torch

from pt2aws.train.distributed import DistInfo, all_gather


@torch.no_grad()
def evaluate(prep, examples: list[dict], collator, info: DistInfo, batch_size: int) -> dict:
    """``{"loss", "accuracy", "f1", "num_examples"}`` over tokenized ``examples``, the same on
    every rank (rank ``r`` takes ``r, r + world, …``): mean cross-entropy in nats, accuracy and
    macro F1 (:mod:`pt2aws.metrics`). Under FSDP every rank runs as many forwards (padding ones)."""
    from pt2aws.metrics import classification_metrics

    model = prep.module
    model.eval()
    mine = examples[info.rank :: info.world_size]
    batches = [mine[i : i + batch_size] for i in range(0, len(mine), batch_size)]
    if prep.parallelism == "fsdp":
        needed = math.ceil(math.ceil(len(examples) / info.world_size) / batch_size)
        batches += [None] * (needed - len(batches))
    total_loss, preds, refs = 0.0, [], []
    for rows in batches:
        batch = {k: v.to(info.device) for k, v in collator(rows or examples[:1]).items()}
        with prep.autocast():
            out = model(**batch)
        if rows is not None:
            total_loss += float(out.loss) * len(rows)
            preds += out.logits.argmax(-1).tolist()
            refs += batch["labels"].tolist()
    model.train()
    losses, preds, refs = zip(*all_gather((total_loss, preds, refs), info))
    preds, refs = sum(preds, []), sum(refs, [])
    scores = classification_metrics(refs, preds, range(model.config.num_labels))
    scores["loss"] = sum(losses) / len(refs)
    return {k: scores[k] for k in ("loss", "accuracy", "f1", "num_examples")}
