"""The predictor's variants, each built from one fp32 model: ``eager`` (the reference),
``compile`` (Inductor), ``bf16``, ``int8`` (torchao int8 weights per channel and activations per
token, :data:`INT8_FP32_LAYERS` kept fp32, then compiled), ``ort-fp32`` and ``ort-int8`` (ONNX
Runtime, :mod:`pt2aws.inference.ort`). :func:`slow_here` names those without a fast path on this
CPU; ``compile`` and ``int8`` need a C++ compiler and Python headers (:func:`compiler_missing`).
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import warnings
from collections.abc import Sequence

import torch

from pt2aws.serving.handler import classify, max_tokens

VARIANTS = ("eager", "compile", "bf16", "int8", "ort-fp32", "ort-int8")
COMPILED_VARIANTS = ("compile", "int8")
ORT_VARIANTS = ("ort-fp32", "ort-int8")
#: Variants that convert weights in place (built from a copy when the fp32 model must stay).
IN_PLACE_VARIANTS = ("bf16", "int8")
#: Linear layers torchao ``int8`` keeps fp32 (name prefixes): the head decides the label.
INT8_FP32_LAYERS = ("classifier",)
#: AVX2 int8 multiply-adds serve fbgemm and ONNX Runtime; torchao's kernels need VNNI/AMX.
INT8_SLOW_PATH = "torchao int8 has no fast path without VNNI/AMX"


@functools.lru_cache(maxsize=1)
def compiler_missing() -> str | None:
    """Why ``torch.compile`` cannot build CPU kernels here (no C++ compiler or ``Python.h``),
    with the fix; None when it can."""
    import sysconfig
    from pathlib import Path

    try:
        from torch._inductor import cpp_builder

        cpp_builder.get_cpp_compiler()
    except Exception as err:  # InvalidCxxCompiler
        missing = f"none was found ({type(err).__name__}): install g++"
    else:
        include = Path(sysconfig.get_paths()["include"]) / "Python.h"
        missing = None if include.is_file() else f"{include} is missing: install python3-dev"
    return missing and (
        f"torch.compile on a CPU needs a C++ compiler and Python.h, and {missing} (the serving "
        "image has both) or serve eager, bf16 or ort-int8"
    )


def cannot_run(variant: str, device="cpu", name: str = "variant ") -> str | None:
    """Why ``variant`` cannot run on ``device`` (None: it can, fast or not: :func:`slow_here`);
    ValueError ``{name}{variant!r}`` if unknown."""
    if variant not in VARIANTS:
        raise ValueError(f"{name}{variant!r}: choose one of {', '.join(VARIANTS)} or auto")
    device = torch.device(device)
    if device.type == "cuda":
        if variant == "bf16" and not torch.cuda.is_bf16_supported():
            return f"{torch.cuda.get_device_name(device)} lacks bf16 (needs Ampere+)"
        if variant == "int8":
            return "int8 dynamic quantization runs on CPU only: use bf16 on GPU"
        if variant in ORT_VARIANTS:
            return "the ONNX Runtime variants run on ONNX Runtime's CPU provider only"
    elif variant in ORT_VARIANTS and importlib.util.find_spec("onnxruntime") is None:
        return "onnxruntime is not installed (pip install onnxruntime; the serving image has it)"
    elif variant in COMPILED_VARIANTS:
        return compiler_missing()
    return None


def slow_here(variants: Sequence[str], device: torch.device | str = "cpu") -> dict[str, str]:
    """``{variant: why}`` for those this CPU has no fast path for (:func:`pt2aws.env.cpu_features`):
    ``bf16`` without native bf16, torchao ``int8`` without int8 dot products."""
    if torch.device(device).type != "cpu":
        return {}
    from pt2aws import env

    features, out = env.cpu_features(), {}
    if "bf16" in variants and not features.bf16_native:
        out["bf16"] = f"no native bf16 ({features.bf16_native.reason}): bf16 is emulated"
    if "int8" in variants and not features.int8_dot:
        out["int8"] = f"no int8 dot products ({features.int8_dot.reason}): {INT8_SLOW_PATH}"
    return out


def require_variant(variant: str, device: torch.device | str = "cpu",
                    name="variant ") -> str | None:  # fmt: skip
    """Why ``variant`` runs slowly on ``device`` (None: it does not); ValueError
    ``{name}{variant}: why`` where it is unknown or cannot run there."""
    if why := cannot_run(variant, device, name):
        raise ValueError(f"{name}{variant}: {why}")
    return slow_here([variant], device).get(variant)


def runnable_variants(variants: Sequence[str], device: torch.device | str = "cpu", *,
                      include_slow: bool = False) -> tuple[list[str], dict[str, str]]:  # fmt: skip
    """``variants`` (order kept, once each) split into those to build here and ``{variant: why}``
    for those that cannot run and, unless ``include_slow``, run slowly."""
    variants = list(dict.fromkeys(variants))
    why = {} if include_slow else slow_here(variants, device)
    why |= {v: reason for v in variants if (reason := cannot_run(v, device))}
    return [v for v in variants if v not in why], {v: why[v] for v in variants if v in why}


def load_fp32(model_dir: str):
    """``(model, tokenizer)`` saved in ``model_dir``: fp32, eval mode, CPU."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # a "Loading weights" bar per model: noise in notebooks
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    # a guard on problem_type would otherwise recompile the compiled model (stack notes §3)
    model.config.problem_type = model.config.problem_type or "single_label_classification"
    return model, tokenizer


def build_variant(model: torch.nn.Module, variant: str, device: torch.device | str = "cpu", *,
                  keep_fp32: bool = False, model_dir: str | None = None, tokenizer=None,
                  texts: Sequence[str] | None = None):  # fmt: skip
    """``(module, callable)``: ``model`` (fp32, eval, CPU) as ``variant`` on ``device``, the
    uncompiled module (or ONNX Runtime session) and what predictions call. ``keep_fp32``: convert
    a copy; ``model_dir``/``tokenizer``: where the ONNX files are or are exported to (else
    FileNotFoundError), ``texts``: validation texts the export measures its settings on."""
    if variant in ORT_VARIANTS:
        from pt2aws.inference.ort import OrtClassifier, onnx_files

        if model_dir is None:
            raise FileNotFoundError(f"{variant} needs the model folder with its ONNX files")
        files = onnx_files(model_dir, model, tokenizer, texts=texts)
        session = OrtClassifier(files[variant], model.config)
        return session, session
    if keep_fp32 and variant in IN_PLACE_VARIANTS:
        model = copy.deepcopy(model)
    if variant == "int8":
        from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_

        def quantize_this(module: torch.nn.Module, name: str) -> bool:
            return isinstance(module, torch.nn.Linear) and not name.startswith(INT8_FP32_LAYERS)

        # torchao 0.18 warns at the first call that Int8Tensor has no caching hash: noise
        warnings.filterwarnings("ignore", message=".*_stable_hash_for_caching.*")
        quantize_(model, Int8DynamicActivationInt8WeightConfig(), filter_fn=quantize_this)
    elif variant == "bf16":
        model = model.to(torch.bfloat16)
    model = model.to(device)
    return model, torch.compile(model) if variant in COMPILED_VARIANTS else model


class Classifier:
    """A built variant (``model(**encoding).logits``; ``module`` its uncompiled module) with its
    tokenizer, classifying through the endpoint's :func:`pt2aws.serving.handler.classify`.
    ``max_length``: tokens per window (default the model's limit); ``long_texts``: ``"truncate"``
    or ``"windows"`` (overlapping by a quarter)."""

    def __init__(self, model, tokenizer, config, *, variant: str = "eager", module=None,
                 max_length: int | None = None, batch_size: int = 32, device="cpu",
                 long_texts: str = "truncate"):  # fmt: skip
        if long_texts not in ("truncate", "windows"):
            raise ValueError(f"long_texts={long_texts!r}: use truncate or windows")
        if batch_size < 1:
            raise ValueError(f"batch_size={batch_size}: need at least 1")
        self.model, self.module = model, model if module is None else module
        self.tokenizer, self.config, self.variant = tokenizer, config, variant
        self.max_length = max_length or max_tokens(config, tokenizer)
        self.batch_size, self.device, self.long_texts = batch_size, torch.device(device), long_texts
        self.label_names = [config.id2label[i] for i in range(config.num_labels)]

    def predict_proba(self, texts: Sequence[str]) -> torch.Tensor:
        """Class probabilities, float32 ``(len(texts), num_labels)``, in input order; TypeError
        for one string."""
        if isinstance(texts, str):
            raise TypeError("pass a list of texts; wrap a single text in [ ]")
        stride = self.max_length // 4 if self.long_texts == "windows" else None
        return classify(list(texts), self.tokenizer, self.model, self.max_length, stride=stride,
                        batch_size=self.batch_size, device=self.device)[0]  # fmt: skip

    def predict_ids(self, texts: Sequence[str]) -> list[int]:
        return self.predict_proba(texts).argmax(-1).tolist()

    def predict(self, texts: Sequence[str]) -> list[dict]:
        """``[{"label", "score", "label_id"}, ...]``, one per text, in order."""
        scores, ids = self.predict_proba(texts).max(-1)
        return [{"label": self.label_names[int(i)], "score": float(s), "label_id": int(i)}
                for s, i in zip(scores, ids)]  # fmt: skip
