"""Local, batched predictions from a saved model directory, its fast variants, and evaluation.

Example::

    predictor = Predictor("runs/x/train/model", variant="auto")   # prints the variant and why
    predictor.predict(["What a great phone!", "Worst service ever."])
    # [{"label": "positive", "score": 0.97, "label_id": 1}, {"label": "negative", ...}]

Variants (``Predictor(variant=...)``):

* ``"eager"``: fp32, no compilation; the reference the others are compared with.
* ``"compile"``: ``torch.compile`` (Inductor) of the fp32 model; pays a one-off compile
  (25-55 s cold on 2 cores, see the stack notes) for faster steady-state kernels.
* ``"bf16"``: bf16 weights and activations, where the CPU (AVX512-BF16/AMX on x86, BF16 on
  Graviton3+) or the GPU (Ampere+) computes bf16 natively.
* ``"int8"``: dynamic int8 quantization of every ``nn.Linear`` (CPU only), weights int8,
  activations quantized per batch at run time.
* ``"auto"``: :func:`choose_variant` picks one for the hardware and says why.
"""

from __future__ import annotations

import logging
import os
import platform
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from pt2aws.modeling import ROBERTA_MAX_TOKENS

logger = logging.getLogger(__name__)

VARIANTS = ("eager", "compile", "bf16", "int8")
#: Model types whose position ids are offset by ``padding_idx + 1`` (fairseq): their configs list
#: 2 more positions than the model accepts (RoBERTa: 514 listed, 512 usable).
OFFSET_POSITION_MODELS = ("roberta", "xlm-roberta", "camembert", "longformer")


@dataclass
class VariantChoice:
    """A resolved predictor variant and the reason for it."""

    variant: str
    reason: str


def model_max_tokens(config, tokenizer=None) -> int:
    """The longest input the model really accepts, in tokens.

    ``max_position_embeddings`` minus the 2-slot offset for RoBERTa-family models, capped by the
    tokenizer's ``model_max_length`` and by 512 (RoBERTa-base's real limit).
    """
    limit = int(getattr(config, "max_position_embeddings", ROBERTA_MAX_TOKENS))
    if getattr(config, "model_type", "") in OFFSET_POSITION_MODELS:
        limit -= 2
    if tokenizer is not None and int(tokenizer.model_max_length) > 0:
        limit = min(limit, int(tokenizer.model_max_length))
    return min(limit, ROBERTA_MAX_TOKENS)


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
      own model first (:func:`label_agreement`).

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


def _quantize_dynamic_int8(model):
    """``nn.Linear`` -> dynamically quantized int8 Linear (weights int8, activations per batch).

    Uses ``torch.ao.quantization.quantize_dynamic``: deprecated since torch 2.10 in favour of
    torchao's ``quantize_(model, Int8DynamicActivationInt8WeightConfig())``, but still built in
    and working in torch 2.13 (torchao would be a new dependency); its warnings are silenced here.
    """
    from torch.ao.quantization import quantize_dynamic

    engines = torch.backends.quantized.supported_engines
    if platform.machine() in ("aarch64", "arm64") and "qnnpack" in engines:
        torch.backends.quantized.engine = "qnnpack"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)


class Predictor:
    """Batched text classification with truncation, for CPU or GPU, in one of :data:`VARIANTS`.

    Args:
        model_dir: a directory written by ``save_pretrained`` (model and tokenizer).
        device: ``"cpu"``, ``"cuda"`` or ``None`` (CUDA when available).
        batch_size: texts per forward pass (texts are sorted by length first, so each batch
            pads little).
        max_length: tokens per text; default: the model's real limit (:func:`model_max_tokens`:
            512 for RoBERTa, whose config lists 514 positions, 2 of them a padding offset).
        variant: ``"eager"`` (fp32), ``"compile"``, ``"bf16"``, ``"int8"`` or ``"auto"``
            (:func:`choose_variant`, which prints its reason).

    Raises:
        ValueError: unknown variant, ``int8`` on a GPU, or ``bf16`` on a GPU without bf16 (on a
            CPU without native bf16 it runs emulated, with a warning).
    """

    def __init__(
        self,
        model_dir: str,
        *,
        device: str | None = None,
        batch_size: int = 32,
        max_length: int | None = None,
        variant: str = "eager",
    ):
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        if variant not in (*VARIANTS, "auto"):
            raise ValueError(f"variant {variant!r}: choose one of {', '.join(VARIANTS)} or auto")
        if batch_size < 1:
            raise ValueError(f"batch_size={batch_size}: need at least 1")
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        if variant == "auto":
            choice = choose_variant(self.device)
            print(f"predictor variant: {choice.variant} ({choice.reason})")
            variant, self.variant_reason = choice.variant, choice.reason
        else:
            self.variant_reason = "requested"
        if variant == "int8" and self.device.type != "cpu":
            raise ValueError(
                "variant int8 (dynamic quantization) runs on CPU only: use bf16 on GPU"
            )
        if variant == "bf16":
            ok, why = bf16_supported(self.device)
            if not ok and self.device.type == "cuda":
                raise ValueError(f"variant bf16: {why}; use eager")
            if not ok:  # torch still runs bf16 on any x86/arm CPU, through slower conversions
                warnings.warn(
                    f"variant bf16: {why}; bf16 is emulated and likely slow", stacklevel=2
                )
                self.variant_reason = f"requested; emulated ({why})"
        self.variant = variant
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
        # a guard on problem_type would otherwise recompile the compiled model (stack notes §3)
        model.config.problem_type = model.config.problem_type or "single_label_classification"
        self.config = model.config
        self.batch_size = batch_size
        self.max_length = max_length or model_max_tokens(model.config, self.tokenizer)
        self.label_names = [model.config.id2label[i] for i in range(model.config.num_labels)]
        if variant == "int8":
            model = _quantize_dynamic_int8(model)
        elif variant == "bf16":
            model = model.to(torch.bfloat16)
        model = model.to(self.device)
        self.module = model  # the uncompiled module (save/inspect this one)
        self.model = torch.compile(model) if variant == "compile" else model

    @torch.inference_mode()
    def predict_proba(self, texts: Sequence[str]) -> torch.Tensor:
        """Class probabilities, float32 tensor of shape ``(len(texts), num_labels)``, input order.

        Texts are sorted by length before batching so each batch pads little.
        """
        if isinstance(texts, str):
            raise TypeError("predict_proba takes a list of texts; wrap a single text in [ ]")
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        probs = torch.empty(len(texts), len(self.label_names))
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            enc = self.tokenizer(
                [texts[i] for i in idx],
                truncation=True,
                max_length=self.max_length,
                padding=True,
                return_tensors="pt",
            ).to(self.device)
            probs[idx] = self.model(**enc).logits.float().softmax(-1).cpu()
        return probs

    def predict(self, texts: Sequence[str]) -> list[dict]:
        """``[{"label": str, "score": float, "label_id": int}, ...]``, one per text, in order."""
        probs = self.predict_proba(texts)
        scores, ids = probs.max(-1)
        return [
            {"label": self.label_names[int(i)], "score": float(s), "label_id": int(i)}
            for s, i in zip(scores, ids)
        ]

    def predict_ids(self, texts: Sequence[str]) -> list[int]:
        """Predicted label ids, one per text, in order."""
        return self.predict_proba(texts).argmax(-1).tolist()


def label_agreement(reference: Sequence[int], other: Sequence[int]) -> float:
    """Fraction of positions where two label sequences agree (1.0 = identical).

    Raises:
        ValueError: the sequences differ in length or are empty.
    """
    if len(reference) != len(other) or not reference:
        raise ValueError(
            f"label_agreement needs two non-empty sequences of equal length, got {len(reference)} "
            f"and {len(other)}"
        )
    return sum(int(a == b) for a, b in zip(reference, other)) / len(reference)


def runtime_settings(num_processes: int = 1, cpu: dict | None = None) -> dict:
    """The CPU inference runtime settings for this machine, each with its reason.

    Source: AWS Graviton Technical Guide, machinelearning/pytorch.md
    (github.com/aws/aws-graviton-getting-started, checked 2026-11): ``DNNL_DEFAULT_FPMATH_MODE=BF16``
    where ``/proc/cpuinfo`` shows bf16 (Graviton3+), ``LRU_CACHE_CAPACITY=1024`` (oneDNN
    primitive cache), ``THP_MEM_ALLOC_ENABLE=1`` (transparent huge pages from the c10 allocator),
    ``OMP_NUM_THREADS = vCPUs / processes``. The bf16 fast-math mode is only set on aarch64:
    on x86 oneDNN takes the same variable but this project's bf16 variant covers that case.

    Args:
        num_processes: inference processes sharing the CPUs (model-server workers).
        cpu: :func:`pt2aws.env.cpu_info` output (default: this machine).

    Returns:
        ``{"env": {name: value}, "threads": int, "reasons": {name: str}, "thp_mode": str|None}``.
    """
    from pt2aws.env import cpu_info

    cpu = cpu or cpu_info()
    arm = platform.machine() in ("aarch64", "arm64") or cpu.get("graviton", False)
    try:
        vcpus = len(os.sched_getaffinity(0))
    except AttributeError:
        vcpus = os.cpu_count() or 1
    threads = max(1, vcpus // max(1, num_processes))
    env = {
        "LRU_CACHE_CAPACITY": "1024",
        "THP_MEM_ALLOC_ENABLE": "1",
        "OMP_NUM_THREADS": str(threads),
    }
    reasons = {
        "LRU_CACHE_CAPACITY": "oneDNN primitive cache: reuse kernels across input shapes",
        "THP_MEM_ALLOC_ENABLE": "transparent huge pages for large tensors: fewer TLB misses",
        "OMP_NUM_THREADS": f"{vcpus} vCPUs / {num_processes} process(es)",
    }
    if arm and cpu.get("bf16"):
        env["DNNL_DEFAULT_FPMATH_MODE"] = "BF16"
        reasons["DNNL_DEFAULT_FPMATH_MODE"] = "aarch64 with bf16 in /proc/cpuinfo: bf16 fast math"
    else:
        reasons["DNNL_DEFAULT_FPMATH_MODE"] = "not set: " + (
            "aarch64 without bf16 (Graviton2)"
            if arm
            else "x86 (the guide's setting is for Graviton)"
        )
    thp_mode = None
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as fh:
            thp_mode = fh.read().split("[")[1].split("]")[0]
    except (OSError, IndexError):
        pass
    return {"env": env, "threads": threads, "reasons": reasons, "thp_mode": thp_mode}


def apply_runtime_settings(num_processes: int = 1, *, override: bool = False) -> dict:
    """Apply :func:`runtime_settings` to this process and return what was done.

    Environment variables already set are kept unless ``override``; ``torch.set_num_threads``
    gets the thread count. ``THP_MEM_ALLOC_ENABLE`` and ``LRU_CACHE_CAPACITY`` are read when
    torch allocates / first builds oneDNN kernels, so they act fully only when set before the
    first inference (best: before ``import torch``, as the endpoint's environment does).

    Returns:
        :func:`runtime_settings` plus ``"applied": {name: value}`` (what this call set),
        ``"kept": {name: value}`` (pre-set values left alone) and ``"torch_threads"``.
    """
    settings = runtime_settings(num_processes)
    applied, kept = {}, {}
    for name, value in settings["env"].items():
        if name in os.environ and not override:
            kept[name] = os.environ[name]
        else:
            os.environ[name] = value
            applied[name] = value
    threads = int(os.environ.get("OMP_NUM_THREADS", settings["threads"]))
    torch.set_num_threads(threads)
    settings.update(
        applied=applied,
        kept=kept,
        torch_threads=torch.get_num_threads(),
    )
    for name, reason in settings["reasons"].items():
        logger.info("runtime: %s=%s (%s)", name, os.environ.get(name, "-"), reason)
    return settings


def classification_metrics(
    references: Sequence[int], predictions: Sequence[int], label_names: Sequence[str]
) -> dict:
    """Accuracy, macro F1, per-class F1 and the confusion matrix.

    Returns:
        ``{"accuracy", "f1", "f1_per_class": {name: f1}, "confusion_matrix": [[int]] (rows = true,
        columns = predicted, in label-id order), "num_examples"}``.
    """
    from sklearn.metrics import accuracy_score, confusion_matrix, f1_score

    labels = list(range(len(label_names)))
    per_class = f1_score(references, predictions, labels=labels, average=None, zero_division=0)
    return {
        "accuracy": float(accuracy_score(references, predictions)),
        "f1": float(
            f1_score(references, predictions, labels=labels, average="macro", zero_division=0)
        ),
        "f1_per_class": {name: float(v) for name, v in zip(label_names, per_class)},
        "confusion_matrix": confusion_matrix(references, predictions, labels=labels).tolist(),
        "num_examples": len(references),
    }
