"""The A/B's peer: the same fine-tune with HF ``transformers.Trainer`` from ``pt2aws.train``'s
flags (``python -m pt2aws.lessons.trainer_peer --<flags>``), on its batches with the same init,
dropout stream, schedule, clipping and padding (at equal flags the per-step losses agree); it
writes ``metrics.json`` and ``train_log.jsonl`` as ``pt2aws.train`` does."""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path

import torch

from pt2aws.env.machine import default_num_threads, peak_memory_bytes
from pt2aws.rundir import write_json
from pt2aws.train import loop, throughput
from pt2aws.train.progress import report


def trainer_main(argv: list[str] | None = None) -> dict:
    """Train with ``Trainer`` from ``pt2aws.train`` flags (``--bf16``, ``--torch_compile``,
    ``--fused_adamw``: ``on``, else off); the metrics written. Raises ValueError: ``--max_steps``
    not > 0, or ``--length_bucketing true``."""
    from transformers import set_seed

    from pt2aws.train.flags import apply_tf32

    cfg = loop.parse_args(list(sys.argv[1:] if argv is None else argv))
    if cfg.max_steps <= 0 or cfg.length_bucketing:
        raise ValueError("the Trainer peer needs --max_steps > 0 and --length_bucketing false")
    cuda, threads = torch.cuda.is_available(), torch.get_num_threads()
    flags = {k: getattr(cfg, k) == "on" for k in ("bf16", "torch_compile", "fused_adamw")}
    if cuda:
        apply_tf32(cfg.tf32 != "off" and torch.cuda.get_device_capability()[0] >= 8)
    else:
        torch.set_num_threads(cfg.num_threads or default_num_threads())
    set_seed(cfg.seed)
    data, tokenizer, model, _ = loop.load_data_and_model(cfg)
    rows = loop.tokenize_splits(data, tokenizer, cfg.max_length)["train"]
    trainer, step_times, sizes = _trainer(cfg, flags, rows, tokenizer, model)
    try:
        trainer.train()
    finally:
        torch.set_num_threads(threads)
    losses = [r["loss"] for r in trainer.state.log_history if "loss" in r and "step" in r]
    return _write(cfg, flags, losses, step_times, sizes)


def _trainer(cfg, flags: dict, rows: list[dict], tokenizer, model):
    """``(trainer, step_times, sizes)``: a ``Trainer`` on ``pt2aws.train``'s shuffled batches,
    step seconds in ``step_times``, micro-batch (examples, real, padded tokens) in ``sizes``."""
    from transformers import DataCollatorWithPadding, Trainer, TrainerCallback, TrainingArguments

    cuda, step_times, sizes = torch.cuda.is_available(), [], []

    class Timer(TrainerCallback):  # re-seeds before the first step, as pt2aws.train does
        def on_step_begin(self, args, state, control, **kwargs):
            if not step_times:
                torch.manual_seed(cfg.seed)
            self.start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            if cuda:
                torch.cuda.synchronize()
            step_times.append(time.perf_counter() - self.start)
            report(state.global_step, cfg.max_steps, train_time_s=sum(step_times))  # the A/B's

    class SameOrderTrainer(Trainer):
        def _get_train_sampler(self, train_dataset=None):  # = distributed.epoch_batches
            return torch.utils.data.DistributedSampler(rows, num_replicas=1, rank=0, seed=cfg.seed)

        def training_step(self, model, inputs, num_items_in_batch=None):
            mask = inputs["attention_mask"]
            sizes.append((len(mask), int(mask.sum()), mask.numel()))
            return super().training_step(model, inputs, num_items_in_batch)

    args = TrainingArguments(  # the defaults as pt2aws.train: linear schedule, clipping at 1.0
        output_dir=str(Path(cfg.output_dir) / "trainer"),
        max_steps=cfg.max_steps,
        per_device_train_batch_size=cfg.per_device_train_batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        learning_rate=cfg.learning_rate,
        weight_decay=cfg.weight_decay,
        warmup_steps=int(cfg.warmup_ratio * cfg.max_steps),  # as pt2aws.train rounds it
        seed=cfg.seed,
        torch_compile=flags["torch_compile"],
        bf16=flags["bf16"],
        optim="adamw_torch_fused" if flags["fused_adamw"] else "adamw_torch",
        use_cpu=not cuda,  # required for bf16 on CPU
        average_tokens_across_devices=False,  # else the logged loss scales by the world size
        logging_steps=1,
        save_strategy="no",
        disable_tqdm=True,
    )
    pad_to = 8 if cuda or flags["torch_compile"] else None  # as pt2aws.train pads
    collator = DataCollatorWithPadding(tokenizer, pad_to_multiple_of=pad_to)
    trainer = SameOrderTrainer(
        model=model, args=args, train_dataset=rows, data_collator=collator, callbacks=[Timer()]
    )
    return trainer, step_times, sizes


def _write(cfg, flags: dict, losses: list[float], step_times: list[float], sizes) -> dict:
    """``metrics.json`` (speed over the steps after ``benchmark_warmup_steps``) and
    ``train_log.jsonl`` (one loss per step) in ``cfg.output_dir``; the metrics."""
    warm = min(cfg.benchmark_warmup_steps, max(len(step_times) - 1, 0))
    steady_s, total = sum(step_times[warm:]), [sum(x) for x in zip(*sizes, strict=True)]
    steady = [sum(x) for x in zip(*sizes[warm * cfg.gradient_accumulation_steps :], strict=True)]
    metrics = {
        "train_steps": len(step_times),
        "train_samples_per_second": steady[0] / steady_s,
        "train_tokens_per_second": steady[1] / steady_s,
        "peak_memory_bytes": peak_memory_bytes("cuda" if torch.cuda.is_available() else "cpu"),
        "pad_fraction": 1 - total[1] / total[2],
        "num_compiles": throughput.num_compiled_graphs() if flags["torch_compile"] else None,
    }
    out = write_json(Path(cfg.output_dir) / "metrics.json", metrics).parent  # creates the folder
    lines = [json.dumps({"step": i, "loss": loss}) + "\n" for i, loss in enumerate(losses, 1)]
    (out / "train_log.jsonl").write_text("".join(lines))
    return metrics


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    trainer_main()
