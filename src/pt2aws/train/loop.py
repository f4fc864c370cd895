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

import contextlib
import dataclasses
import json
import logging
import math
import os
import sys
import time
from pathlib import Path

import torch

from pt2aws.config import TrainConfig
from pt2aws.system import peak_memory_bytes
from pt2aws.train.checkpointing import (
    capture_rng,
    check_resumable,
    checkpoint_path,
    full_state_dicts,
    latest_checkpoint,
    load_checkpoint,
    load_full_state,
    restore_rng,
    save_atomic,
)
from pt2aws.train.distributed import (
    DistInfo,
    all_gather,
    all_reduce_sum,
    epoch_batches,
    init_distributed,
)
from pt2aws.train.evaluation import evaluate
from pt2aws.train.flags import (
    Choice,
    apply_tf32,
    choose_bf16,
    choose_compile,
    choose_fp16,
    choose_fused_adamw,
    choose_sdpa,
    choose_tf32,
    peak_bf16_flops,
)

logger = logging.getLogger(__name__)


def num_compiled_graphs() -> int:
    """Graphs dynamo compiled so far in this process (each recompile or graph break adds one)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def _maybe_fail(step: int, info: DistInfo) -> None:
    """The ``PT2AWS_FAIL_AT_STEP`` test hook (see the module docstring)."""
    fail_at = os.environ.get("PT2AWS_FAIL_AT_STEP")
    if not fail_at or int(fail_at) != step:
        return
    if os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0":
        return
    if info.rank != int(os.environ.get("PT2AWS_FAIL_RANK", info.world_size - 1)):
        return
    message = f"PT2AWS_FAIL_AT_STEP={step}: rank {info.rank} fails on purpose"
    if "TORCHELASTIC_RUN_ID" in os.environ:
        print(message, file=sys.stderr, flush=True)
        os._exit(1)
    raise RuntimeError(message)


def load_data_and_model(cfg: TrainConfig):
    """The splits, tokenizer and model that ``cfg`` names, prepared as every rank trains them.

    Shared with the HF ``Trainer`` peer in :mod:`pt2aws.bench`, so both start from the same data,
    weights, attention implementation and dropout.

    Returns:
        ``(data, tokenizer, model, sdpa_choice)``: a :class:`pt2aws.data.SentimentData`, the
        tokenizer, the model on CPU, and the :class:`Choice` made for SDPA attention.
    """
    from pt2aws.data import load_sentiment_data
    from pt2aws.modeling import load_tokenizer_and_model

    data = load_sentiment_data(
        cfg.dataset,
        config_name=cfg.dataset_config,
        text_column=cfg.text_column,
        label_column=cfg.label_column,
        three_class=cfg.three_class,
        max_train_samples=cfg.max_train_samples,
        max_eval_samples=cfg.max_eval_samples,
        seed=cfg.seed,
    )
    tokenizer, model = load_tokenizer_and_model(
        cfg.model_name_or_path,
        data.label_names,
        train_texts=data.splits["train"]["text"],
        max_length=cfg.max_length,
    )
    sdpa = choose_sdpa(model, cfg.attn_implementation)
    if cfg.dropout is not None:
        for module in model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = cfg.dropout
    return data, tokenizer, model, sdpa


def train(cfg: TrainConfig, info: DistInfo) -> dict:
    """Run the fine-tune described by ``cfg`` on this rank; returns the metrics dict (all ranks)."""
    import datasets
    from tqdm.auto import tqdm
    from transformers import DataCollatorWithPadding, get_linear_schedule_with_warmup, set_seed

    from pt2aws.modeling import count_parameters

    datasets.disable_progress_bars()
    out_dir = Path(cfg.output_dir)
    if info.is_main:
        out_dir.mkdir(parents=True, exist_ok=True)
    if info.device.type == "cpu":
        local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
        torch.set_num_threads(cfg.num_threads or max(1, (os.cpu_count() or 1) // local_world))
    set_seed(cfg.seed)
    distributed = info.world_size > 1
    fsdp = distributed and cfg.parallelism == "fsdp"

    flags = {
        "bf16": choose_bf16(info.device, cfg.bf16),
        "torch_compile": choose_compile(info.device, cfg.torch_compile),
        "fused_adamw": choose_fused_adamw(info.device, cfg.fused_adamw),
        "tf32": choose_tf32(info.device, cfg.tf32),
        "length_bucketing": Choice(cfg.length_bucketing, "requested"),
    }
    flags["fp16"] = choose_fp16(info.device, cfg.bf16, flags["bf16"])
    if info.device.type == "cuda":
        apply_tf32(flags["tf32"].enabled)
    amp = torch.bfloat16 if flags["bf16"].enabled else None
    amp = torch.float16 if flags["fp16"].enabled else amp

    data, tokenizer, model, flags["sdpa"] = load_data_and_model(cfg)
    if info.is_main:
        print(
            f"device={info.device} world_size={info.world_size} "
            f"parallelism={cfg.parallelism if distributed else 'none (1 process)'}",
            flush=True,
        )
        for name, choice in flags.items():
            print(f"{name}: {'on' if choice.enabled else 'off'} ({choice.reason})", flush=True)

    # Pre-tokenize once; batches are padded per batch (to a multiple of 8) by the collator.
    def tokenize(batch):
        return tokenizer(batch["text"], truncation=True, max_length=cfg.max_length)

    encoded = data.splits.map(tokenize, batched=True, remove_columns=["text"]).rename_column(
        "label", "labels"
    )
    rows = {split: encoded[split].to_list() for split in encoded}
    lengths = [len(r["input_ids"]) for r in rows["train"]]
    collator = DataCollatorWithPadding(tokenizer, pad_to_multiple_of=8, return_tensors="pt")

    def batches_for(epoch: int) -> list[list[int]]:
        return epoch_batches(
            lengths,
            cfg.per_device_train_batch_size,
            world_size=info.world_size,
            rank=info.rank,
            seed=cfg.seed,
            epoch=epoch,
            bucketing=cfg.length_bucketing,
        )

    accum = cfg.gradient_accumulation_steps
    steps_per_epoch = math.ceil(len(batches_for(0)) / accum)
    total_steps = (
        cfg.max_steps if cfg.max_steps > 0 else math.ceil(steps_per_epoch * cfg.num_train_epochs)
    )
    num_epochs = math.ceil(total_steps / steps_per_epoch)

    model.to(info.device)
    torch.manual_seed(cfg.seed + info.rank)  # same init everywhere, own dropout stream per rank
    if fsdp:
        from torch.distributed.fsdp import fully_shard

        for layer in getattr(getattr(model.base_model, "encoder", None), "layer", []):
            fully_shard(layer)  # one all-gather per encoder layer, freed after use
        fully_shard(model)
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    optimizer = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": cfg.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=cfg.learning_rate,
        fused=flags["fused_adamw"].enabled,
        foreach=None if flags["fused_adamw"].enabled else False,
    )
    scheduler = get_linear_schedule_with_warmup(
        optimizer, int(cfg.warmup_ratio * total_steps), total_steps
    )
    scaler = torch.amp.GradScaler(info.device.type, enabled=flags["fp16"].enabled)

    # Resume: rank 0 picks the file, every rank reads it (shared storage, see pt2aws.checkpoint).
    step, start_epoch, skip_batches, history, resumed_from = 0, 0, 0, [], None
    window = [0.0, 0]  # sum of micro-batch mean losses, number of micro-batches (this rank)
    found = None
    if cfg.resume == "auto" and info.is_main:
        found = latest_checkpoint(cfg.checkpoint_dir)
    elif cfg.resume not in ("auto", "never"):
        found = Path(cfg.resume)
    found = all_gather(str(found) if found else None, info)[0]
    if found:
        state = load_checkpoint(found)
        check_resumable(state, cfg, info.world_size, found)
        load_full_state(model, optimizer, state, fsdp)
        scheduler.load_state_dict(state["scheduler"])
        scaler.load_state_dict(state["scaler"])
        restore_rng(state["rng"][info.rank])
        step, start_epoch, skip_batches = state["step"], state["epoch"], state["batch_in_epoch"]
        history, window = state["history"], state["window"][info.rank]
        resumed_from = step
        del state
        if info.is_main:
            print(f"resumed from {found} (step {step}, epoch {start_epoch + 1})", flush=True)

    def save_checkpoint(epoch: int, batch_in_epoch: int) -> None:
        model_state, optim_state = full_state_dicts(model, optimizer, fsdp)
        rng = all_gather(capture_rng(), info)
        windows = all_gather([float(window[0]), window[1]], info)
        if info.is_main:
            state = {
                "step": step,
                "epoch": epoch,
                "batch_in_epoch": batch_in_epoch,
                "model": model_state,
                "optimizer": optim_state,
                "scheduler": scheduler.state_dict(),
                "scaler": scaler.state_dict(),
                "rng": rng,
                "window": windows,
                "history": history,
                "world_size": info.world_size,
                "config": dataclasses.asdict(cfg),
            }
            save_atomic(state, checkpoint_path(cfg.checkpoint_dir, step), cfg.save_total_limit)
        if distributed:
            torch.distributed.barrier()

    # Compile, then wrap (DDP); or shard (above), then compile (FSDP2). See the module docstring.
    step_model = model
    compiled_before = num_compiled_graphs()
    if flags["torch_compile"].enabled:
        step_model = torch.compile(step_model, mode=cfg.torch_compile_mode)
    if distributed and not fsdp:
        from torch.nn.parallel import DistributedDataParallel as DDP

        step_model = DDP(
            step_model, device_ids=[info.local_rank] if info.device.type == "cuda" else None
        )

    def sync_context(last_micro: bool):
        if fsdp:
            model.set_requires_gradient_sync(last_micro)
            return contextlib.nullcontext()
        if distributed and not last_micro:
            return step_model.no_sync()
        return contextlib.nullcontext()

    def synchronize() -> None:
        if info.device.type == "cuda":
            torch.cuda.synchronize(info.device)

    log_path = out_dir / "train_log.jsonl"
    log_file = None
    if info.is_main:
        kept = []
        if resumed_from is not None and log_path.is_file():
            kept = [
                line
                for line in log_path.read_text().splitlines()
                if json.loads(line)["step"] <= resumed_from
            ]
        log_file = open(log_path, "w")  # noqa: SIM115 - closed in finally
        log_file.writelines(line + "\n" for line in kept)
    # counts: samples, real tokens, padded tokens (this rank, this process); at warm-up end too
    counts, warm_counts = [0, 0, 0], None
    paused, warm_time, last_loss, first_step = 0.0, None, float("nan"), step
    progress = tqdm(
        total=total_steps, initial=step, desc="train", disable=not info.is_main, mininterval=2.0
    )
    t_start = time.perf_counter()
    try:
        model.train()
        for epoch in range(start_epoch, num_epochs):
            batches = batches_for(epoch)
            position = skip_batches if epoch == start_epoch else 0
            while position < len(batches) and step < total_steps:
                group = batches[position : position + accum]
                group_examples = sum(len(b) for b in group)
                for i, idx in enumerate(group):
                    batch = collator([rows["train"][j] for j in idx])
                    counts[0] += len(idx)
                    counts[1] += int(batch["attention_mask"].sum())
                    counts[2] += batch["input_ids"].numel()
                    batch = {k: v.to(info.device, non_blocking=True) for k, v in batch.items()}
                    with sync_context(i == len(group) - 1):
                        with torch.autocast(
                            info.device.type, dtype=amp or torch.float32, enabled=amp is not None
                        ):
                            loss = step_model(**batch).loss
                        scaler.scale(loss * (len(idx) / group_examples)).backward()
                    window[0] += loss.detach().float()  # a tensor: no host sync per micro-step
                    window[1] += 1
                position += len(group)
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optimizer)
                scaler.update()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                step += 1
                progress.update(1)
                _maybe_fail(step, info)
                if step - first_step == cfg.benchmark_warmup_steps:
                    synchronize()
                    warm_time = time.perf_counter() - t_start - paused
                    warm_counts = list(counts)
                if step % cfg.logging_steps == 0 or step == total_steps:
                    total, n = all_reduce_sum([float(window[0]), float(window[1])], info)
                    window = [0.0, 0]
                    last_loss = total / max(n, 1)
                    record = {
                        "step": step,
                        "epoch": round(step / steps_per_epoch, 4),
                        "loss": last_loss,
                        "learning_rate": scheduler.get_last_lr()[0],
                        "train_time_s": time.perf_counter() - t_start - paused,
                    }
                    if log_file:
                        log_file.write(json.dumps(record) + "\n")
                        log_file.flush()
                    progress.set_postfix(loss=f"{last_loss:.4f}")
                if (cfg.save_steps and step % cfg.save_steps == 0) or step == total_steps:
                    synchronize()
                    t_pause = time.perf_counter()
                    save_checkpoint(epoch, position)
                    paused += time.perf_counter() - t_pause
            synchronize()
            t_pause = time.perf_counter()
            if position >= len(batches) or step >= total_steps:
                ev = evaluate(
                    model,
                    rows["validation"],
                    collator,
                    info,
                    cfg.per_device_eval_batch_size,
                    amp,
                    fsdp,
                )
                history.append(
                    {"epoch": epoch + 1, "step": step, **{f"eval_{k}": v for k, v in ev.items()}}
                )
                progress.write(
                    f"epoch {epoch + 1}: eval_loss={ev['loss']:.4f} "
                    f"eval_accuracy={ev['accuracy']:.4f} ({ev['num_examples']} examples)"
                )
            paused += time.perf_counter() - t_pause
        synchronize()
        runtime = time.perf_counter() - t_start - paused
    finally:
        progress.close()
        if log_file:
            log_file.close()

    # Throughput over all ranks; steady state leaves out the first benchmark_warmup_steps steps.
    done = step - first_step
    totals = all_reduce_sum(counts + (warm_counts or [0, 0, 0]), info)
    steady = warm_counts is not None and done > cfg.benchmark_warmup_steps
    if steady:
        steady_steps, steady_time = done - cfg.benchmark_warmup_steps, runtime - warm_time
        steady_samples, steady_tokens = totals[0] - totals[3], totals[1] - totals[4]
    else:  # too few steps to leave any out: report the whole run
        steady_steps, steady_time, warm_time = done, runtime, warm_time or 0.0
        steady_samples, steady_tokens = totals[0], totals[1]
    tokens_per_s = steady_tokens / steady_time if steady_time > 0 else 0.0
    num_params = count_parameters(model)  # DTensor parameters report their global size
    peak = peak_bf16_flops(info.device)
    test = evaluate(model, rows["test"], collator, info, cfg.per_device_eval_batch_size, amp, fsdp)
    replica_diff = None
    if not fsdp:
        # Two numbers per parameter tensor; DDP replicas must agree bit for bit.
        fingerprint = [
            f(p.detach().double()).item()
            for p in model.parameters()
            for f in (torch.sum, torch.norm)
        ]
        prints = torch.tensor(all_gather(fingerprint, info), dtype=torch.float64)
        replica_diff = float((prints - prints[0]).abs().max())
    model_state = None
    if fsdp:
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            get_model_state_dict,
        )

        model_state = get_model_state_dict(
            model, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
        )

    metrics: dict = {}
    if info.is_main:
        metrics = {
            "profile": cfg.profile,
            "model_name_or_path": cfg.model_name_or_path,
            "num_parameters": num_params,
            "device": str(info.device),
            "world_size": info.world_size,
            "parallelism": cfg.parallelism if distributed else "none",
            "flags": {k: dataclasses.asdict(v) for k, v in flags.items()},
            "train_steps": step,
            "resumed_from_step": resumed_from,
            "train_runtime_s": runtime,
            "warmup_time_s": warm_time,
            "steady_state_steps": steady_steps,
            "train_samples_per_second": steady_samples / steady_time if steady_time > 0 else 0.0,
            "train_tokens_per_second": tokens_per_s,
            "step_time_s": steady_time / max(steady_steps, 1),
            "pad_fraction": 1.0 - totals[1] / totals[2] if totals[2] else 0.0,
            "num_compiles": num_compiled_graphs() - compiled_before,
            "mfu": 6 * num_params * tokens_per_s / (peak * info.world_size) if peak else None,
            "peak_memory_bytes": peak_memory_bytes(info.device),
            "final_train_loss": last_loss,
            "replica_max_abs_diff": replica_diff,
            **{k: v for k, v in history[-1].items() if k.startswith("eval_")},
            **{f"test_{k}": v for k, v in test.items()},
            "majority_baseline_accuracy": data.majority_baseline("test"),
            "label_names": data.label_names,
            "data": data.stats,
            "history": history,
        }
        if fsdp:  # save from a plain (unsharded) copy: same class name and keys as without FSDP
            from transformers import AutoModelForSequenceClassification

            plain = AutoModelForSequenceClassification.from_config(model.config)
            plain.load_state_dict(model_state, strict=True)
            plain.save_pretrained(out_dir / "model")
        else:
            model.save_pretrained(out_dir / "model")
        tokenizer.save_pretrained(out_dir / "model")
        (out_dir / "train_config.json").write_text(json.dumps(dataclasses.asdict(cfg), indent=2))
        (out_dir / "metrics.json").write_text(json.dumps(metrics, indent=2))
        print(
            f"test_accuracy={test['accuracy']:.4f} (majority baseline {metrics['majority_baseline_accuracy']:.4f}); "
            f"{metrics['train_samples_per_second']:.1f} samples/s steady, "
            f"pad_fraction={metrics['pad_fraction']:.3f}; saved {out_dir / 'model'}",
            flush=True,
        )
    return metrics


def parse_args(argv: list[str] | None = None) -> TrainConfig:
    """Parse ``argv`` (``--field value`` per :class:`TrainConfig` field) into a config."""
    from transformers import HfArgumentParser

    (cfg,) = HfArgumentParser(TrainConfig).parse_args_into_dataclasses(args=argv)
    return cfg


def main(argv: list[str] | None = None) -> dict:
    """Entry point for ``python -m pt2aws.train`` and ``torchrun -m pt2aws.train``.

    Returns:
        The metrics dict written to ``metrics.json`` (empty on ranks other than 0).
    """
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    cfg = parse_args(argv)
    info = init_distributed()
    threads = torch.get_num_threads()  # train() sets its own; give an in-process caller theirs back
    try:
        return train(cfg, info)
    finally:
        torch.set_num_threads(threads)
        if info.world_size > 1:
            import torch.distributed as dist

            dist.destroy_process_group()
