"""ONNX Runtime variants (``ort-fp32``, ``ort-int8``), exported once into ``<model>/onnx/``:
``torch.onnx.export`` (TorchScript, dynamic axes), the transformer optimizer's fusions:
``model.onnx``; ``quantize_dynamic`` (int8 weights per channel): ``model_int8.onnx``. How (the
optimizer's level, the weights' format, what stays fp32) is measured on validation texts for
this CPU's int8 kernels (:func:`choose_settings`, cached per :func:`cpu_class`);
``export.json`` records the choice, its figures and the weights' SHA-256."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
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
#: ONNX node names containing these stay fp32 in ``ort-int8`` (as ``INT8_FP32_LAYERS``).
INT8_FP32_NODES = ("classifier",)
#: The export without a measurement, where :func:`choose_settings` starts: the optimizer's
#: portable level 1, int8 weights (u8 x s8 products), the classifier head kept fp32.
DEFAULT_SETTINGS = {"opt_level": 1, "weights": "int8", "reduce_range": False, "fp32": "head"}
#: Tried one at a time from the best so far: 7-bit weights (``quantize_dynamic``: "may improve
#: the accuracy ... on non-VNNI machine"), uint8 weights (u8 x u8 products do not saturate), the
#: embedding tables kept fp32 (lookups: no speed lost).
INT8_CHANGES = ({"reduce_range": True}, {"weights": "uint8", "reduce_range": False},
                {"fp32": "head+embeddings"})  # fmt: skip
#: Validation texts the probe classifies; mean |delta p| within this factor of the best's is
#: as accurate, below its inverse more accurate, and below ``DP_FLOOR`` no difference at all;
#: a change is kept for speed where this much faster (``selection.MARGIN``'s 5%). The
#: optimizer's level stays 1: ``benchmarks/ort_int8.py`` measured 2 and 99 (README there).
PROBE_TEXTS, ACCURACY_TOL, DP_FLOOR, FASTER = 128, 1.25, 1e-4, 1.05


def cpu_class() -> str:
    """The int8 kernels ONNX Runtime's MLAS picks here by CPUID (the caps of ``env.cpu`` do not
    reach it): u8 x s8 products without VNNI go through ``vpmaddubsw``, whose int16 pair sums
    saturate (onnxruntime's quantization guide)."""
    from pt2aws import env

    hw, levels = env.cpu_features().hardware, ("amx_int8 avx512_vnni avx_vnni i8mm asimddp "
                                              "avx512bw avx2").split()  # fmt: skip
    level = next((f for f in levels if f in hw), "no int8 dot products")
    return f"{env.cpu_features().arch} {level}" + (" (no VNNI)" if level in levels[5:] else "")


def _cache(key: str, entry: dict | None = None) -> dict | None:
    """The choice cached for ``key`` (``pt2aws_ort.json`` in ``TORCHINDUCTOR_CACHE_DIR``, as
    ``train.flags``' cache), or ``entry`` recorded there."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    path = Path(cache_dir()) / "pt2aws_ort.json"
    data = json.loads(path.read_text()) if path.is_file() else {}
    if entry is None:
        return data.get(key) and {**data[key], "how": f"{data[key]['how']}; cached in {path}"}
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps({**data, key: entry}, indent=1))
    os.replace(tmp, path)  # a reader sees the old file or the new one
    return entry


def accuracy_change(candidate: dict, best: dict) -> tuple[str, str]:
    """``("more" | "as" | "less", why)``: ``candidate`` against ``best`` (each ``{"flips",
    "mean_abs_dp"}`` against fp32 eager on the same texts) by mean |delta p|, which ranks
    settings on few texts (flips are a handful), within :data:`ACCURACY_TOL`; then flips."""
    dp = max(candidate["mean_abs_dp"], DP_FLOOR) / max(best["mean_abs_dp"], DP_FLOOR)
    said = f"mean |dp| {dp:.2f}x, {candidate['flips']} flips against {best['flips']}"
    if dp <= 1 / ACCURACY_TOL:
        return "more", f"more accurate: {said}"
    if dp > ACCURACY_TOL or candidate["flips"] > best["flips"]:
        return "less", f"less accurate: {said}"
    return "as", f"as accurate: {said}"


def choose_settings(probe, base: dict, changes) -> tuple[dict, list[dict]]:
    """``(settings, tried)``: from ``base``, each of ``changes`` applied to the best so far and
    kept where more accurate (:func:`accuracy_change`) and still :data:`FASTER` than
    ``ort-fp32``, or as accurate and :data:`FASTER` (timed twice: the slower counts); ``tried``:
    each one's figures and why. ``probe``: ``.accuracy(settings) -> {"flips", "texts",
    "mean_abs_dp"}``, ``.speed(a, b)``: b's speed over a's, side by side (a None: ``ort-fp32``)."""
    best, figures, over = dict(base), probe.accuracy(base), None
    tried = [{"settings": best, **figures, "kept": True, "why": "the start"}]
    for settings in ({**best, **change} for change in changes):
        measured = probe.accuracy(settings)
        verdict, why = accuracy_change(measured, figures)
        speed = probe.speed(best, settings) if verdict != "less" else None
        if verdict == "more":
            over = probe.speed(None, best) if over is None else over
            kept = over * speed >= FASTER
            why += f"; {over * speed:.2f}x ort-fp32's speed" + ("" if kept else ": too slow")
        elif verdict == "as":
            speed = min(speed, probe.speed(best, settings)) if speed >= FASTER else speed
            kept = speed >= FASTER
            why += f"; {speed:.2f}x the speed" + ("" if kept else ": not faster")
        tried.append({"settings": settings, **measured, "speed": speed,
                      "kept": verdict != "less" and kept, "why": why})  # fmt: skip
        if tried[-1]["kept"]:
            best, figures, over = settings, measured, over and over * speed
    return best, tried


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
    to measure the settings on, :func:`export_variants`); FileNotFoundError if missing or stale
    with nothing to export from."""
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


class Builder:
    """``model`` exported once into ``work`` (``torch.onnx.export``: TorchScript, dynamic axes),
    then the fp32 graph of each optimizer level and the int8 file of each settings, each built
    once; ``fused`` and ``fp32_nodes`` record what each holds."""

    def __init__(self, model, tokenizer, work: Path):
        names = list(tokenizer.model_input_names)
        sample = tokenizer(["an example", "a second, longer example"], padding=True,
                           return_tensors="pt")  # fmt: skip

        class Logits(torch.nn.Module):  # positional inputs in ``names`` order -> logits only
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, *inputs):
                return self.inner(**dict(zip(names, inputs))).logits

        self.raw, self.work, self.config = work / "model.raw.onnx", work, model.config
        self.files, self.fused, self.fp32_nodes = {}, {}, {}
        axes = {name: {0: "batch", 1: "sequence"} for name in names}
        torch.onnx.export(Logits(model).eval(), tuple(sample[n] for n in names), str(self.raw),
                          input_names=names, output_names=["logits"],
                          dynamic_axes={**axes, "logits": {0: "batch"}}, opset_version=OPSET,
                          dynamo=False)  # fmt: skip

    def fp32(self, level: int) -> Path:
        from onnxruntime.transformers import optimizer

        path = self.work / f"fp32_o{level}.onnx"
        if level not in self.fused:
            optimized = optimizer.optimize_model(str(self.raw), model_type="bert", opt_level=level,
                                                 num_heads=int(self.config.num_attention_heads),
                                                 hidden_size=int(self.config.hidden_size))  # fmt: skip
            optimized.save_model_to_file(str(path))
            nodes = optimized.model.graph.node
            self.fused[level] = sorted({n.op_type for n in nodes if n.domain == "com.microsoft"})
        return path

    def int8(self, settings: dict) -> Path:
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic

        key = json.dumps(settings, sort_keys=True)
        if key in self.files:
            return self.files[key]
        graph = onnx.load(str(self.fp32(settings["opt_level"])), load_external_data=False).graph
        tables, kept = {t.name for t in graph.initializer}, []
        for node in graph.node:
            table = node.op_type == "Gather" and node.input[0] in tables  # an embedding lookup
            if (table and "emb" in settings["fp32"]) or any(
                k in node.name for k in INT8_FP32_NODES
            ):
                kept.append(node.name)
                if node.op_type == "Gemm":  # quantize_dynamic: a Gemm -> <name>_MatMul + Add
                    kept.append(f"{node.name}_MatMul")
        self.files[key] = path = self.work / f"int8_{len(self.files)}.onnx"
        self.fp32_nodes[key] = kept
        weights = QuantType.QUInt8 if settings["weights"] == "uint8" else QuantType.QInt8
        # the fused com.microsoft operators defeat ONNX shape inference: their outputs are fp32
        quantize_dynamic(str(self.fp32(settings["opt_level"])), str(path), per_channel=True,
                         reduce_range=settings["reduce_range"], weight_type=weights,
                         nodes_to_exclude=kept,
                         extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})  # fmt: skip
        return path


def measure_settings(builder: Builder, model, tokenizer, texts) -> dict:
    """``{"int8": settings, "how", "tried", "seconds"}``: what :func:`choose_settings` picks with
    ``texts`` (classified against fp32 eager, timed by :func:`~.measure.speed_ratio`), cached for
    this :func:`cpu_class`, onnxruntime and model architecture."""
    import onnxruntime

    from pt2aws.inference.measure import speed_ratio
    from pt2aws.inference.variants import Classifier

    config, started, built = model.config, time.perf_counter(), {}
    key = (f"{cpu_class()}; onnxruntime {onnxruntime.__version__}; {config.model_type} "
           f"{config.num_hidden_layers}x{config.hidden_size}")  # fmt: skip
    if found := _cache(key):
        return found
    reference = Classifier(model, tokenizer, config).predict_proba(texts)

    def run(settings: dict | None) -> Classifier:
        path = builder.fp32(1) if settings is None else builder.int8(settings)
        if path not in built:
            built[path] = Classifier(OrtClassifier(path, config), tokenizer, config)
        return built[path]

    def accuracy(settings: dict) -> dict:
        probs = run(settings).predict_proba(texts)
        flips = int((probs.argmax(-1) != reference.argmax(-1)).sum())
        dp = round(float((probs - reference).abs().amax(-1).mean()), 7)
        return {"flips": flips, "texts": len(texts), "mean_abs_dp": dp}

    def speed(a: dict | None, b: dict) -> float:
        first, second = run(a), run(b)
        ratio = speed_ratio(lambda: first.predict_ids(texts), lambda: second.predict_ids(texts))
        return round(ratio, 3)

    probe = SimpleNamespace(accuracy=accuracy, speed=speed)
    int8, tried = choose_settings(probe, DEFAULT_SETTINGS, INT8_CHANGES)
    kept = [", ".join(f"{k} {v}" for k, v in t["settings"].items() if DEFAULT_SETTINGS[k] != v)
            for t in tried[1:] if t["kept"]]  # fmt: skip
    seconds = time.perf_counter() - started
    how = (f"measured for {cpu_class()} on {len(texts)} validation texts in {seconds:.0f} s: "
           f"kept {'; '.join(kept) or 'the defaults'}")  # fmt: skip
    return _cache(key, {"int8": int8, "how": how, "tried": tried, "seconds": round(seconds, 1)})


def export_variants(model, tokenizer, folder: Path, *, weights_sha256: str, texts=None) -> None:
    """``model`` as ``folder/model.onnx`` and ``model_int8.onnx``, recorded in ``export.json``:
    int8 with the settings :func:`measure_settings` picks on the first :data:`PROBE_TEXTS` of
    ``texts``, else :data:`DEFAULT_SETTINGS`."""
    import tempfile

    import onnx
    import onnxruntime

    folder.mkdir(parents=True, exist_ok=True)
    texts = [t for t in texts or [] if t.strip()][:PROBE_TEXTS]
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)  # the exporter's tracer warnings, the quantizer's advice
    try:
        with tempfile.TemporaryDirectory() as work, warnings.catch_warnings(action="ignore"), \
                torch.inference_mode():  # fmt: skip
            builder = Builder(model, tokenizer, Path(work))
            chosen = measure_settings(builder, model, tokenizer, texts) if texts else {
                "int8": DEFAULT_SETTINGS, "how": "not measured (no validation texts): defaults"}  # fmt: skip
            int8, level = chosen["int8"], DEFAULT_SETTINGS["opt_level"]
            shutil.move(builder.int8(int8), folder / ONNX_FILES["ort-int8"])
            shutil.move(builder.fp32(level), folder / ONNX_FILES["ort-fp32"])
    finally:
        logging.disable(previous)
    record = {
        "weights_sha256": weights_sha256,
        "exporter": f"torch.onnx.export (TorchScript, dynamo=False), torch {torch.__version__}",
        "opset": OPSET,
        "onnx": onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
        "opt_level": level,
        "fused": builder.fused[level],
        "int8": {
            "method": "onnxruntime.quantization.quantize_dynamic",
            "summary": f"{int8['weights']} weights per output channel"
            f"{' in 7 bits' if int8['reduce_range'] else ''}, uint8 activations per tensor at "
            f"run time, {int8['fp32']} kept fp32; {chosen['how']}",
            "settings": int8,
            "fp32_nodes": builder.fp32_nodes[json.dumps(int8, sort_keys=True)],
            "cpu_class": cpu_class(),
            "tried": chosen.get("tried"),
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
        record = self.path.with_name(EXPORT_RECORD)  # how an ort-int8 file was made, in a line
        int8 = self.path.name == ONNX_FILES["ort-int8"] and record.is_file()
        self.settings = json.loads(record.read_text())["int8"].get("summary") if int8 else None

    def __call__(self, **encoding) -> SimpleNamespace:
        ids = np.asarray(encoding["input_ids"], dtype=np.int64)
        # an input the tokenizer left out (token_type_ids) is zeros, as the model defaults it
        given = {k: v for k, v in encoding.items() if v is not None}
        zeros = np.zeros_like(ids)
        feeds = {n: np.asarray(given.get(n, zeros), np.int64) for n in self.input_names}
        (logits,) = self.session.run(["logits"], feeds)
        return SimpleNamespace(logits=torch.from_numpy(logits))
