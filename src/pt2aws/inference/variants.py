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
``ort-fp32``     ONNX Runtime (CPU) on the model exported to ONNX with its transformer fusions
                 (:mod:`pt2aws.inference.ort`; exported once into ``<model>/onnx/``, shipped in
                 ``model.tar.gz``).
``ort-int8``     the same graph with ONNX Runtime's dynamic int8 quantization: weights int8 per
                 output channel, activations per tensor at run time, the classifier kept fp32.
===============  =============================================================================

**One fp32 model, every variant.** :func:`build_variant` builds a variant from the fp32 model
already loaded (:func:`load_fp32`): ``compile`` and the ONNX Runtime variants leave its weights
as they are; ``bf16`` and ``int8`` convert them in place, so with ``keep_fp32=True`` (several
variants of one model side by side, as ``auto`` measures them) they convert a copy.

**What a CPU runs slowly.** :func:`emulated_variants` names the variants this CPU has no fast
path for: torchao ``int8`` without int8 dot-product instructions (:func:`int8_supported`: 0.09x
eager on a 2-core AVX2 EPYC, issue 16; not emulated, as AVX2 has int8 multiply-adds, but
torchao has no fast kernel for them) and ``bf16`` without native bf16 (:func:`bf16_supported`:
emulated). Notebook 02 and ``benchmarks/inference_speed.py`` leave them out by default with that
reason (:func:`default_variants`); ``auto`` still times what it may choose.

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

from pt2aws.env.machine import is_arm64

VARIANTS = ("eager", "compile", "bf16", "int8", "int8-legacy", "ort-fp32", "ort-int8")
#: Variants that call ``torch.compile`` (Inductor builds C++ kernels for them on a CPU).
COMPILED_VARIANTS = ("compile", "int8")
#: Variants run by ONNX Runtime from the files :func:`pt2aws.inference.ort.onnx_files` exports.
ORT_VARIANTS = ("ort-fp32", "ort-int8")
#: Variants that convert the fp32 model's weights in place (:func:`build_variant` copies first
#: when the fp32 model must stay as it is).
IN_PLACE_VARIANTS = ("bf16", "int8")

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
        still runs, emulated and slowly; int8 and the ONNX Runtime variants do not run on a GPU
        here; ``compile`` and ``int8`` do not run on a CPU machine without a C++ compiler
        (:func:`compiler_missing`), nor the ONNX Runtime variants without ``onnxruntime``.
        ``int8`` otherwise counts as runnable on any CPU, so ``auto`` keeps measuring it;
        :func:`emulated_variants` says which variants this CPU only emulates (for defaults that
        leave them out).

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
    if variant in ORT_VARIANTS:
        if device.type != "cpu":
            return False, "the ONNX Runtime variants run on ONNX Runtime's CPU provider only"
        from pt2aws.inference.ort import onnxruntime_missing

        missing = onnxruntime_missing()
        if missing:
            return False, missing
    if variant in COMPILED_VARIANTS and device.type == "cpu":
        missing = compiler_missing()
        if missing:
            return False, missing
    return True, f"{variant} runs on {device.type}"


#: Why torchao ``int8`` is left out without int8 dot products. Not "emulated": AVX2 has int8
#: multiply-adds (``vpmaddubsw``/``vpmaddwd``) that fbgemm and ONNX Runtime use; torchao's path
#: has no fast kernel without VNNI/AMX (0.09x eager on a real 2-core AVX2 EPYC, issue 16), and a
#: VNNI CPU capped to AVX2 still ran it at 1.4x fp32 (``benchmarks/cpu_caps.py``).
INT8_SLOW_PATH = (
    "torchao int8 has no fast path without VNNI/AMX (0.09x eager on a real AVX2 EPYC; "
    "the caps do not reproduce it)"
)


def emulated_variants(
    variants: Sequence[str], device: torch.device | str = "cpu"
) -> dict[str, str]:
    """The variants among ``variants`` that this CPU would only emulate, with the reason.

    torchao ``int8`` needs int8 dot-product instructions (:func:`int8_supported`: x86 AVX512-VNNI,
    AVX-VNNI or AMX-INT8; Arm SDOT/UDOT or I8MM; without them it ran at 0.09x eager on a 2-core
    AVX2 CPU, issue 16); ``bf16`` needs native bf16 (:func:`bf16_supported`). ``int8-legacy``
    (fbgemm/QNNPACK) and ``ort-int8`` (ONNX Runtime's MLAS) have AVX2 and NEON int8 kernels: not
    emulated. Both checks read :func:`pt2aws.env.cpu_features`, caps included.

    Args:
        variants: variant names.
        device: where they would run (a GPU emulates none of these).

    Returns:
        ``{variant: reason}`` for those left out, e.g. ``{"int8": "no int8 dot-product
        instructions (CPU: old x86 has no AVX512-VNNI ...): torchao int8 has no fast path
        without VNNI/AMX ..."}`` (:data:`INT8_SLOW_PATH`).
    """
    device = torch.device(device)
    if device.type != "cpu":
        return {}
    checks = {
        "int8": (int8_supported, "int8 dot-product instructions", INT8_SLOW_PATH),
        "bf16": (bf16_supported, "native bf16", "bf16 is emulated"),
    }
    out = {}
    for variant in variants:
        if variant in checks:
            check, what, consequence = checks[variant]
            native, why = check(device)
            if not native:
                out[variant] = f"no {what} ({why}): {consequence}"
    return out


def default_variants(
    variants: Sequence[str], *, include_emulated: bool = False, device: torch.device | str = "cpu"
) -> tuple[list[str], dict[str, str]]:
    """``variants`` minus those this CPU emulates (:func:`emulated_variants`), unless
    ``include_emulated`` (notebook 02's ``TIME_EMULATED``, the benchmark's
    ``--include-emulated``).

    Returns:
        ``(kept, {variant: reason left out})``, in the order of ``variants``.
    """
    left_out = {} if include_emulated else emulated_variants(variants, device)
    return [v for v in variants if v not in left_out], left_out


def supported_variants(
    device: torch.device | str, candidates: Sequence[str], *, include_emulated: bool = False
) -> tuple[list[str], dict[str, str]]:
    """Split ``candidates`` into those that run natively on ``device`` and the others.

    Args:
        device: where they would run.
        candidates: variant names.
        include_emulated: count variants this CPU only emulates (:func:`emulated_variants`,
            e.g. bf16 without native bf16) as runnable: they run, slowly, when asked for.

    Returns:
        ``(runnable, {variant: reason it is left out})``, in the order of ``candidates``.
    """
    emulated = emulated_variants(candidates, device) if include_emulated else {}
    runnable, left_out = [], {}
    for variant in candidates:
        native, why = variant_support(variant, device)
        if native or variant in emulated:
            runnable.append(variant)
        else:
            left_out[variant] = why
    return runnable, left_out


def load_fp32(model_dir: str):
    """The fp32 model (eval mode, CPU) and tokenizer saved in ``model_dir``: what every variant
    is built from.

    Returns:
        ``(model, tokenizer)``.
    """
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from transformers.utils import logging as hf_logging

    # transformers 5 draws a "Loading weights" bar per model: noise for a local model in notebooks
    hf_logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    # a guard on problem_type would otherwise recompile the compiled model (stack notes §3)
    model.config.problem_type = model.config.problem_type or "single_label_classification"
    return model, tokenizer


def build_variant(
    model: torch.nn.Module,
    variant: str,
    device: torch.device | str = "cpu",
    *,
    keep_fp32: bool = False,
    model_dir: str | None = None,
    tokenizer=None,
):
    """``model`` (fp32, eval mode, on CPU) as ``variant`` on ``device``.

    Args:
        model: the fp32 model (:func:`load_fp32`).
        variant: one of :data:`VARIANTS`.
        device: where it runs.
        keep_fp32: leave ``model`` itself fp32: ``bf16`` and ``int8`` convert a copy.
        model_dir: the model's folder, where the ONNX Runtime variants' files are (or are
            exported to, from ``model``, when ``tokenizer`` is given:
            :func:`pt2aws.inference.ort.onnx_files`).
        tokenizer: the model's tokenizer (for that export).

    Returns:
        ``(module, callable)``: the uncompiled module (save or inspect this one; for ONNX
        Runtime the session wrapper) and what to call for predictions (the compiled module for
        ``compile`` and ``int8``).

    Raises:
        FileNotFoundError: an ONNX Runtime variant without its files and nothing to export from.
    """
    import copy

    device = torch.device(device)
    if variant in ORT_VARIANTS:
        from pt2aws.inference.ort import OrtClassifier, onnx_files

        if model_dir is None:
            raise FileNotFoundError(f"{variant} needs the model folder with its ONNX files")
        session = OrtClassifier(onnx_files(model_dir, model, tokenizer)[variant], model.config)
        return session, session
    if keep_fp32 and variant in IN_PLACE_VARIANTS:
        model = copy.deepcopy(model)
    if variant == "int8":
        model = quantize_int8(model)
    elif variant == "int8-legacy":
        model = quantize_dynamic_int8(model)  # a quantized copy: the fp32 model stays
    elif variant == "bf16":
        model = model.to(torch.bfloat16)
    model = model.to(device)
    return model, torch.compile(model) if variant in COMPILED_VARIANTS else model


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
