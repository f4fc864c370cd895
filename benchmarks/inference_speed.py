"""Inference speed on this machine: predictor variants beside the HF pipeline and ONNX Runtime.

On the ``make run`` model (MiniLM-L6 fine-tuned with ``--profile local``; trained here first when
``--model-dir`` is not given), in one run:

* p50/p90/p99 latency at batch 1 and median throughput at batch 32 (repeats interleaved) for
  ``transformers.pipeline("text-classification")``, each predictor variant (eager fp32,
  torch.compile, bf16 where native, int8 (torchao), int8-legacy (``torch.ao``)), ONNX Runtime
  fp32 and int8, and ``auto`` (the variant :func:`pt2aws.inference.selection.choose_by_measurement`
  chose on validation texts, measured here as its own row);
* each row's label agreement with fp32 eager on the test texts;
* optionally the local endpoint (``--endpoint``: the SageMaker serving stack on 127.0.0.1).

Targets (reported, never asserted): the best servable variant >= 2x the pipeline's batch-32
throughput at >= 99% agreement, and at or above ONNX Runtime fp32; ``auto`` not slower than eager.

    python benchmarks/inference_speed.py --model-dir runs/latest/train/model --threads 2 \\
        --json runs/bench/inference_speed.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

SHORT_REVIEW = "Great phone, the battery lasts all day."
PEERS = ("hf-pipeline", "ort-fp32", "ort-int8")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-dir", default=None, help="a fine-tuned model (default: train one)")
    parser.add_argument("--workdir", default="runs/bench-inference", help="models, ONNX files")
    parser.add_argument("--variants", default="eager,compile,bf16,int8,int8-legacy")
    parser.add_argument("--peers", default=",".join(PEERS), help="hf-pipeline, ort-fp32, ort-int8")
    parser.add_argument("--no-auto", action="store_true", help="skip the auto row")
    parser.add_argument("--n-texts", type=int, default=512, help="test texts per row")
    parser.add_argument("--auto-texts", type=int, default=128, help="validation texts for auto")
    parser.add_argument("--latency-calls", type=int, default=60, help="batch-1 calls per row")
    parser.add_argument("--repeats", type=int, default=3, help="throughput passes (median)")
    parser.add_argument("--threads", type=int, default=None, help="intra-op threads (all rows)")
    parser.add_argument("--endpoint", action="store_true", help="also time the local endpoint")
    parser.add_argument("--json", default=None, help="also write the results here")
    return parser.parse_args(argv)


def ensure_model(args) -> Path:
    """The model to measure: ``--model-dir``, or MiniLM fine-tuned like ``make run``."""
    if args.model_dir:
        return Path(args.model_dir)
    train_dir = Path(args.workdir) / "minilm-train"
    if not (train_dir / "model" / "config.json").is_file():
        cmd = [sys.executable, "-m", "pt2aws.train", "--profile", "local"]
        subprocess.run([*cmd, "--output_dir", str(train_dir)], check=True)
    return train_dir / "model"


def build_predictors(model_dir: Path, args, auto_variant: str | None) -> tuple[dict, dict]:
    """``({row name: predictor}, {row name: reason skipped})`` in table order."""
    from peers import onnx_peer
    from peers.pipeline import PipelinePredictor

    from pt2aws.inference.predictor import Predictor
    from pt2aws.inference.variants import variant_support

    predictors, skipped = {}, {}
    variants = ["eager", *[v for v in args.variants.split(",") if v and v != "eager"]]
    for variant in variants:
        native, why = variant_support(variant, "cpu")
        if native:
            predictors[variant] = Predictor(str(model_dir), variant=variant, device="cpu")
        else:
            skipped[variant] = why
    max_length = predictors["eager"].max_length
    peers = args.peers.split(",")
    if "hf-pipeline" in peers:
        predictors = {"hf-pipeline": PipelinePredictor(str(model_dir), max_length), **predictors}
    onnx_dir = Path(args.workdir) / "onnx"
    if "ort-fp32" in peers or "ort-int8" in peers:
        fp32 = onnx_peer.export_onnx(model_dir, onnx_dir / "model.onnx")
        if "ort-fp32" in peers:
            predictors["ort-fp32"] = onnx_peer.OrtPredictor(fp32, model_dir)
        if "ort-int8" in peers:
            int8 = onnx_peer.quantize_onnx_int8(fp32, onnx_dir / "model-int8.onnx")
            predictors["ort-int8"] = onnx_peer.OrtPredictor(int8, model_dir)
    if auto_variant:
        predictors["auto"] = Predictor(str(model_dir), variant=auto_variant, device="cpu")
    return predictors, skipped


def time_endpoint(model_dir: Path, args) -> dict | None:
    from pt2aws.aws.artifact import package
    from pt2aws.inference.measure import measure_endpoint
    from pt2aws.standins.torchserve import LocalEndpoint, serve_stack_missing

    missing = serve_stack_missing()
    if missing:
        print(f"local endpoint skipped: {missing}")
        return None
    work = Path(args.workdir)
    with LocalEndpoint(package(model_dir, work / "model.tar.gz"), work / "serve") as ep:
        return {
            **measure_endpoint(ep, SHORT_REVIEW, calls=args.latency_calls),
            "startup_s": ep.startup_s,
        }


def summary_lines(rows: list[dict], auto: dict | None) -> list[str]:
    """The target checks: best servable vs the pipeline and ORT fp32, auto vs eager."""
    from pt2aws.inference.selection import fastest_agreeing

    by = {r["variant"]: r for r in rows}
    servable = [r for r in rows if r["variant"] not in ("hf-pipeline", "auto")]
    best = fastest_agreeing(servable)
    pipe = by.get("hf-pipeline", {}).get("samples_per_s")
    lines = [f"best servable variant with >= 99% agreement: {best['variant']}"]
    if pipe:
        lines[-1] += f", {best['samples_per_s'] / pipe:.2f}x the pipeline's batch-32 throughput"
    if "ort-fp32" in by:
        lines.append(
            f"vs ONNX Runtime fp32: {best['samples_per_s'] / by['ort-fp32']['samples_per_s']:.2f}x"
        )
    fastest = max(servable, key=lambda r: r["samples_per_s"])
    if fastest is not best:
        lines.append(
            f"fastest of all: {fastest['variant']} ({fastest['samples_per_s'] / best['samples_per_s']:.2f}x "
            f"the best servable) at {fastest['agreement']:.2%} agreement"
        )
    if auto and "auto" in by:
        ratio = by["auto"]["samples_per_s"] / by["eager"]["samples_per_s"]
        lines.append(f"auto chose {auto['variant']} ({auto['reason']}); here {ratio:.2f}x eager")
    return lines


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)  # kept by apply_runtime_settings
    from pt2aws.data import load_for_run
    from pt2aws.env import cpu_info
    from pt2aws.inference.measure import compare_predictors, format_table
    from pt2aws.inference.runtime import apply_runtime_settings
    from pt2aws.inference.selection import choose_by_measurement

    runtime = apply_runtime_settings()
    load_before = os.getloadavg()
    model_dir = ensure_model(args)
    data = load_for_run(model_dir.parent)
    texts = list(data.splits["test"]["text"])[: args.n_texts]
    auto = None
    if not args.no_auto:
        print("== auto: choosing on validation texts")
        validation = list(data.splits["validation"]["text"])[: args.auto_texts]
        choice, _ = choose_by_measurement(str(model_dir), validation, device="cpu")
        auto = {"variant": choice.variant, "reason": choice.reason}
    started = time.perf_counter()
    predictors, skipped = build_predictors(model_dir, args, auto and auto["variant"])
    setup_s = time.perf_counter() - started
    print(f"== {len(predictors)} rows on {len(texts)} test texts (set up in {setup_s:.0f} s)")
    rows = compare_predictors(
        predictors, texts, latency_calls=args.latency_calls, repeats=args.repeats
    )
    endpoint = time_endpoint(model_dir, args) if args.endpoint else None
    load_after = os.getloadavg()
    cpu = cpu_info()
    results = {
        "machine": {"cpu": cpu, "platform": platform.platform(), "python": sys.version.split()[0]},
        "runtime": runtime,
        "load_avg_before": load_before,
        "load_avg_after": load_after,
        "model_dir": str(model_dir),
        "n_texts": len(texts),
        "rows": rows,
        "skipped": skipped,
        "auto": auto,
        "endpoint": endpoint,
        "table": format_table(rows + ([endpoint] if endpoint else [])),
        "summary": summary_lines(rows, auto),
    }
    print(
        f"\nCPU: {cpu['model']}, {cpu['logical_cores']} logical cores, bf16 {cpu['bf16']}, "
        f"AMX {cpu['amx']}; torch threads {runtime['torch_threads']}; load average "
        f"{load_before[0]:.2f} before, {load_after[0]:.2f} after\n"
    )
    print(results["table"])
    for variant, why in skipped.items():
        print(f"{variant} skipped: {why}")
    print("\n" + "\n".join(results["summary"]))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(results, indent=2, default=str))
        print(f"\nwrote {args.json}")
    return results


if __name__ == "__main__":
    main()
