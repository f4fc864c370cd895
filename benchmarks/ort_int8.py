"""ONNX Runtime int8 export settings side by side: label agreement with fp32 eager, and speed.

Each of :data:`pt2aws.inference.ort.INT8_SETTINGS` (what the export chooses between) is made
from one export of the model (:func:`pt2aws.inference.ort.quantize`), then:

* its labels on the first ``--n-texts`` test texts and on all the validation texts (or
  ``probe``: the export's first :data:`~pt2aws.inference.ort.PROBE_TEXTS`), batched as
  the predictor batches (by length, 32 a batch), against fp32 eager's: agreement, flips, mean
  |delta p|. With ``--qemu-cpu EPYC-Rome`` this part (ONNX Runtime and numpy only) runs under
  ``qemu-x86_64 -cpu EPYC-Rome``: ONNX Runtime's MLAS picks its kernels from CPUID, so it runs
  its AVX2 ones (u8 x s8 products through ``vpmaddubsw``, which saturates): the numerics of an
  x86 CPU without VNNI on any x86 host. Emulated CPUID, real AVX2 kernels; about an hour per
  setting on one core, and its timing means nothing;
* natively (``--per-node``): the default setting with each weighted MatMul in turn kept fp32,
  its agreement on ``--splits`` (which nodes :data:`~pt2aws.inference.ort.FFN_OUTPUT` names);
* natively (``--speed``): batch-32 throughput of each setting beside the HF pipeline, eager
  and ``ort-fp32`` on the test texts, interleaved rounds
  (:func:`pt2aws.inference.measure.compare_predictors`).

    python benchmarks/ort_int8.py --model-dir runs/latest/train/model --workdir runs/bench-ort --speed
    python benchmarks/ort_int8.py --model-dir runs/latest/train/model --workdir runs/bench-ort \\
        --qemu-cpu EPYC-Rome --settings "int8 weights"   # the same files, AVX2 numerics

Results: ``<workdir>/agreement_<cpu>.json``, ``per_node.json`` and ``speed.json``; write-up in
``benchmarks/README.md``. Reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-dir", required=True, help="a fine-tuned model (make run's)")
    parser.add_argument("--workdir", default="runs/bench-ort", help="files and results")
    parser.add_argument("--n-texts", type=int, default=512, help="test texts")
    parser.add_argument("--settings", default="", help="comma-separated names (default: all)")
    parser.add_argument("--qemu-cpu", default="", help="run the agreement under qemu-x86_64 -cpu")
    parser.add_argument("--speed", action="store_true", help="also time them natively")
    parser.add_argument("--per-node", action="store_true", help="the default, a node fp32 each")
    parser.add_argument("--threads", type=int, default=1, help="ONNX Runtime threads (agreement)")
    parser.add_argument("--splits", default="test,validation", help="of test,validation,probe")
    parser.add_argument("--agreement-only", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def prepare(args) -> dict:
    """Every setting's file and the batches with fp32 eager's probabilities, built once."""
    import numpy as np
    import torch

    from pt2aws.data import load_for_run
    from pt2aws.inference import ort
    from pt2aws.inference.variants import Classifier, load_fp32

    work = Path(args.workdir)
    index = work / "files.json"
    if index.is_file():
        return json.loads(index.read_text())
    work.mkdir(parents=True, exist_ok=True)
    model, tokenizer = load_fp32(args.model_dir)
    data = load_for_run(Path(args.model_dir).parent)
    validation = list(data.splits["validation"]["text"])
    splits = {"test": list(data.splits["test"]["text"])[: args.n_texts], "validation": validation,
              "probe": [t for t in validation if t.strip()][: ort.PROBE_TEXTS]}  # fmt: skip
    limit = Classifier(model, tokenizer, model.config).max_length
    for name, texts in splits.items():  # as serving.handler.classify batches them
        enc = tokenizer(texts, truncation=True, max_length=limit)
        order = sorted(range(len(texts)), key=lambda i: len(enc["input_ids"][i]))
        arrays = {}
        for b, start in enumerate(range(0, len(order), 32)):
            idx = order[start : start + 32]
            batch = tokenizer.pad([{k: enc[k][i] for k in enc} for i in idx], return_tensors="pt")
            arrays |= {f"{b}/{k}": v.numpy() for k, v in batch.items()} | {
                f"{b}/idx": np.array(idx)
            }
            with torch.inference_mode():
                arrays[f"{b}/reference"] = model(**batch).logits.float().softmax(-1).numpy()
        np.savez(work / f"{name}.npz", **arrays)
    ort.export_variants(model, tokenizer, work, weights_sha256="")  # model.onnx, as served
    files = {"ort-fp32": "model.onnx"}
    with warnings.catch_warnings(action="ignore"):
        for i, name in enumerate(ort.INT8_SETTINGS):
            ort.quantize(work / "model.onnx", work / f"int8_{i}.onnx", name)
            files[name] = f"int8_{i}.onnx"
    index.write_text(json.dumps(files, indent=1))
    return files


def agreement(args, files: dict) -> dict:
    """Each file's labels against fp32 eager's, with ONNX Runtime only (runs under QEMU)."""
    import numpy as np
    import onnxruntime as ort

    work, out = Path(args.workdir), {}
    for name, file in files.items():
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = args.threads, 1
        session = ort.InferenceSession(
            str(work / file), options, providers=["CPUExecutionProvider"]
        )
        inputs, out[name] = [i.name for i in session.get_inputs()], {}
        for split in args.splits.split(","):
            arrays, flips, dp, count, b = np.load(work / f"{split}.npz"), 0, 0.0, 0, 0
            while f"{b}/idx" in arrays:
                ids = arrays[f"{b}/input_ids"]
                feeds = {n: arrays[f"{b}/{n}"] if f"{b}/{n}" in arrays else np.zeros_like(ids)
                         for n in inputs}  # fmt: skip
                logits = session.run(["logits"], feeds)[0]
                probs = np.exp(logits - logits.max(-1, keepdims=True))
                probs /= probs.sum(-1, keepdims=True)
                reference = arrays[f"{b}/reference"]
                flips += int((probs.argmax(-1) != reference.argmax(-1)).sum())
                dp += float(np.abs(probs - reference).max(-1).sum())
                count, b = count + len(ids), b + 1
            out[name][split] = {"texts": count, "flips": flips, "agreement": 1 - flips / count,
                                "mean_abs_dp": dp / count}  # fmt: skip
        print(json.dumps({name: out[name]}), flush=True)
    return out


def per_node(args, files: dict) -> dict:
    """The default setting with each weighted MatMul or Gemm in turn kept fp32 too: agreement on
    ``--splits`` of each (``"none"``: the default itself), which node's int8 error costs most."""
    import onnx

    from pt2aws.inference import ort

    work, default = Path(args.workdir), next(iter(ort.INT8_SETTINGS))
    graph = onnx.load(str(work / "model.onnx")).graph
    weights = {w.name for w in graph.initializer}
    names = [n.name for n in graph.node
             if n.op_type in ("MatMul", "Gemm") and weights & set(n.input)]  # fmt: skip
    out = {"none": files[default]}
    with warnings.catch_warnings(action="ignore"):
        for i, name in enumerate(names):
            ort.quantize(work / "model.onnx", work / f"node_{i}.onnx", default, (re.escape(name),))
            out[name] = f"node_{i}.onnx"
    return agreement(args, out)


def speed(args, files: dict) -> list[dict]:
    """Each setting beside the HF pipeline, eager and ``ort-fp32``, timed natively."""
    from peers.pipeline import PipelinePredictor

    from pt2aws.data import load_for_run
    from pt2aws.inference.measure import compare_predictors, format_table
    from pt2aws.inference.ort import OrtClassifier
    from pt2aws.inference.runtime import apply_runtime_settings
    from pt2aws.inference.variants import Classifier, load_fp32

    apply_runtime_settings()
    model, tokenizer = load_fp32(args.model_dir)
    texts = list(load_for_run(Path(args.model_dir).parent).splits["test"]["text"])[: args.n_texts]
    eager = Classifier(model, tokenizer, model.config)
    predictors = {"hf-pipeline": PipelinePredictor(args.model_dir, eager.max_length),
                  "eager": eager}  # fmt: skip
    for name, file in files.items():
        session = OrtClassifier(Path(args.workdir) / file, model.config)
        predictors[name] = Classifier(session, tokenizer, model.config, variant=name)
    rows = compare_predictors(predictors, texts, latency_calls=10, repeats=5)
    print(format_table(rows, baseline="hf-pipeline"))
    return rows


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    work = Path(args.workdir)
    if args.agreement_only:  # the QEMU child: no torch, no pt2aws
        files = json.loads((work / "files.json").read_text())
        wanted = args.settings.split(",") if args.settings else list(files)
        return agreement(args, {k: files[k] for k in wanted})
    files = prepare(args)
    if args.per_node:  # native only
        results = per_node(args, files)
        (work / "per_node.json").write_text(json.dumps(results, indent=1))
        return {"per_node": results}
    wanted = {k: files[k] for k in (args.settings.split(",") if args.settings else files)}
    if args.qemu_cpu:
        qemu = shutil.which("qemu-x86_64") or "qemu-x86_64-static"  # qemu-user(-static)
        command = [qemu, "-cpu", args.qemu_cpu, sys.executable, __file__, "--agreement-only",
                   *argv_without(sys.argv[1:] if argv is None else argv, "--qemu-cpu", "--speed")]  # fmt: skip
        result = subprocess.run(
            command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        results = {}
        for line in result.stdout.splitlines():  # one {name: figures} a line
            results |= json.loads(line) if line.startswith("{") else {}
    else:
        results = agreement(args, wanted)
    saved = work / f"agreement_{f'qemu-{args.qemu_cpu}' if args.qemu_cpu else 'native'}.json"
    results = {**(json.loads(saved.read_text()) if saved.is_file() else {}), **results}
    saved.write_text(json.dumps(results, indent=1))  # earlier settings' figures kept
    out = {"agreement": results}
    if args.speed:
        out["speed"] = speed(args, wanted)
        (work / "speed.json").write_text(json.dumps(out["speed"], indent=1, default=str))
    return out


def argv_without(argv: list[str], *flags: str) -> list[str]:
    """``argv`` less ``flags`` (and the value after a flag that takes one)."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in flags:
            skip = arg == "--qemu-cpu"
        elif not any(arg.startswith(f"{f}=") for f in flags):
            out.append(arg)
    return out


if __name__ == "__main__":
    main()
