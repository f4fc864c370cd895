"""The A/B's peer: the same fine-tune with HF ``transformers.Trainer`` from ``pt2aws.train``'s
flags (``python -m pt2aws.lessons.training_ab.trainer_peer --<flags>``), on its batches with the
same init, dropout stream, schedule, clipping and padding (at equal flags the per-step losses
agree); it writes ``metrics.json`` and ``train_log.jsonl`` as ``pt2aws.train`` does."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path

from pt2aws.env.machine import default_num_threads, peak_memory_bytes


def trainer_main(argv: list[str] | None = None) -> dict:
    """Train with ``Trainer`` from ``pt2aws.train`` flags; the metrics written. Raises
    ValueError: ``--max_steps`` not > 0, or ``--length_bucketing true``."""
    import torch
    from transformers import (
        DataCollatorWithPadding,
        Trainer,
        TrainerCallback,
        TrainingArguments,
        set_seed,
    )

    from pt2aws.train import loop, throughput
    from pt2aws.train.distributed import epoch_batches
    from pt2aws.train.flags import apply_tf32
    from pt2aws.train.progress import PROGRESS_ENV, report

    cfg = loop.parse_args(list(sys.argv[1:] if argv is None else argv))
    if cfg.max_steps <= 0 or cfg.length_bucketing:
        raise ValueError("the Trainer peer needs --max_steps > 0 and --length_bucketing false")
    cuda, threads = torch.cuda.is_available(), torch.get_num_threads()
    on = {"on": True, "off": False}  # auto: as pt2aws.train's rules on a GPU; fused where it can
    compiled = on.get(cfg.torch_compile, cuda)
    bf16 = on.get(cfg.bf16, cuda and torch.cuda.is_bf16_supported())
    fused = on.get(cfg.fused_adamw, True)
    if cuda:
        apply_tf32(cfg.tf32 != "off" and torch.cuda.get_device_capability()[0] >= 8)
    else:
        torch.set_num_threads(cfg.num_threads or default_num_threads())
    set_seed(cfg.seed)
    data, tokenizer, model, _ = loop.load_data_and_model(cfg)
    rows = loop.tokenize_splits(data, tokenizer, cfg.max_length)["train"]
    lengths, sizes, step_times = [len(r["input_ids"]) for r in rows], [], []

    class SameOrder(torch.utils.data.Sampler):
        epoch = 0

        def set_epoch(self, epoch: int) -> None:
            self.epoch = epoch

        def __len__(self) -> int:
            return len(lengths)

        def __iter__(self):
            batch = cfg.per_device_train_batch_size
            for indices in epoch_batches(lengths, batch, seed=cfg.seed, epoch=self.epoch):
                yield from indices

    class Timer(TrainerCallback):  # re-seeds before the first step, as pt2aws.train does
        def on_step_begin(self, args, state, control, **kwargs):
            if not step_times:
                torch.manual_seed(cfg.seed)
            self.start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            if cuda:
                torch.cuda.synchronize()
            step_times.append(time.perf_counter() - self.start)
            if os.environ.get(PROGRESS_ENV) == "lines":
                report(state.global_step, cfg.max_steps, train_time_s=sum(step_times))

    class SameOrderTrainer(Trainer):
        def _get_train_sampler(self, train_dataset=None):
            return SameOrder()

        def training_step(self, model, inputs, num_items_in_batch=None):
            mask = inputs["attention_mask"]  # (examples, real tokens, padded tokens)
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
        torch_compile=compiled,
        bf16=bf16,
        optim="adamw_torch_fused" if fused else "adamw_torch",
        use_cpu=not cuda,  # required for bf16 on CPU
        average_tokens_across_devices=False,  # else the logged loss scales by the world size
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        accelerator_config={"use_seedable_sampler": False},  # keep our sampler
    )
    pad_to = 8 if cuda or compiled else None  # as pt2aws.train pads
    train_set = data.splits["train"].map(
        lambda b: tokenizer(b["text"], truncation=True, max_length=cfg.max_length),
        batched=True,
        remove_columns=["text"],
    )
    trainer = SameOrderTrainer(
        model=model,
        args=args,
        train_dataset=train_set.rename_column("label", "labels"),
        data_collator=DataCollatorWithPadding(tokenizer, pad_to_multiple_of=pad_to),
        callbacks=[Timer()],
    )
    try:
        trainer.train()
    finally:
        torch.set_num_threads(threads)
    losses = [r["loss"] for r in trainer.state.log_history if "loss" in r and "step" in r]
    warm = min(cfg.benchmark_warmup_steps, max(len(step_times) - 1, 0))
    steady_s, total = sum(step_times[warm:]), [sum(x) for x in zip(*sizes, strict=True)]
    steady = [sum(x) for x in zip(*sizes[warm * cfg.gradient_accumulation_steps :], strict=True)]
    metrics = {
        "runner": "hf_trainer",
        "train_steps": len(step_times),
        "train_samples_per_second": steady[0] / steady_s,
        "train_tokens_per_second": steady[1] / steady_s,
        "warmup_time_s": sum(step_times[:warm]),
        "peak_memory_bytes": peak_memory_bytes("cuda" if cuda else "cpu"),
        "pad_fraction": 1 - total[1] / total[2],
        "num_compiles": throughput.num_compiled_graphs() if compiled else None,
        "flags": {"bf16": bf16, "torch_compile": compiled, "fused_adamw": fused},
    }
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"step": i, "loss": loss}) + "\n" for i, loss in enumerate(losses, 1)]
    (out / "train_log.jsonl").write_text("".join(lines))
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))
    return metrics


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    trainer_main()
