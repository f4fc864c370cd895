"""Local, batched predictions from a saved model directory, its fast variants, and evaluation.

Example::

    predictor = Predictor("runs/x/train/model", variant="int8")
    predictor.predict(["What a great phone!", "Worst service ever."])
    # [{"label": "positive", "score": 0.97, "label_id": 1}, {"label": "negative", ...}]

Variants (``Predictor(variant=...)``) and where each runs: :mod:`pt2aws.inference.variants`.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import torch

from pt2aws.inference.batching import BatchedClassifier, length_sorted_batches
from pt2aws.inference.selection import choose_by_measurement
from pt2aws.inference.variants import VARIANTS, build_variant, load_fp32, variant_support
from pt2aws.modeling import model_max_tokens


class Predictor(BatchedClassifier):
    """Batched text classification with truncation, for CPU or GPU, in one of :data:`VARIANTS`:
    a :class:`~pt2aws.inference.batching.BatchedClassifier` loaded from a folder, with labels
    and long-text windows.

    Args:
        model_dir: a directory written by ``save_pretrained`` (model and tokenizer).
        device: ``"cpu"``, ``"cuda"`` or ``None`` (CUDA when available).
        batch_size: texts per forward pass (texts are sorted by length first, so each batch
            pads little).
        max_length: tokens per text; default: the model's real limit (:func:`model_max_tokens`:
            512 for RoBERTa, whose config lists 514 positions, 2 of them a padding offset).
        variant: one of :data:`~pt2aws.inference.variants.VARIANTS`, or ``"auto"``: the fastest
            variant here that keeps 99% label agreement with fp32 on ``auto_texts``, chosen by
            measurement (:func:`pt2aws.inference.selection.choose_by_measurement`, which prints
            its table); every candidate is built from the one fp32 model loaded here. The ONNX
            Runtime variants export the model into ``model_dir/onnx/`` first if it has no
            up-to-date export (:func:`pt2aws.inference.ort.onnx_files`).
        auto_texts: a sample of validation texts for ``variant="auto"`` (128 is plenty).
        long_texts: ``"truncate"`` (read the first ``max_length`` tokens) or ``"windows"``
            (texts over ``max_length`` read as windows overlapping by ``max_length // 4``
            tokens, whose probabilities are averaged weighted by tokens:
            :mod:`pt2aws.data.windows`; the serving handler's ``PT2AWS_LONG_TEXTS=windows``).

    Raises:
        ValueError: unknown variant, ``int8`` or ONNX Runtime on a GPU, ``bf16`` on a GPU
            without bf16 (on a CPU without native bf16 it runs emulated, with a warning),
            ``auto`` without ``auto_texts``, or ``long_texts`` other than ``truncate``/``windows``.
    """

    def __init__(
        self,
        model_dir: str,
        *,
        device: str | None = None,
        batch_size: int = 32,
        max_length: int | None = None,
        variant: str = "eager",
        auto_texts: Sequence[str] | None = None,
        long_texts: str = "truncate",
    ):
        if variant not in (*VARIANTS, "auto"):
            raise ValueError(f"variant {variant!r}: choose one of {', '.join(VARIANTS)} or auto")
        if batch_size < 1:
            raise ValueError(f"batch_size={batch_size}: need at least 1")
        if long_texts not in ("truncate", "windows"):
            raise ValueError(f"long_texts={long_texts!r}: use truncate or windows")
        if variant == "auto" and not auto_texts:
            raise ValueError("variant auto chooses by measurement: pass auto_texts=[...]")
        self.long_texts = long_texts
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.variant_reason = "requested"
        if variant != "auto":
            native, why = variant_support(variant, self.device)
            if not native and variant == "bf16" and self.device.type == "cpu":
                # torch still runs bf16 on any x86/arm CPU, through slower conversions
                warnings.warn(
                    f"variant bf16: {why}; bf16 is emulated and likely slow", stacklevel=2
                )
                self.variant_reason = f"requested; emulated ({why})"
            elif not native:
                raise ValueError(f"variant {variant}: {why}")
        model, tokenizer = load_fp32(model_dir)
        self.config = model.config
        self.label_names = [model.config.id2label[i] for i in range(model.config.num_labels)]
        # module: the uncompiled one (save or inspect this); model: what predictions call
        if variant == "auto":
            chosen = choose_by_measurement(
                model, tokenizer, auto_texts, model_dir=model_dir, device=self.device
            )
            variant, self.variant_reason = chosen.choice.variant, chosen.choice.reason
            self.module, call = chosen.module, chosen.model
        else:
            self.module, call = build_variant(
                model, variant, self.device, model_dir=model_dir, tokenizer=tokenizer
            )
        super().__init__(
            call,
            tokenizer,
            variant=variant,
            max_length=max_length or model_max_tokens(model.config, tokenizer),
            num_labels=model.config.num_labels,
            batch_size=batch_size,
            device=self.device,
        )

    def predict_proba(self, texts: Sequence[str]) -> torch.Tensor:
        """Class probabilities, float32 tensor of shape ``(len(texts), num_labels)``, input order.

        Texts are sorted by length before batching so each batch pads little.
        """
        if isinstance(texts, str):
            raise TypeError("predict_proba takes a list of texts; wrap a single text in [ ]")
        if self.long_texts == "windows":
            return self._windowed_proba(texts)
        return super().predict_proba(texts)

    @torch.inference_mode()
    def _windowed_proba(self, texts: Sequence[str]) -> torch.Tensor:
        """Probabilities from overlapping windows (texts that fit: one window, as truncation)."""
        from pt2aws.data import windows

        ids = self.tokenizer(list(texts), add_special_tokens=False, truncation=False)["input_ids"]
        prefix, suffix = windows.special_tokens(self.tokenizer)
        spans, owners, weights = windows.plan_windows(
            ids,
            max_tokens=self.max_length,
            overlap=self.max_length // 4,
            prefix=prefix,
            suffix=suffix,
        )
        per_window = torch.empty(len(spans), len(self.label_names))
        for idx in length_sorted_batches(spans, self.batch_size):
            batch = self.tokenizer.pad({"input_ids": [spans[i] for i in idx]}, return_tensors="pt")
            per_window[idx] = self.model(**batch.to(self.device)).logits.float().softmax(-1).cpu()
        combined = windows.combine_by_text(per_window.tolist(), owners, len(texts), weights=weights)
        return torch.tensor(combined, dtype=torch.float32)

    def predict(self, texts: Sequence[str]) -> list[dict]:
        """``[{"label": str, "score": float, "label_id": int}, ...]``, one per text, in order."""
        probs = self.predict_proba(texts)
        scores, ids = probs.max(-1)
        return [
            {"label": self.label_names[int(i)], "score": float(s), "label_id": int(i)}
            for s, i in zip(scores, ids)
        ]
