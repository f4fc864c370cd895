"""ONNX Runtime variants (``ort-fp32``, ``ort-int8``), exported once into ``<model>/onnx/``:
``torch.onnx.export`` (TorchScript, dynamic axes), the transformer optimizer's portable fusions
(``opt_level=1``, x86 and Graviton; levels 2 and 99 measured no faster, benchmarks/README.md):
``model.onnx``; ``quantize_dynamic`` (weights per channel, the head fp32) with the
:data:`INT8_SETTINGS` measured best for this CPU's int8 kernels (:func:`choose_int8`):
``model_int8.onnx``. ``export.json`` records the weights' SHA-256 and the choice."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import statistics
import time
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
#: ONNX node names matching these (regular expressions) stay fp32 in ``ort-int8`` (as
#: ``INT8_FP32_LAYERS``).
INT8_FP32_NODES = ("classifier",)
#: The feed-forward blocks' output projections (BERT and RoBERTa ``layer.N/output/dense``,
#: DistilBERT ``ffn/lin2``): per node, the most sensitive to int8 (benchmarks/README.md).
FFN_OUTPUT = r"layer\.\d+/output/dense|ffn/lin2"
#: ``quantize_dynamic`` settings :func:`choose_int8` weighs, the default first: int8 weights (u8 x
#: s8 products: on x86 without VNNI their int16 pair sums saturate, onnxruntime's quantization
#: guide), 7-bit weights (``reduce_range``: "may improve the accuracy ... on non-VNNI machine"),
#: uint8 weights (u8 x u8 products), int8 weights with :data:`FFN_OUTPUT` kept fp32.
INT8_SETTINGS = {
    "int8 weights": {},
    "7-bit int8 weights (reduce_range)": {"reduce_range": True},
    "uint8 weights": {"weight_type": "QUInt8"},
    "int8 weights (FFN output projections fp32)": {"fp32_nodes": (FFN_OUTPUT,)},
}
#: Validation texts the settings are measured on, timed in this many interleaved passes.
PROBE_TEXTS, PROBE_PASSES = 128, 3
#: :func:`choose_int8`: a setting must be ``MIN_SPEEDUP`` times ``ort-fp32``'s speed (int8 pays
#: for its error in speed); of those, the most accurate by mean |delta p| against fp32 (labels
#: alone, a handful of flips on 128 texts, cannot rank settings), or a faster one within
#: ``ACCURACY_GAIN`` of its mean |delta p|.
MIN_SPEEDUP, ACCURACY_GAIN = 1.25, 1.25


def cpu_class() -> str:
    """The int8 dot products ONNX Runtime's kernels use here (from CPUID: it ignores the caps of
    :mod:`pt2aws.env.cpu`), e.g. ``"x86_64 AVX2 without VNNI"``."""
    from pt2aws import env

    features = env.cpu_features()
    names = {"amx_int8": "AMX-INT8", "avx512_vnni": "AVX512-VNNI", "avx_vnni": "AVX-VNNI",
             "avx512bw": "AVX-512 without VNNI", "avx2": "AVX2 without VNNI", "i8mm": "I8MM",
             "asimddp": "SDOT"}  # fmt: skip
    found = next((name for flag, name in names.items() if flag in features.hardware), "no SIMD")
    return f"{features.arch} {found}"


def choose_int8(figures: dict[str, dict]) -> tuple[str, str]:
    """``(setting, why)``: the best of :data:`INT8_SETTINGS` by ``figures`` (``{setting or
    "ort-fp32": {"mean_abs_dp", "flips", "texts", "samples_per_s"}}`` measured side by side), by
    the rule of :data:`MIN_SPEEDUP` (none that fast: the default)."""
    fp32 = figures["ort-fp32"]["samples_per_s"]
    settings = {name: f for name, f in figures.items() if name != "ort-fp32"}
    fast = {n: f for n, f in settings.items() if f["samples_per_s"] >= MIN_SPEEDUP * fp32}
    floor = min((f["mean_abs_dp"] for f in fast.values()), default=0)
    close = [n for n, f in fast.items() if f["mean_abs_dp"] <= ACCURACY_GAIN * floor]
    best = max(close, key=lambda n: fast[n]["samples_per_s"]) if close else next(iter(settings))
    said = [f"{name}: mean |dp| {f['mean_abs_dp']:.4f} ({f['flips']} of {f['texts']} labels "
            f"flipped), {f['samples_per_s'] / fp32:.2f}x ort-fp32's speed"
            for name, f in settings.items()]  # fmt: skip
    rule = (f"the fastest of those >= {MIN_SPEEDUP}x ort-fp32's speed within {ACCURACY_GAIN}x "
            "of the lowest mean |dp|" if fast else f"none >= {MIN_SPEEDUP}x ort-fp32's speed")  # fmt: skip
    return best, f"{best}, measured on {cpu_class()} ({rule}): " + "; ".join(said)


def weights_digest(model_dir: str | Path) -> str:
    """SHA-256 (hex) of the model's ``*.safetensors`` and ``*.bin`` files."""
    digest = hashlib.sha256()
    for path in sorted(Path(model_dir).glob("*")):
        if path.suffix in (".safetensors", ".bin") and path.is_file():
            with open(path, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
    return digest.hexdigest()


def onnx_files(model_dir: str | Path, model=None, tokenizer=None, texts=None) -> dict[str, Path]:
    """``{"ort-fp32": path, "ort-int8": path}`` in ``model_dir/onnx``, exported from ``model``
    and ``tokenizer`` first when missing or made from other weights (``texts``: validation texts
    to choose the int8 settings on); FileNotFoundError if missing or stale with nothing to
    export from."""
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
    export_variants(model, tokenizer, folder, weights_sha256=digest, texts=texts)
    return files


def export_variants(model, tokenizer, folder: Path, *, weights_sha256: str, texts=None) -> None:
    """``model`` as ``folder/model.onnx`` and ``model_int8.onnx``, recorded in ``export.json``:
    int8 with each of :data:`INT8_SETTINGS`, the one :func:`choose_int8` picks on the first
    :data:`PROBE_TEXTS` of ``texts`` kept (without texts: the default); the exporter's tracer
    warnings and the quantizer's advice (about graphs in general) hidden."""
    import onnx
    import onnxruntime
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
            texts = [t for t in texts or [] if t.strip()][:PROBE_TEXTS]
            settings = list(INT8_SETTINGS)[: len(INT8_SETTINGS) if texts else 1]
            paths = {name: folder / f"int8.{i}.onnx" for i, name in enumerate(settings)}
            kept = {name: quantize(fp32, path, name) for name, path in paths.items()}
    finally:
        logging.disable(previous)
    figures = _measure_int8(paths, fp32, model.config, tokenizer, texts) if texts else {}
    chosen, why = choose_int8(figures) if figures else (settings[0], "not measured (no texts)")
    paths.pop(chosen).replace(int8)
    for other in paths.values():
        other.unlink()
    record = {
        "weights_sha256": weights_sha256,
        "exporter": f"torch.onnx.export (TorchScript, dynamo=False), torch {torch.__version__}",
        "opset": OPSET,
        "onnx": onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
        "fused": fused,
        "int8": {
            "method": f"onnxruntime.quantization.quantize_dynamic: {chosen} per output "
            "channel, uint8 activations per tensor at run time",
            "settings": chosen,
            "why": why,
            "measured": figures,
            "fp32_nodes": kept[chosen],
        },
    }
    (folder / EXPORT_RECORD).write_text(json.dumps(record, indent=1))


def quantize(fp32: Path, path: Path, setting: str, also: tuple[str, ...] = ()) -> list[str]:
    """``fp32`` (an optimized ``model.onnx``) as int8 at ``path`` with :data:`INT8_SETTINGS`'s
    ``setting``, nodes matching :data:`INT8_FP32_NODES`, the setting's ``fp32_nodes`` and
    ``also`` kept fp32; returns the names of the nodes kept."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    options, kept = INT8_SETTINGS[setting], []
    fp32_nodes = re.compile("|".join([*INT8_FP32_NODES, *options.get("fp32_nodes", ()), *also]))
    for node in onnx.load(str(fp32), load_external_data=False).graph.node:
        if fp32_nodes.search(node.name):
            kept.append(node.name)
            if node.op_type == "Gemm":  # quantize_dynamic: a Gemm -> <name>_MatMul + Add
                kept.append(f"{node.name}_MatMul")
    # the fused com.microsoft operators defeat ONNX shape inference: their outputs are fp32
    quantize_dynamic(str(fp32), str(path), per_channel=True, nodes_to_exclude=kept,
                     weight_type=getattr(QuantType, options.get("weight_type", "QInt8")),
                     reduce_range=options.get("reduce_range", False),
                     extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})  # fmt: skip
    return kept


def _measure_int8(paths: dict, fp32: Path, config, tokenizer, texts) -> dict[str, dict]:
    """Each int8 file's ``mean_abs_dp`` (largest class probability change) and label ``flips``
    against the fp32 file (``"ort-fp32"``) on ``texts``, and every file's ``samples_per_s`` in
    :data:`PROBE_PASSES` interleaved passes."""
    from pt2aws.inference.variants import Classifier

    def classifier(path):
        return Classifier(OrtClassifier(path, config), tokenizer, config)

    runs = {name: classifier(path) for name, path in {"ort-fp32": fp32, **paths}.items()}
    probs, seconds = {}, {name: [] for name in runs}
    for k in range(PROBE_PASSES):
        for name in list(runs)[:: 1 if k % 2 == 0 else -1]:
            start = time.perf_counter()
            probs[name] = runs[name].predict_proba(texts)
            seconds[name].append(time.perf_counter() - start)
    reference = probs["ort-fp32"]
    return {
        name: {
            "mean_abs_dp": round(float((probs[name] - reference).abs().amax(-1).mean()), 6),
            "flips": int((probs[name].argmax(-1) != reference.argmax(-1)).sum()),
            "texts": len(texts),
            "samples_per_s": round(len(texts) / statistics.median(seconds[name]), 1),
        }
        for name in runs
    }


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
        record = self.path.with_name(EXPORT_RECORD)  # an ort-int8 file: how it was made
        if self.path.name == ONNX_FILES["ort-int8"] and record.is_file():
            self.settings = json.loads(record.read_text())["int8"].get("why")

    def __call__(self, **encoding) -> SimpleNamespace:
        ids = np.asarray(encoding["input_ids"], dtype=np.int64)
        # an input the tokenizer left out (token_type_ids) is zeros, as the model defaults it
        given = {k: v for k, v in encoding.items() if v is not None}
        zeros = np.zeros_like(ids)
        feeds = {n: np.asarray(given.get(n, zeros), np.int64) for n in self.input_names}
        (logits,) = self.session.run(["logits"], feeds)
        return SimpleNamespace(logits=torch.from_numpy(logits))
