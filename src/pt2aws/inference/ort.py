"""ONNX Runtime variants (``ort-fp32``, ``ort-int8``): export, quantize, serve.

The fine-tuned model is exported once, from the loaded fp32 model, into ``<model>/onnx/``
(:func:`onnx_files`), which :func:`pt2aws.aws.artifact.package` then carries in ``model.tar.gz``:

1. ``torch.onnx.export`` with the TorchScript exporter (``dynamo=False``: it needs no network and
   no ``onnxscript``), dynamic batch and sequence axes, inputs named as the tokenizer's;
2. ONNX Runtime's transformer optimizer (``onnxruntime.transformers.optimizer``, ``model_type
   "bert"``, also right for RoBERTa) fuses LayerNorm with the residual adds and the GELU (the
   model's SDPA attention is exported as plain operators: tracing the "eager" attention instead
   lets it fuse attention too, at the same speed here and with a few more labels changed in
   int8, 8 against 4 of 512 test texts: ``benchmarks/README.md``)
   (portable fusions only: ``opt_level=1``, so the file runs on x86 and on Graviton alike; the
   machine-specific optimizations happen when a session loads it, ``ORT_ENABLE_ALL``);
   ``model.onnx`` (fp32);
3. ``onnxruntime.quantization.quantize_dynamic``: int8 weights per output channel, activations
   quantized per tensor at run time (uint8); the classification head (:data:`INT8_FP32_NODES`)
   stays fp32, as in the torchao variant; ``model_int8.onnx``.

``export.json`` beside them records the weights' SHA-256, so a retrained model is exported
again instead of served from stale files. Serving needs only ``onnxruntime`` (imported when an
ONNX Runtime variant is asked for); exporting needs ``onnx`` as well.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

logger = logging.getLogger(__name__)

#: Variant -> file name in the model's :data:`ONNX_DIR`.
ONNX_FILES = {"ort-fp32": "model.onnx", "ort-int8": "model_int8.onnx"}
#: The folder of the model (and of ``model.tar.gz``) that holds them.
ONNX_DIR = "onnx"
#: What :func:`onnx_files` records about an export (weights hash, versions, options).
EXPORT_RECORD = "export.json"
OPSET = 18
#: Parts of the names of ONNX nodes ``ort-int8`` keeps fp32: the classification head, as
#: :data:`pt2aws.inference.variants.INT8_FP32_LAYERS` does for torchao.
INT8_FP32_NODES = ("classifier",)


def onnxruntime_missing() -> str | None:
    """Why ONNX Runtime variants cannot run here, or ``None`` when ``onnxruntime`` imports."""
    import importlib.util

    if importlib.util.find_spec("onnxruntime") is None:
        return "onnxruntime is not installed (pip install onnxruntime; the serving image has it)"
    return None


def weights_digest(model_dir: str | Path) -> str:
    """SHA-256 of the model's weight files (``*.safetensors``, ``*.bin``), hex."""
    digest = hashlib.sha256()
    for path in sorted(Path(model_dir).glob("*")):
        if path.suffix in (".safetensors", ".bin") and path.is_file():
            with open(path, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
    return digest.hexdigest()


def onnx_files(
    model_dir: str | Path, model: torch.nn.Module | None = None, tokenizer=None
) -> dict[str, Path]:
    """``{"ort-fp32": path, "ort-int8": path}`` in ``model_dir/onnx``, exported first when
    missing or made from other weights (and ``model`` and ``tokenizer`` are given).

    Args:
        model_dir: the saved model folder (``save_pretrained``) or an extracted archive.
        model: the loaded fp32 model of ``model_dir`` (eval mode, CPU), to export from; it is
            not modified.
        tokenizer: its tokenizer (input names and a sample input).

    Returns:
        The two files' paths.

    Raises:
        FileNotFoundError: the files are missing or stale and no ``model``/``tokenizer`` was
            given to export them (on an endpoint: package the archive with the ONNX Runtime
            variants recorded, :func:`pt2aws.inference.selection.variant_report`).
    """
    folder = Path(model_dir) / ONNX_DIR
    files = {variant: folder / name for variant, name in ONNX_FILES.items()}
    record_path = folder / EXPORT_RECORD
    if all(p.is_file() for p in files.values()) and record_path.is_file():
        record = json.loads(record_path.read_text())
        if record.get("weights_sha256") == weights_digest(model_dir):
            return files
        why = f"{folder} was exported from other weights"
    else:
        why = f"{folder} has no {' and '.join(ONNX_FILES.values())}"
    if model is None or tokenizer is None:
        raise FileNotFoundError(
            f"{why}: export them where the model is packaged (variant_report with ort-fp32/"
            "ort-int8, which pt2aws.aws.artifact.package then ships in onnx/)"
        )
    logger.info("exporting the ONNX Runtime variants to %s (%s)", folder, why)
    export_variants(model, tokenizer, folder, weights_sha256=weights_digest(model_dir))
    return files


def export_variants(
    model: torch.nn.Module, tokenizer, folder: str | Path, *, weights_sha256: str = ""
) -> dict:
    """Export ``model`` to ``folder``: ``model.onnx`` (fp32, fused) and ``model_int8.onnx``.

    Returns:
        The record written to ``folder/export.json``.
    """
    import onnx
    import onnxruntime

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    raw = folder / "model.raw.onnx"
    fp32, int8 = folder / ONNX_FILES["ort-fp32"], folder / ONNX_FILES["ort-int8"]
    with _quiet():
        export_onnx(model, tokenizer, raw)
        fused = optimize_for_transformers(raw, fp32, model.config)
        raw.unlink()
        excluded = quantize_int8(fp32, int8)
    record = {
        "weights_sha256": weights_sha256,
        "exporter": f"torch.onnx.export (TorchScript, dynamo=False), torch {torch.__version__}",
        "opset": OPSET,
        "onnx": onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
        "fused": fused,
        "int8": {
            "method": "onnxruntime.quantization.quantize_dynamic",
            "weights": "int8 per output channel",
            "activations": "uint8 per tensor, at run time",
            "fp32_nodes": excluded,
        },
    }
    (folder / EXPORT_RECORD).write_text(json.dumps(record, indent=1))
    return record


@contextlib.contextmanager
def _quiet():
    """The exporter's tracer warnings and the quantizer's advice (root-logger warnings) are
    about graphs in general, not this one: a notebook would print dozens of lines."""
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(previous)


def export_onnx(model: torch.nn.Module, tokenizer, path: str | Path) -> Path:
    """``model`` (fp32) to ONNX with output ``logits`` and the tokenizer's inputs, dynamic batch
    and sequence axes (TorchScript exporter, opset :data:`OPSET`).

    Returns:
        ``path``.
    """
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
    with torch.inference_mode():
        torch.onnx.export(
            Logits(model).eval(),
            tuple(sample[name] for name in names),
            str(path),
            input_names=names,
            output_names=["logits"],
            dynamic_axes={**axes, "logits": {0: "batch"}},
            opset_version=OPSET,
            dynamo=False,
        )
    return Path(path)


def optimize_for_transformers(source: Path, target: Path, config) -> list[str]:
    """ONNX Runtime's transformer fusions (portable level) of ``source`` into ``target``.

    Returns:
        The fused operator types, e.g. ``["Attention", "SkipLayerNormalization", ...]``
        (empty when the optimizer did not recognise the graph; ``target`` is then ``source``'s
        graph unchanged).
    """
    from onnxruntime.transformers import optimizer

    optimized = optimizer.optimize_model(
        str(source),
        model_type="bert",
        num_heads=int(config.num_attention_heads),
        hidden_size=int(config.hidden_size),
        opt_level=1,
    )
    fused = sorted({n.op_type for n in optimized.model.graph.node if n.domain == "com.microsoft"})
    optimized.save_model_to_file(str(target))
    return fused


def quantize_int8(fp32_path: Path, path: Path, keep_fp32=INT8_FP32_NODES) -> list[str]:
    """Dynamic int8 quantization of ``fp32_path`` into ``path`` (per-channel int8 weights),
    keeping nodes whose names contain one of ``keep_fp32`` in fp32 (exported names follow the
    module path, e.g. ``/inner/classifier/dense/Gemm``).

    Returns:
        The names of the nodes kept fp32.
    """
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    graph = onnx.load(str(fp32_path), load_external_data=False).graph
    excluded = []
    for node in graph.node:
        if any(k in node.name for k in keep_fp32):
            excluded.append(node.name)
            if node.op_type == "Gemm":  # quantize_dynamic turns a Gemm into <name>_MatMul + Add
                excluded.append(f"{node.name}_MatMul")
    quantize_dynamic(
        str(fp32_path),
        str(path),
        per_channel=True,
        weight_type=QuantType.QInt8,
        nodes_to_exclude=excluded,
        # the fused com.microsoft operators defeat ONNX shape inference: their outputs are fp32
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
    return excluded


class OrtClassifier:
    """An ONNX Runtime session called like a ``transformers`` classifier.

    ``model(**encoding).logits`` (a float32 torch tensor) for the tokenizer's encodings (torch
    tensors or numpy arrays), and ``model.config`` (the model's config: labels), so the
    predictor and the serving handler call it as they call the PyTorch variants.

    Args:
        path: a file from :func:`onnx_files`.
        config: the model's ``transformers`` config.
        threads: intra-op threads (default ``torch.get_num_threads()``: what the PyTorch
            variants use, set from ``OMP_NUM_THREADS`` by the runtime settings).
    """

    def __init__(self, path: str | Path, config, *, threads: int | None = None):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or torch.get_num_threads()
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.config = config
        self.path = Path(path)

    def __call__(self, **encoding) -> SimpleNamespace:
        ids = np.asarray(encoding["input_ids"], dtype=np.int64)
        feeds = {}
        for name in self.input_names:
            value = encoding.get(name)
            # token_type_ids: the tokenizer may leave them out (e.g. when padding ids for
            # windows); zeros are what the model uses then
            feeds[name] = np.zeros_like(ids) if value is None else np.asarray(value, np.int64)
        (logits,) = self.session.run(["logits"], feeds)
        return SimpleNamespace(logits=torch.from_numpy(logits))
