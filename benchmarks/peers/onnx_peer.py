"""ONNX Runtime: the peer a user would pick to serve this model fast on a CPU.

Rows of ``benchmarks/inference_speed.py``, measured on the same texts with the same agreement
rule as the predictor variants:

* ``ort-fp32``: the fp32 model exported by :func:`export_onnx` (``torch.onnx.export``, dynamic
  batch and sequence axes), run by ONNX Runtime's CPU execution provider with all its graph
  optimizations (``ORT_ENABLE_ALL``: attention and GELU fusion, constant folding...);
* ``ort-int8``: the same graph after :func:`quantize_onnx_int8`
  (``onnxruntime.quantization.quantize_dynamic``: int8 weights per output channel, activations
  quantized per tensor at run time).

Needs ``onnxruntime`` (and ``onnx``, ``onnxscript`` for the export), pinned in ``pyproject.toml``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np


def export_onnx(model_dir: str | Path, path: str | Path, *, opset: int = 18) -> Path:
    """Export the fp32 classifier in ``model_dir`` to ONNX (``logits`` from the tokenizer's
    inputs), with dynamic batch and sequence axes.

    Args:
        model_dir: a saved model directory (``save_pretrained``).
        path: the ``.onnx`` file to write (its folder is created).
        opset: ONNX opset version.

    Returns:
        ``path``.
    """
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    names = list(tokenizer.model_input_names)
    sample = tokenizer(
        ["an example", "a second, longer example"], padding=True, return_tensors="pt"
    )

    class Logits(torch.nn.Module):  # positional inputs in ``names`` order -> logits only
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *inputs):
            return self.model(**dict(zip(names, inputs))).logits

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    axes = {name: {0: "batch", 1: "sequence"} for name in names}
    with torch.inference_mode():
        torch.onnx.export(
            Logits(),
            tuple(sample[name] for name in names),
            str(path),
            input_names=names,
            output_names=["logits"],
            dynamic_axes={**axes, "logits": {0: "batch"}},
            opset_version=opset,
            dynamo=False,
        )
    return path


def quantize_onnx_int8(fp32_path: str | Path, path: str | Path) -> Path:
    """Dynamic int8 quantization of an ONNX model (ONNX Runtime's ``quantize_dynamic``: int8
    weights per output channel, activations per tensor at run time).

    Returns:
        ``path``.
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(fp32_path, path, per_channel=True, weight_type=QuantType.QInt8)
    return Path(path)


class OrtPredictor:
    """Batched predictions with ONNX Runtime, with the predictor interface of
    :mod:`pt2aws.inference.measure` (texts sorted by length, truncated like the Predictor).

    Args:
        onnx_path: a model from :func:`export_onnx` or :func:`quantize_onnx_int8`.
        model_dir: the model directory (its tokenizer and labels).
        threads: ONNX Runtime intra-op threads (default: ``torch.get_num_threads()``, so it
            uses what the torch rows use).
        batch_size: texts per run.
        max_length: tokens per text (default: as :class:`~pt2aws.inference.predictor.Predictor`).
    """

    def __init__(
        self,
        onnx_path: str | Path,
        model_dir: str | Path,
        *,
        threads: int | None = None,
        batch_size: int = 32,
        max_length: int | None = None,
    ):
        import onnxruntime as ort
        import torch
        from transformers import AutoConfig, AutoTokenizer

        from pt2aws.modeling import model_max_tokens

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or torch.get_num_threads()
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(
            str(onnx_path), options, providers=["CPUExecutionProvider"]
        )
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        config = AutoConfig.from_pretrained(model_dir)
        self.max_length = max_length or model_max_tokens(config, self.tokenizer)
        self.num_labels = config.num_labels
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.batch_size = batch_size

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """Class probabilities, float32 array of shape ``(len(texts), num_labels)``, input order."""
        from pt2aws.inference.predictor import encoded_batches

        probs = np.empty((len(texts), self.num_labels), dtype=np.float32)
        batches = encoded_batches(self.tokenizer, texts, self.batch_size, self.max_length, "np")
        for idx, enc in batches:
            (logits,) = self.session.run(
                ["logits"], {name: enc[name].astype(np.int64) for name in self.input_names}
            )
            e = np.exp(logits - logits.max(-1, keepdims=True))
            probs[idx] = e / e.sum(-1, keepdims=True)
        return probs

    def predict_ids(self, texts: Sequence[str]) -> list[int]:
        """Predicted label ids, one per text, in order."""
        return self.predict_proba(texts).argmax(-1).tolist()
