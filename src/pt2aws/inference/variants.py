"""The predictor's fast variants: what each one is, where it runs natively, how it is built.

===============  =============================================================================
``eager``        fp32, no compilation; the reference every other variant is compared with.
``compile``      ``torch.compile`` (Inductor) of the fp32 model; a one-off compile (25-55 s cold
                 on 2 cores, see the stack notes) for faster steady-state kernels.
``bf16``         bf16 weights and activations, where the CPU (AVX512-BF16/AMX on x86, BF16 on
                 Graviton3+) or the GPU (Ampere+) computes bf16 natively.
``int8``         torchao ``quantize_`` with ``Int8DynamicActivationInt8WeightConfig`` (CPU only):
                 weights int8 per output channel, activations int8 per token, quantized at run
                 time; the layers in :data:`INT8_FP32_LAYERS` (the classification head) stay
                 fp32; then ``torch.compile``, which fuses the (de)quantization into the int8
                 matmuls (without it the quantization runs op by op and is slower than fp32).
``int8-legacy``  ``torch.ao.quantization.quantize_dynamic`` of every ``nn.Linear`` (CPU only):
                 weights int8 per tensor, activations per batch; deprecated since torch 2.10,
                 kept for comparison (it changed 3.4% of the validation labels of the ``make run``
                 MiniLM, torchao's int8 0.6%: ``benchmarks/README.md``).
===============  =============================================================================

``compile`` and ``int8`` call ``torch.compile``: on a CPU, Inductor writes C++ kernels and builds
them with a C++ compiler at the first call, so they need ``g++`` and the Python headers on the
machine that serves (the project's serving image installs both; ``python:3.12-slim`` alone has
no compiler). :func:`compiler_missing` checks that before anything is built.

:func:`variant_support` says whether a variant runs natively on a device, and why not; the
:class:`~pt2aws.inference.predictor.Predictor` raises or warns with that reason, and
:func:`pt2aws.inference.selection.compare_variants` skips the variant with it. ``auto`` (choosing by
measurement) is in :mod:`pt2aws.inference.selection`.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from pt2aws.system import is_arm64

VARIANTS = ("eager", "compile", "bf16", "int8", "int8-legacy")
#: Variants that call ``torch.compile`` (Inductor builds C++ kernels for them on a CPU).
COMPILED_VARIANTS = ("compile", "int8")

#: Linear layers the torchao ``int8`` variant keeps in fp32, by name (a layer is kept when its
#: dotted name starts with one of these). The classification head: its 2-3 outputs decide the
#: label directly, it is a negligible share of the compute, and torchao skips tiny layers
#: anyway; measured on the ``make run`` MiniLM, see ``benchmarks/README.md``.
INT8_FP32_LAYERS = ("classifier",)


@dataclass
class VariantChoice:
    """A resolved predictor variant and the reason for it."""

    variant: str
    reason: str


def bf16_supported(device: torch.device) -> tuple[bool, str]:
    """Whether ``device`` computes bf16 natively, and the evidence.

    CPU: :func:`pt2aws.env.cpu_features` (``bf16_native``: the kernel's view of the CPU, with the
    ``ATEN_CPU_CAPABILITY`` / ``ONEDNN_MAX_CPU_ISA`` caps honoured); GPU: Ampere or newer.
    """
    if device.type == "cuda":
        ok = torch.cuda.is_bf16_supported()
        name = torch.cuda.get_device_name(device)
        return ok, f"{name} {'supports' if ok else 'lacks'} bf16 (needs Ampere or newer)"
    from pt2aws.env import cpu_features

    native = cpu_features().bf16_native
    return native.available, f"CPU: {native.reason}"


def int8_supported(device: torch.device) -> tuple[bool, str]:
    """Whether ``device`` has the int8 dot-product instructions that make ``int8`` fast.

    torchao's int8 matmuls are oneDNN int8 GEMMs: fast with x86 VNNI or AMX-INT8, Arm SDOT/UDOT
    or I8MM (:func:`pt2aws.env.cpu_features` ``int8_dot``, caps honoured), slow without them (the
    ``int8`` variant ran at 0.09x eager on a 2-core AVX2-only AMD EPYC, issue 16). Capping a VNNI
    CPU to AVX2 slows oneDNN's int8 GEMM 4x but leaves a compiled torchao int8 linear 1.4x fp32
    (``benchmarks/cpu_caps.py``): the caps do not reproduce that 0.09x. For defaults that leave
    ``int8`` out; :func:`variant_support` still lets ``auto`` measure it.
    """
    if device.type != "cpu":
        return False, "int8 dynamic quantization runs on CPU only: use bf16 on GPU"
    from pt2aws.env import cpu_features

    dot = cpu_features().int8_dot
    return dot.available, f"CPU: {dot.reason}"


@functools.lru_cache(maxsize=1)
def compiler_missing() -> str | None:
    """Why ``torch.compile`` cannot build CPU kernels on this machine, or ``None`` when it can.

    Inductor's CPU backend compiles the C++ it generates with the compiler that
    ``torch._inductor.cpp_builder.get_cpp_compiler`` finds (``g++`` unless ``CXX``/Inductor's
    config names another), and the kernels include ``Python.h``. Without either, the first call of
    a compiled model fails with ``InvalidCxxCompiler`` or a build error, minutes into a start-up.

    Returns:
        ``None``, or one sentence naming what is missing and the fix.
    """
    import sysconfig
    from pathlib import Path

    try:
        from torch._inductor import cpp_builder

        compiler = cpp_builder.get_cpp_compiler()
    except Exception as err:  # InvalidCxxCompiler, or a torch without this helper
        return (
            f"torch.compile on a CPU needs a C++ compiler and none was found ({type(err).__name__}):"
            " install g++ (the pt2aws serving image has it) or serve eager, bf16 or int8-legacy"
        )
    include = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if not include.is_file():
        return (
            f"torch.compile on a CPU builds kernels that include Python.h, and {include} is "
            "missing: install the Python headers (Debian: python3-dev) or serve eager, bf16 or "
            f"int8-legacy (compiler: {compiler})"
        )
    return None


def variant_support(variant: str, device: torch.device | str) -> tuple[bool, str]:
    """Whether ``variant`` runs natively (at full speed) on ``device``, and why (not).

    Args:
        variant: one of :data:`VARIANTS`.
        device: where the model would run.

    Returns:
        ``(True, reason)`` or ``(False, reason)``. ``bf16`` on a CPU without bf16 instructions
        still runs, emulated and slowly; int8 on a GPU does not run at all; ``compile`` and
        ``int8`` do not run on a CPU machine without a C++ compiler (:func:`compiler_missing`).
        ``int8`` otherwise counts as runnable on any CPU, so ``auto`` keeps measuring it;
        :func:`int8_supported` says whether the CPU has the int8 dot products that make it fast
        (for defaults that leave it out).

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
    if variant in COMPILED_VARIANTS and device.type == "cpu":
        missing = compiler_missing()
        if missing:
            return False, missing
    return True, f"{variant} runs on {device.type}"


def supported_variants(
    device: torch.device | str, candidates: Sequence[str]
) -> tuple[list[str], dict[str, str]]:
    """Split ``candidates`` into those that run natively on ``device`` and the others.

    Returns:
        ``(runnable, {variant: reason it is left out})``, in the order of ``candidates``.
    """
    runnable, left_out = [], {}
    for variant in candidates:
        native, why = variant_support(variant, device)
        if native:
            runnable.append(variant)
        else:
            left_out[variant] = why
    return runnable, left_out


def build_variant(model: torch.nn.Module, variant: str, device: torch.device):
    """``model`` (fp32, eval mode, on CPU) turned into ``variant`` on ``device``.

    Returns:
        ``(module, callable)``: the uncompiled module (save or inspect this one) and what to
        call for predictions (the compiled module for ``compile`` and ``int8``).
    """
    if variant == "int8":
        model = quantize_int8(model)
    elif variant == "int8-legacy":
        model = quantize_dynamic_int8(model)
    elif variant == "bf16":
        model = model.to(torch.bfloat16)
    model = model.to(device)
    return model, torch.compile(model) if variant in ("compile", "int8") else model


def quantize_int8(model: torch.nn.Module, keep_fp32: Sequence[str] = INT8_FP32_LAYERS):
    """torchao int8: dynamic per-token int8 activations and per-channel int8 weights, in place.

    ``torchao.quantization.quantize_(model, Int8DynamicActivationInt8WeightConfig(),
    filter_fn=...)`` (torchao 0.18); every ``nn.Linear`` whose name does not start with one of
    ``keep_fp32`` is quantized (torchao itself skips layers with ``in_features <= 16``).

    Args:
        model: an fp32 model on CPU.
        keep_fp32: name prefixes of Linear layers left in fp32 (default :data:`INT8_FP32_LAYERS`).

    Returns:
        ``model``, quantized in place.
    """
    from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_

    def quantize_this(module: torch.nn.Module, name: str) -> bool:
        return isinstance(module, torch.nn.Linear) and not name.startswith(tuple(keep_fp32))

    # torchao 0.18's Int8Tensor warns that it has no caching hash, once, when the compiled model
    # first runs (after this function returns): noise for the user, so ignored for the process
    warnings.filterwarnings("ignore", message=".*_stable_hash_for_caching.*")
    quantize_(model, Int8DynamicActivationInt8WeightConfig(), filter_fn=quantize_this)
    return model


def quantize_dynamic_int8(model: torch.nn.Module):
    """``nn.Linear`` -> dynamically quantized int8 Linear (weights int8, activations per batch).

    Uses ``torch.ao.quantization.quantize_dynamic``: deprecated since torch 2.10 in favour of
    torchao (:func:`quantize_int8`), but still built in and working in torch 2.13; its warnings
    are silenced here. On arm64 it uses the QNNPACK engine (fbgemm is x86-only).
    """
    from torch.ao.quantization import quantize_dynamic

    if is_arm64() and "qnnpack" in torch.backends.quantized.supported_engines:
        torch.backends.quantized.engine = "qnnpack"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
