"""ONNX Runtime variants (``ort-fp32``, ``ort-int8``), exported once into ``<model>/onnx/``:
``torch.onnx.export`` (TorchScript, dynamic axes), the transformer optimizer's portable fusions
(``opt_level=1``, x86 and Graviton): ``model.onnx``; ``quantize_dynamic`` (int8 weights per
channel, the head fp32): ``model_int8.onnx``. ``export.json`` records the weights' SHA-256."""

from __future__ import annotations

import hashlib
import json
import logging
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

logger = logging.getLogger(__name__)

ONNX_FILES = {"ort-fp32": "model.onnx", "ort-int8": "model_int8.onnx"}
ONNX_DIR = "onnx"
EXPORT_RECORD = "export.json"
OPSET = 18
#: ONNX node names containing these stay fp32 in ``ort-int8`` (as ``INT8_FP32_LAYERS``).
INT8_FP32_NODES = ("classifier",)


def weights_digest(model_dir: str | Path) -> str:
    """SHA-256 (hex) of the model's ``*.safetensors`` and ``*.bin`` files."""
    digest = hashlib.sha256()
    for path in sorted(Path(model_dir).glob("*")):
        if path.suffix in (".safetensors", ".bin") and path.is_file():
            with open(path, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
    return digest.hexdigest()


def onnx_files(model_dir: str | Path, model=None, tokenizer=None) -> dict[str, Path]:
    """``{"ort-fp32": path, "ort-int8": path}`` in ``model_dir/onnx``, exported from ``model``
    and ``tokenizer`` first when missing or made from other weights; FileNotFoundError if
    missing or stale with nothing to export from."""
    folder = Path(model_dir) / ONNX_DIR
    files = {variant: folder / name for variant, name in ONNX_FILES.items()}
    record, digest = folder / EXPORT_RECORD, weights_digest(model_dir)
    if all(p.is_file() for p in files.values()) and record.is_file():
        if json.loads(record.read_text()).get("weights_sha256") == digest:
            return files
        why = f"{folder} was exported from other weights"
    else:
        why = f"{folder} has no {' and '.join(ONNX_FILES.values())}"
    if model is None or tokenizer is None:
        raise FileNotFoundError(f"{why}: export them where the model is packaged (variant_report "
                                "with ort-fp32/ort-int8; package ships them in onnx/)")  # fmt: skip
    logger.info("exporting the ONNX Runtime variants to %s (%s)", folder, why)
    export_variants(model, tokenizer, folder, weights_sha256=digest)
    return files


def export_variants(model, tokenizer, folder: Path, *, weights_sha256: str) -> None:
    """``model`` as ``folder/model.onnx`` and ``model_int8.onnx``, recorded in ``export.json``;
    the exporter's tracer warnings and the quantizer's advice (about graphs in general) hidden."""
    import onnx
    import onnxruntime
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers import optimizer

    folder.mkdir(parents=True, exist_ok=True)
    raw = folder / "model.raw.onnx"
    fp32, int8 = (folder / ONNX_FILES[v] for v in ("ort-fp32", "ort-int8"))
    names = list(tokenizer.model_input_names)
    sample = tokenizer(
        ["an example", "a second, longer example"], padding=True, return_tensors="pt"
    )

    class Logits(torch.nn.Module):  # positional inputs in ``names`` order -> logits only
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *inputs):
            return self.inner(**dict(zip(names, inputs))).logits

    axes = {name: {0: "batch", 1: "sequence"} for name in names}
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings(action="ignore"), torch.inference_mode():
            torch.onnx.export(Logits(model).eval(), tuple(sample[n] for n in names), str(raw),
                              input_names=names, output_names=["logits"],
                              dynamic_axes={**axes, "logits": {0: "batch"}}, opset_version=OPSET,
                              dynamo=False)  # fmt: skip
            optimized = optimizer.optimize_model(str(raw), model_type="bert", opt_level=1,
                                                 num_heads=int(model.config.num_attention_heads),
                                                 hidden_size=int(model.config.hidden_size))  # fmt: skip
            fused = sorted(
                {n.op_type for n in optimized.model.graph.node if n.domain == "com.microsoft"}
            )
            optimized.save_model_to_file(str(fp32))
            raw.unlink()
            kept = []
            for node in onnx.load(str(fp32), load_external_data=False).graph.node:
                if any(k in node.name for k in INT8_FP32_NODES):
                    kept.append(node.name)
                    if node.op_type == "Gemm":  # quantize_dynamic: a Gemm -> <name>_MatMul + Add
                        kept.append(f"{node.name}_MatMul")
            # the fused com.microsoft operators defeat ONNX shape inference: their outputs are fp32
            quantize_dynamic(str(fp32), str(int8), per_channel=True, weight_type=QuantType.QInt8,
                             nodes_to_exclude=kept,
                             extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})  # fmt: skip
    finally:
        logging.disable(previous)
    record = {
        "weights_sha256": weights_sha256,
        "exporter": f"torch.onnx.export (TorchScript, dynamo=False), torch {torch.__version__}",
        "opset": OPSET,
        "onnx": onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
        "fused": fused,
        "int8": {
            "method": "onnxruntime.quantization.quantize_dynamic: int8 weights per output "
            "channel, uint8 activations per tensor at run time",
            "fp32_nodes": kept,
        },
    }
    (folder / EXPORT_RECORD).write_text(json.dumps(record, indent=1))


class OrtClassifier:
    """An ONNX Runtime session (a file from :func:`onnx_files`) called like a ``transformers``
    classifier: ``model(**encoding).logits`` (float32 tensor), ``model.config``; torch's threads."""

    def __init__(self, path: str | Path, config):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = torch.get_num_threads()
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.config, self.path = config, Path(path)

    def __call__(self, **encoding) -> SimpleNamespace:
        ids = np.asarray(encoding["input_ids"], dtype=np.int64)
        # an input the tokenizer left out (token_type_ids) is zeros, as the model defaults it
        given = {k: v for k, v in encoding.items() if v is not None}
        zeros = np.zeros_like(ids)
        feeds = {n: np.asarray(given.get(n, zeros), np.int64) for n in self.input_names}
        (logits,) = self.session.run(["logits"], feeds)
        return SimpleNamespace(logits=torch.from_numpy(logits))
