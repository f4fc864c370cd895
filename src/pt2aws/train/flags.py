"""Performance flags: each choice resolved against the hardware and printed once with its reason.

* ``--bf16``: autocast to bfloat16. ``auto`` turns it on for GPUs with bf16 (Ampere and newer);
  on a GPU without bf16 it falls back to fp16 autocast with a ``GradScaler``; off on CPU, with
  the reason read from :func:`pt2aws.env.cpu_features` (native bf16 or emulated, caps honoured).
  ``off`` means plain fp32.
* ``--torch_compile`` (``--torch_compile_mode``): ``torch.compile`` the model. ``auto``: on for
  CUDA, off on CPU (compiling costs 25-55 s per process on 2 cores, no gain for small models).
  The wrap order (compile then DDP; FSDP2 shards then compiles) is in :mod:`pt2aws.train.recipe`.
* ``--fused_adamw``: ``torch.optim.AdamW(fused=True)``, one kernel for the whole update, where the
  installed torch supports the device; otherwise the for-loop implementation ``foreach=False``
  (the benchmark's baseline relies on exactly that).
* ``--tf32``: TF32 tensor-core matmuls for fp32 work on Ampere+ GPUs (``auto``); no-op on CPU.
* ``--attn_implementation sdpa``: PyTorch's fused scaled-dot-product attention where the model
  supports it (falls back to ``eager`` with the reason printed).
* ``--length_bucketing``: batches of similar length (sorted inside windows of 50 global batches,
  then shuffled): less padding and few distinct shapes to compile (see
  :func:`pt2aws.train.distributed.epoch_batches`).
* padding (no flag; :func:`choose_pad_to_multiple`): each batch is padded to a multiple of 8
  tokens on GPUs and under ``torch.compile``, to its own longest text on eager CPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pt2aws.config import Switch, TrainConfig


@dataclass
class Choice:
    """A resolved performance flag and why."""

    enabled: bool
    reason: str


def choose_bf16(device: torch.device, requested: Switch) -> Choice:
    """Resolve ``--bf16`` (autocast to bfloat16) for ``device``.

    Args:
        device: this rank's device.
        requested: ``auto`` (on for GPUs with bf16, off on CPU), ``on`` or ``off``.

    Returns:
        The choice and its reason.

    Raises:
        ValueError: ``on`` on a GPU without bf16 (pre-Ampere).
    """
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
    from pt2aws.env import cpu_features

    native = cpu_features().bf16_native
    if not native:
        return Choice(
            False,
            f"CPU without native bf16 ({native.reason}): emulated, the local profile trained at "
            "0.10x fp32 capped to AVX2 (benchmarks/train_step_cpu.py); --bf16 on forces it",
        )
    return Choice(
        False,
        f"CPU with native bf16 ({native.reason}): off by default on CPU; the local profile "
        "trained 2.5x faster per CPU-second with it on an AVX512-BF16 EPYC "
        "(benchmarks/train_step_cpu.py); --bf16 on turns it on",
    )


def choose_fp16(device: torch.device, requested_bf16: Switch, bf16: Choice) -> Choice:
    """fp16 autocast + GradScaler: only on a GPU without bf16 when ``--bf16 auto``."""
    if device.type == "cuda" and requested_bf16 == "auto" and not bf16.enabled:
        return Choice(True, "GPU lacks bf16: fp16 autocast with a GradScaler instead")
    return Choice(False, "bf16 or fp32 in use" if device.type == "cuda" else "CPU")


def choose_compile(device: torch.device, requested: Switch) -> Choice:
    """Resolve ``--torch_compile``: ``auto`` is on for CUDA, off on CPU (see the module doc)."""
    if requested != "auto":
        return Choice(requested == "on", "requested")
    if device.type == "cuda":
        return Choice(True, "CUDA: inductor kernels pay back the compile time within minutes")
    return Choice(
        False, "CPU: compiling costs 25-55 s per process and gave no gain for small models"
    )


def choose_fused_adamw(device: torch.device, requested: Switch) -> Choice:
    """Resolve ``--fused_adamw`` by building a fused AdamW on ``device`` once.

    Raises:
        ValueError: ``on`` where the installed torch has no fused AdamW for ``device``.
    """
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
        f"torch {torch.__version__} {'supports' if supported else 'lacks'} fused AdamW "
        f"on {device.type}",
    )


def choose_tf32(device: torch.device, requested: Switch) -> Choice:
    """Resolve ``--tf32``: TF32 matmuls need an Ampere+ GPU (compute capability >= 8).

    Raises:
        ValueError: ``on`` without an Ampere or newer GPU.
    """
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


def choose_length_bucketing(enabled: bool) -> Choice:
    """Explain ``--length_bucketing`` (profile default or requested; see :class:`Profile`)."""
    if enabled:
        return Choice(True, "similar lengths per batch: less padding (1.59x on CPU for MiniLM)")
    return Choice(False, "shuffled batches, as HF Trainer sees them; --length_bucketing true")


def choose_pad_to_multiple(device: torch.device, compiled: bool) -> Choice:
    """Pad each batch to a multiple of 8 tokens (``enabled``), or to its own longest text.

    A multiple of 8 pays on GPUs (tensor-core tiles) and under ``torch.compile`` (a few shapes
    instead of one per length, so few recompiles). In eager mode on CPU the extra pad tokens are
    pure work: padding to the longest text trained the ``local`` profile 1.09x faster per
    CPU-second (``benchmarks/train_step_cpu.py --clock cpu``, median of 6 paired blocks, 2-core
    AMD EPYC, native and capped to AVX2 alike). The losses do not change beyond float rounding:
    pad tokens are masked out of attention and the loss.
    """
    if device.type == "cuda":
        return Choice(True, "GPU: tensor-core friendly lengths")
    if compiled:
        return Choice(True, "torch.compile: few distinct shapes, so few recompiles")
    return Choice(False, "eager CPU: each batch padded to its longest text (less work)")


def resolve_flags(cfg: TrainConfig, device: torch.device) -> dict[str, Choice]:
    """Every performance flag of ``cfg`` resolved for ``device`` (SDPA comes with the model).

    Returns:
        ``{"bf16", "torch_compile", "fused_adamw", "tf32", "length_bucketing",
        "pad_to_multiple_of_8", "fp16"}`` -> :class:`Choice`, in the order they are printed.

    Raises:
        ValueError: a flag forced ``on`` where the hardware or torch cannot do it.
    """
    flags = {
        "bf16": choose_bf16(device, cfg.bf16),
        "torch_compile": choose_compile(device, cfg.torch_compile),
        "fused_adamw": choose_fused_adamw(device, cfg.fused_adamw),
        "tf32": choose_tf32(device, cfg.tf32),
        "length_bucketing": choose_length_bucketing(cfg.length_bucketing),
    }
    flags["pad_to_multiple_of_8"] = choose_pad_to_multiple(device, flags["torch_compile"].enabled)
    flags["fp16"] = choose_fp16(device, cfg.bf16, flags["bf16"])
    return flags


def autocast_dtype(flags: dict[str, Choice]) -> torch.dtype | None:
    """The autocast dtype the flags chose: ``torch.bfloat16``, ``torch.float16``, or ``None``."""
    if flags["fp16"].enabled:
        return torch.float16
    return torch.bfloat16 if flags["bf16"].enabled else None
