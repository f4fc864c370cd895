"""The A/B's peer: the same fine-tune with Hugging Face ``transformers.Trainer``.

``python -m pt2aws.lessons.training_ab trainer --<pt2aws.train flags>`` trains with ``Trainer``
from the very flags :mod:`pt2aws.train` takes and writes ``metrics.json`` and ``train_log.jsonl``
with the keys :func:`pt2aws.lessons.training_ab.runner.read_run` reads, so the A/B times both the
same way.

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
from dataclasses import dataclass, field
from pathlib import Path

from pt2aws.env.machine import default_num_threads, peak_memory_bytes
from pt2aws.lessons.training_ab.runner import FINAL_LOSS_STEPS


@dataclass(frozen=True)
class PeerFlags:
    """The performance flags of a Trainer run, resolved like :mod:`pt2aws.train` resolves them
    (``auto``: compile and bf16 on where CUDA has them; fused AdamW on)."""

    torch_compile: bool
    bf16: bool
    fused_adamw: bool


def trainer_main(argv: list[str] | None = None) -> dict:
    """Train with ``transformers.Trainer`` from the same flags as ``python -m pt2aws.train``.

    Uses the same data loading, tokenization (padded to a multiple of 8), model construction,
    seed, sampler order, learning-rate schedule (linear with warm-up), weight decay, gradient
    clipping (1.0), batch size and step count as :mod:`pt2aws.train`. Writes ``metrics.json``
    and ``train_log.jsonl`` to ``--output_dir`` with the keys the benchmark reads; the first
    ``--benchmark_warmup_steps`` steps are left out of the steady-state rates.

    Args:
        argv: ``pt2aws.train`` flags (default ``sys.argv[1:]``).

    Returns:
        The metrics dict (``train_samples_per_second``, ``train_tokens_per_second`` (non-pad
        tokens/s), ``warmup_time_s`` (seconds), ``peak_memory_bytes``, ``final_train_loss``,
        ``pad_fraction``, ``num_compiles``, ``flags``...).

    Raises:
        ValueError: ``--max_steps`` not set (> 0), or ``--length_bucketing true`` (Trainer has
            no length bucketing here).
    """
    import torch

    threads = torch.get_num_threads()  # set like pt2aws.train; restored for in-process callers
    try:
        return _trainer_run(list(sys.argv[1:] if argv is None else argv))
    finally:
        torch.set_num_threads(threads)


def _trainer_run(argv: list[str]) -> dict:
    import torch
    from transformers import set_seed

    from pt2aws.train import flags, inputs, loop

    cfg = loop.parse_args(argv)
    if cfg.max_steps <= 0:
        raise ValueError("the Trainer benchmark needs --max_steps > 0")
    if cfg.length_bucketing:
        raise ValueError(
            "HF Trainer has no length bucketing here: pass --length_bucketing false (the local "
            "profile buckets by default)"
        )
    cuda = torch.cuda.is_available()
    if cuda:
        flags.apply_tf32(flags.choose_tf32(torch.device("cuda", 0), cfg.tf32).enabled)
    else:  # the same CPU thread count as pt2aws.train
        torch.set_num_threads(cfg.num_threads or default_num_threads())
    set_seed(cfg.seed)
    data, tokenizer, model, _ = inputs.load_data_and_model(cfg)
    train_set = _tokenized_train_set(data, tokenizer, cfg.max_length)
    peer_flags = _resolve_flags(cfg, cuda)
    timer, counts = _step_timer(cfg.seed, cuda, cfg.max_steps), _BatchCounts()
    args = _training_arguments(cfg, peer_flags, cuda)
    pad_to = flags.choose_pad_to_multiple(
        torch.device("cuda" if cuda else "cpu"), peer_flags.torch_compile
    )
    trainer = _same_order_trainer(
        cfg, args, model, tokenizer, train_set, timer, counts, 8 if pad_to.enabled else None
    )
    trainer.train()
    losses = [r["loss"] for r in trainer.state.log_history if "loss" in r and "step" in r]
    metrics = _metrics(cfg, peer_flags, timer.step_times, counts, losses, cuda)
    _write_run(Path(cfg.output_dir), metrics, losses)
    return metrics


def _tokenized_train_set(data, tokenizer, max_length: int):
    """The train split tokenized as ``pt2aws.train`` does (truncated; padded per batch later)."""
    return (
        data.splits["train"]
        .map(
            lambda b: tokenizer(b["text"], truncation=True, max_length=max_length),
            batched=True,
            remove_columns=["text"],
        )
        .rename_column("label", "labels")
    )


def _resolve_flags(cfg, cuda: bool) -> PeerFlags:
    import torch

    on = {"on": True, "off": False}
    return PeerFlags(
        torch_compile=on.get(cfg.torch_compile, cuda),
        bf16=on.get(cfg.bf16, cuda and torch.cuda.is_bf16_supported()),
        fused_adamw=on.get(cfg.fused_adamw, True),
    )


def _training_arguments(cfg, peer_flags: PeerFlags, cuda: bool):
    """``TrainingArguments`` with ``pt2aws.train``'s schedule, clipping and flags."""
    from transformers import TrainingArguments

    return TrainingArguments(
        output_dir=str(Path(cfg.output_dir) / "trainer"),
        max_steps=cfg.max_steps,
        per_device_train_batch_size=cfg.per_device_train_batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        learning_rate=cfg.learning_rate,
        weight_decay=cfg.weight_decay,
        warmup_steps=int(cfg.warmup_ratio * cfg.max_steps),  # as pt2aws.train rounds it
        lr_scheduler_type="linear",
        max_grad_norm=1.0,
        seed=cfg.seed,
        torch_compile=peer_flags.torch_compile,
        bf16=peer_flags.bf16,
        optim="adamw_torch_fused" if peer_flags.fused_adamw else "adamw_torch",
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


@dataclass
class _BatchCounts:
    """Real (non-pad) tokens, padded tokens and examples of every micro-batch trained."""

    tokens: list[int] = field(default_factory=list)
    padded: list[int] = field(default_factory=list)
    samples: list[int] = field(default_factory=list)

    def add(self, attention_mask) -> None:
        self.tokens.append(int(attention_mask.sum()))
        self.padded.append(attention_mask.numel())
        self.samples.append(len(attention_mask))


def _step_timer(seed: int, cuda: bool, total_steps: int):
    """A callback that times each optimizer step and re-seeds before the first, as
    ``pt2aws.train`` does (so both runs draw the same dropout masks). With
    ``PT2AWS_PROGRESS=lines`` (the A/B sets it) it reports each step as ``pt2aws.train`` does
    (:mod:`pt2aws.train.progress`), so a run stopped at the A/B's time budget still counts."""
    import torch
    from transformers import TrainerCallback

    from pt2aws.train.progress import PROGRESS_ENV, ProgressReporter

    class StepTimer(TrainerCallback):
        def __init__(self):
            self.step_times: list[float] = []
            self.seeded = False
            self.progress = ProgressReporter(
                total_steps, enabled=os.environ.get(PROGRESS_ENV) == "lines", mode="lines"
            )

        def on_step_begin(self, args, state, control, **kwargs):
            if not self.seeded:
                torch.manual_seed(seed)
                self.seeded = True
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            if cuda:
                torch.cuda.synchronize()
            self.step_times.append(time.perf_counter() - self.t0)
            self.progress.update(state.global_step, train_time_s=sum(self.step_times))

    return StepTimer()


def _same_order_trainer(cfg, args, model, tokenizer, train_set, timer, counts, pad_to):
    """A ``Trainer`` that draws ``pt2aws.train``'s batches (``epoch_batches``, one process,
    no bucketing), padded as ``pt2aws.train`` pads them (``pad_to``), and counts the tokens of
    each."""
    import torch
    from transformers import DataCollatorWithPadding, Trainer

    from pt2aws.train.distributed import epoch_batches

    lengths = [len(ids) for ids in train_set["input_ids"]]

    class SameOrder(torch.utils.data.Sampler):
        def __init__(self):
            self.epoch = 0

        def set_epoch(self, epoch: int) -> None:
            self.epoch = epoch

        def __len__(self) -> int:
            return len(lengths)

        def __iter__(self):
            batches = epoch_batches(
                lengths,
                cfg.per_device_train_batch_size,
                world_size=1,
                rank=0,
                seed=cfg.seed,
                epoch=self.epoch,
            )
            for batch in batches:
                yield from batch

    class SameOrderTrainer(Trainer):
        def _get_train_sampler(self, train_dataset=None):
            return SameOrder()

        def training_step(self, model, inputs, num_items_in_batch=None):
            counts.add(inputs["attention_mask"])
            return super().training_step(model, inputs, num_items_in_batch)

    return SameOrderTrainer(
        model=model,
        args=args,
        train_dataset=train_set,
        data_collator=DataCollatorWithPadding(tokenizer, pad_to_multiple_of=pad_to),
        callbacks=[timer],
    )


def _metrics(cfg, peer_flags: PeerFlags, step_times, counts, losses, cuda: bool) -> dict:
    """Steady-state rates after ``cfg.benchmark_warmup_steps`` steps, as ``pt2aws.train``."""
    steps = len(step_times)
    w = min(cfg.benchmark_warmup_steps, max(steps - 1, 0))
    micro = cfg.gradient_accumulation_steps
    steady_time = sum(step_times[w:])
    num_compiles = None
    if peer_flags.torch_compile:
        from pt2aws.train.throughput import num_compiled_graphs

        num_compiles = num_compiled_graphs()
    return {
        "runner": "hf_trainer",
        "train_steps": steps,
        "train_samples_per_second": sum(counts.samples[w * micro :]) / steady_time,
        "train_tokens_per_second": sum(counts.tokens[w * micro :]) / steady_time,
        "warmup_time_s": sum(step_times[:w]),
        "train_runtime_s": sum(step_times),
        "peak_memory_bytes": peak_memory_bytes("cuda" if cuda else "cpu"),
        "final_train_loss": statistics.fmean(losses[-FINAL_LOSS_STEPS:]) if losses else None,
        "pad_fraction": 1 - sum(counts.tokens) / max(sum(counts.padded), 1),
        "num_compiles": num_compiles,
        "flags": {
            "bf16": peer_flags.bf16,
            "torch_compile": peer_flags.torch_compile,
            "fused_adamw": peer_flags.fused_adamw,
        },
    }


def _write_run(out: Path, metrics: dict, losses: list[float]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with (out / "train_log.jsonl").open("w") as f:
        for i, loss in enumerate(losses, 1):
            f.write(json.dumps({"step": i, "loss": loss}) + "\n")
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))


def main(argv: list[str] | None = None) -> dict:
    """``python -m pt2aws.lessons.training_ab trainer --<TrainConfig flags>``: the Trainer peer."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] != ["trainer"]:
        raise SystemExit(
            "usage: python -m pt2aws.lessons.training_ab trainer --<pt2aws.train flags> "
            "(the A/B itself: python benchmarks/train_speed.py --help)"
        )
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    return trainer_main(argv[1:])
