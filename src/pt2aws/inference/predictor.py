"""Local, batched predictions from a saved model folder, in any variant or ``auto``.

predictor = Predictor("runs/x/train/model", variant="int8")
predictor.predict(["What a great phone!", "Worst service ever."])
# [{"label": "positive", "score": 0.97, "label_id": 1}, {"label": "negative", ...}]
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import torch

from pt2aws.inference.selection import choose_by_measurement
from pt2aws.inference.variants import Classifier, build_variant, load_fp32, require_variant


class Predictor(Classifier):
    """A :class:`~pt2aws.inference.variants.Classifier` loaded from ``model_dir`` on ``device``
    (None: CUDA when available), ``batch_size`` texts a pass, up to ``max_length`` tokens (the
    model's limit), as ``variant`` (:data:`~pt2aws.inference.variants.VARIANTS`, or ``"auto"``:
    the fastest keeping 99% agreement on ``auto_texts``, measured; a slow one warns);
    ``long_texts``: ``"truncate"`` or ``"windows"``. ValueError: a variant this device cannot
    run, ``auto`` without texts, a bad ``long_texts`` or ``batch_size``."""

    def __init__(self, model_dir: str, *, device: str | None = None, batch_size: int = 32,
                 max_length: int | None = None, variant: str = "eager",
                 auto_texts: Sequence[str] | None = None, long_texts: str = "truncate"):  # fmt: skip
        if variant == "auto" and not auto_texts:
            raise ValueError("variant auto chooses by measurement: pass auto_texts=[...]")
        device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        slow = None if variant == "auto" else require_variant(variant, device)
        if slow:
            warnings.warn(f"variant {variant}: {slow}; likely slow here", stacklevel=2)
        self.variant_reason = f"requested; {slow}" if slow else "requested"
        model, tokenizer = load_fp32(model_dir)
        if variant == "auto":
            choice, kept = choose_by_measurement(model, tokenizer, auto_texts,
                                                 model_dir=model_dir, device=device)  # fmt: skip
            variant, self.variant_reason = choice.variant, choice.reason
            module, call = kept.module, kept.model
        else:
            module, call = build_variant(model, variant, device, model_dir=model_dir,
                                         tokenizer=tokenizer)  # fmt: skip
        super().__init__(call, tokenizer, model.config, variant=variant, module=module,
                         max_length=max_length, batch_size=batch_size, device=device,
                         long_texts=long_texts)  # fmt: skip
