"""The A/B training benchmark: each optimization alone, all together, and HF ``Trainer`` as the peer.

Every variant trains the same model on the same data for the same number of steps with the same
batch size, sequence cap and seed, each in a **fresh subprocess** (``python -m pt2aws.train …``,
or :func:`trainer_main` for HF ``Trainer``), so compile caches in memory, allocator state and
peak-memory counters never leak from one variant into the next. Repeats are interleaved
(variant 1..N, then again 1..N) so a slow patch of a shared machine hits every variant alike,
and the table reports the **median** per variant.

Measured per run (all from the subprocess's own ``metrics.json`` / log):

* steady-state ``samples/s`` and ``tokens/s`` (real, non-pad tokens) over the steps after the
  first ``warmup_steps``: compile and allocator warm-up are excluded and reported separately as
  ``warmup_s`` (time of the first ``warmup_steps`` optimizer steps);
* ``peak_mem``: peak CUDA memory allocated on GPU, peak resident set size (RSS) on CPU;
* ``final_loss``: mean training loss (cross-entropy, nats) over the last 10 optimizer steps,
  computed the same way for every variant from its per-step log.

Variants (flags of :mod:`pt2aws.train`; the seed blog's recipe is compile + bf16 + fused AdamW,
claimed 1.42x on 8 A100 for RoBERTa fine-tuning; that figure is the blog's, not ours):

==================  =========================================================================
baseline            eager, fp32, ``AdamW(foreach=False)`` (``--bf16 off --torch_compile off
                    --fused_adamw off``)
+compile            ``torch.compile`` only
+bf16               bf16 autocast only
+fused              fused AdamW only
recipe              all three
recipe+bucketing    all three + length-bucketed batches (``--length_bucketing true``), when the
                    installed ``pt2aws.train`` has that flag
Trainer baseline    ``transformers.Trainer``, ``optim="adamw_torch"`` (torch picks foreach on
                    CUDA, the for-loop on CPU), no compile, fp32
Trainer recipe      ``Trainer`` with ``torch_compile=True, bf16=True, optim="adamw_torch_fused"``
==================  =========================================================================

The Trainer runs see the same examples in the same order as ``pt2aws.train`` (its seeded
``epoch_batches``) with the same init and dropout stream, so at equal flags their per-step losses
agree (tested). Also ``average_tokens_across_devices=False`` (transformers 5 otherwise scales the
logged loss by the world size) and ``use_cpu=True`` on CPU (required for bf16 there).
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import sys
import time
from pathlib import Path

from pt2aws.bench.training import FINAL_LOSS_STEPS, train_config_fields
from pt2aws.system import peak_memory_bytes


def trainer_main(argv: list[str] | None = None) -> dict:
    """Train with ``transformers.Trainer`` from the same flags as ``python -m pt2aws.train``.

    Uses the same data loading, tokenization (padded to a multiple of 8), model construction,
    seed, sampler order, learning-rate schedule (linear with warm-up), weight decay, gradient
    clipping (1.0), batch size and step count as :mod:`pt2aws.train`. Writes ``metrics.json``
    and ``train_log.jsonl`` to ``--output_dir`` with the keys the benchmark reads.

    Extra flag (not a ``TrainConfig`` field): ``--benchmark_warmup_steps N`` (default 5).

    Returns:
        The metrics dict.
    """
    import torch

    threads = (
        torch.get_num_threads()
    )  # set below like pt2aws.train; restored for in-process callers
    try:
        return _trainer_run(list(sys.argv[1:] if argv is None else argv))
    finally:
        torch.set_num_threads(threads)


def _trainer_run(argv: list[str]) -> dict:
    import torch
    from transformers import (
        DataCollatorWithPadding,
        Trainer,
        TrainerCallback,
        TrainingArguments,
        set_seed,
    )

    from pt2aws.train import distributed, flags, inputs
    from pt2aws.train.loop import parse_args

    warmup_steps = 5
    if "--benchmark_warmup_steps" in argv and "benchmark_warmup_steps" not in train_config_fields():
        i = argv.index("--benchmark_warmup_steps")
        warmup_steps = int(argv[i + 1])
        del argv[i : i + 2]
    cfg = parse_args(argv)
    warmup_steps = getattr(cfg, "benchmark_warmup_steps", warmup_steps)
    if cfg.max_steps <= 0:
        raise ValueError("the Trainer benchmark needs --max_steps > 0")
    if getattr(cfg, "length_bucketing", False):
        raise ValueError(
            "HF Trainer has no length bucketing here: pass --length_bucketing false (the local "
            "profile buckets by default)"
        )
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    if not cuda:  # the same CPU thread count as pt2aws.train
        local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
        torch.set_num_threads(cfg.num_threads or max(1, (os.cpu_count() or 1) // local_world))
    set_seed(cfg.seed)
    data, tokenizer, model, _ = inputs.load_data_and_model(cfg)
    if cuda:
        flags.apply_tf32(flags.choose_tf32(device, cfg.tf32).enabled)
    train_set = (
        data.splits["train"]
        .map(
            lambda b: tokenizer(b["text"], truncation=True, max_length=cfg.max_length),
            batched=True,
            remove_columns=["text"],
        )
        .rename_column("label", "labels")
    )
    lengths = [len(ids) for ids in train_set["input_ids"]]
    on = {"on": True, "off": False}
    compile_on = on.get(cfg.torch_compile, cuda)
    bf16_on = on.get(cfg.bf16, cuda and torch.cuda.is_bf16_supported())
    fused_on = on.get(cfg.fused_adamw, True)
    out = Path(cfg.output_dir)
    args = TrainingArguments(
        output_dir=str(out / "trainer"),
        max_steps=cfg.max_steps,
        per_device_train_batch_size=cfg.per_device_train_batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        learning_rate=cfg.learning_rate,
        weight_decay=cfg.weight_decay,
        warmup_steps=int(cfg.warmup_ratio * cfg.max_steps),  # as pt2aws.train rounds it
        lr_scheduler_type="linear",
        max_grad_norm=1.0,
        seed=cfg.seed,
        torch_compile=compile_on,
        bf16=bf16_on,
        optim="adamw_torch_fused" if fused_on else "adamw_torch",
        use_cpu=not cuda,
        average_tokens_across_devices=False,
        logging_steps=1,
        eval_strategy="no",
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        dataloader_num_workers=0,
        ddp_find_unused_parameters=False,
        # keep our sampler (accelerate would swap in its own seedable one)
        accelerator_config={"use_seedable_sampler": False},
    )
    counts = {"tokens": [], "padded": [], "samples": []}
    step_times: list[float] = []

    class _Timer(TrainerCallback):
        seeded = False

        def on_step_begin(self, args, state, control, **kwargs):
            if not self.seeded:  # pt2aws.train re-seeds right before its first step
                torch.manual_seed(cfg.seed)
                self.seeded = True
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            if cuda:
                torch.cuda.synchronize()
            step_times.append(time.perf_counter() - self.t0)

    class _SameOrder(torch.utils.data.Sampler):
        """pt2aws.train's example order (``epoch_batches``, 1 process, no bucketing)."""

        def __init__(self):
            self.epoch = 0

        def set_epoch(self, epoch: int) -> None:
            self.epoch = epoch

        def __len__(self) -> int:
            return len(lengths)

        def __iter__(self):
            for batch in distributed.epoch_batches(
                lengths,
                cfg.per_device_train_batch_size,
                world_size=1,
                rank=0,
                seed=cfg.seed,
                epoch=self.epoch,
            ):
                yield from batch

    class _SameOrderTrainer(Trainer):
        def _get_train_sampler(self, train_dataset=None):
            return _SameOrder()

        def training_step(self, model, inputs, num_items_in_batch=None):
            mask = inputs["attention_mask"]
            counts["tokens"].append(int(mask.sum()))
            counts["padded"].append(mask.numel())
            counts["samples"].append(len(mask))
            return super().training_step(model, inputs, num_items_in_batch)

    trainer = _SameOrderTrainer(
        model=model,
        args=args,
        train_dataset=train_set,
        data_collator=DataCollatorWithPadding(tokenizer, pad_to_multiple_of=8),
        callbacks=[_Timer()],
    )
    trainer.train()
    losses = [r["loss"] for r in trainer.state.log_history if "loss" in r and "step" in r]
    steps = len(step_times)
    w = min(warmup_steps, max(steps - 1, 0))
    micro = cfg.gradient_accumulation_steps
    steady_time = sum(step_times[w:])
    num_compiles = None
    if compile_on:
        from torch._dynamo.utils import counters

        num_compiles = int(counters["stats"]["unique_graphs"])
    metrics = {
        "runner": "hf_trainer",
        "train_steps": steps,
        "train_samples_per_second": sum(counts["samples"][w * micro :]) / steady_time,
        "train_tokens_per_second": sum(counts["tokens"][w * micro :]) / steady_time,
        "warmup_time_s": sum(step_times[:w]),
        "train_runtime_s": sum(step_times),
        "peak_memory_bytes": peak_memory_bytes("cuda" if cuda else "cpu"),
        "final_train_loss": statistics.fmean(losses[-FINAL_LOSS_STEPS:]) if losses else None,
        "pad_fraction": 1 - sum(counts["tokens"]) / max(sum(counts["padded"]), 1),
        "num_compiles": num_compiles,
        "flags": {"bf16": bf16_on, "torch_compile": compile_on, "fused_adamw": fused_on},
    }
    out.mkdir(parents=True, exist_ok=True)
    with (out / "train_log.jsonl").open("w") as f:
        for i, loss in enumerate(losses, 1):
            f.write(json.dumps({"step": i, "loss": loss}) + "\n")
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))
    return metrics


def main(argv: list[str] | None = None) -> dict:
    """``python -m pt2aws.bench trainer --<TrainConfig flags>``: the HF Trainer peer run."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] != ["trainer"]:
        raise SystemExit(
            "usage: python -m pt2aws.bench trainer --<pt2aws.train flags> "
            "(the A/B itself: python benchmarks/train_speed.py --help)"
        )
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    return trainer_main(argv[1:])
