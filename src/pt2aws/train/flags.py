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

from dataclasses import dataclass

import torch

from pt2aws.config import Switch


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
    """Peak dense bf16 FLOP/s of this GPU (from :func:`pt2aws.sizing.catalog.peak_bf16_flops`).

    Returns:
        FLOP/s, or None on CPU and on GPUs the catalog does not list (MFU is then not reported).
    """
    if device.type != "cuda":
        return None
    from pt2aws.sizing.catalog import peak_bf16_flops as catalog_peak

    return catalog_peak(torch.cuda.get_device_name(device))
