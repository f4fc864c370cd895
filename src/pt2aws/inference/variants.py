"""The predictor's fast variants: what each one is, where it runs natively, how it is built.

==============  ==============================================================================
``eager``       fp32, no compilation; the reference every other variant is compared with.
``compile``     ``torch.compile`` (Inductor) of the fp32 model; a one-off compile (25-55 s cold
                on 2 cores, see the stack notes) for faster steady-state kernels.
``bf16``        bf16 weights and activations, where the CPU (AVX512-BF16/AMX on x86, BF16 on
                Graviton3+) or the GPU (Ampere+) computes bf16 natively.
``int8``        dynamic int8 quantization of every ``nn.Linear`` (CPU only): weights int8,
                activations quantized per batch at run time.
==============  ==============================================================================

:func:`variant_support` says whether a variant runs natively on a device, and why not; the
:class:`~pt2aws.inference.predictor.Predictor` raises or warns with that reason, and
:func:`pt2aws.bench.inference.compare_variants` skips the variant with it.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch

from pt2aws.system import is_arm64

VARIANTS = ("eager", "compile", "bf16", "int8")


@dataclass
class VariantChoice:
    """A resolved predictor variant and the reason for it."""

    variant: str
    reason: str


def bf16_supported(device: torch.device) -> tuple[bool, str]:
    """Whether ``device`` computes bf16 natively, and the evidence."""
    if device.type == "cuda":
        ok = torch.cuda.is_bf16_supported()
        name = torch.cuda.get_device_name(device)
        return ok, f"{name} {'supports' if ok else 'lacks'} bf16 (needs Ampere or newer)"
    from pt2aws.env import cpu_info

    cpu = cpu_info()
    if cpu["bf16"]:
        kind = "AMX" if cpu["amx"] else ("BF16" if cpu["graviton"] else "AVX512-BF16")
        return True, f"CPU {cpu['model']} has native bf16 ({kind} in /proc/cpuinfo)"
    return False, f"CPU {cpu['model']} has no bf16 instructions in /proc/cpuinfo"


def variant_support(variant: str, device: torch.device | str) -> tuple[bool, str]:
    """Whether ``variant`` runs natively (at full speed) on ``device``, and why (not).

    Args:
        variant: one of :data:`VARIANTS`.
        device: where the model would run.

    Returns:
        ``(True, reason)`` or ``(False, reason)``. ``bf16`` on a CPU without bf16 instructions
        still runs, emulated and slowly; int8 on a GPU does not run at all.

    Raises:
        ValueError: unknown variant.
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant {variant!r}: choose one of {', '.join(VARIANTS)} or auto")
    device = torch.device(device)
    if variant == "bf16":
        return bf16_supported(device)
    if variant.startswith("int8") and device.type != "cpu":
        return False, "int8 dynamic quantization runs on CPU only: use bf16 on GPU"
    return True, f"{variant} runs on {device.type}"


def choose_variant(device: torch.device | str | None = None) -> VariantChoice:
    """Pick the predictor variant for this hardware.

    * GPU with bf16 (Ampere+): ``bf16``; older GPU: ``eager`` (int8 dynamic quantization is
      CPU-only).
    * CPU with native bf16 (x86 AVX512-BF16/AMX, Graviton3+ BF16): ``bf16``; bf16 matmuls run at
      twice the fp32 rate or more on these units.
    * Other CPUs (e.g. Graviton2, older x86): ``eager``. Dynamic int8 quantization is faster
      (1.85x the HF pipeline vs 1.18x for eager on the fine-tuned MiniLM of ``make run``, 2-core
      Xeon, 2026-11-30) but changed 3.7% of the labels, below the 99% agreement this project
      asks of a variant; so it is opt-in (``variant="int8"``): measure the agreement on your
      own model first (:func:`pt2aws.inference.metrics.label_agreement`).

    ``compile`` is never chosen automatically: its one-off cost (tens of seconds per process)
    only pays back in long-running servers; pass ``variant="compile"`` to use it.
    """
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    ok, why = bf16_supported(device)
    if ok:
        return VariantChoice("bf16", why)
    if device.type == "cuda":
        return VariantChoice("eager", why + "; int8 dynamic quantization is CPU-only")
    return VariantChoice(
        "eager",
        why + "; fp32 eager (int8 is opt-in: it changed 3.7% of labels on the fine-tuned MiniLM)",
    )


def quantize_dynamic_int8(model):
    """``nn.Linear`` -> dynamically quantized int8 Linear (weights int8, activations per batch).

    Uses ``torch.ao.quantization.quantize_dynamic``: deprecated since torch 2.10 in favour of
    torchao's ``quantize_(model, Int8DynamicActivationInt8WeightConfig())``, but still built in
    and working in torch 2.13; its warnings are silenced here. On arm64 it uses the QNNPACK
    engine (fbgemm is x86-only).
    """
    from torch.ao.quantization import quantize_dynamic

    if is_arm64() and "qnnpack" in torch.backends.quantized.supported_engines:
        torch.backends.quantized.engine = "qnnpack"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
