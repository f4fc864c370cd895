"""Inference speed on this machine: every predictor variant beside the HF pipeline.

On the ``make run`` model (MiniLM-L6 fine-tuned with ``--profile local``; trained here first when
``--model-dir`` is not given), in one run:

* p50/p90 latency at batch 1 (and p99 from >= 100 calls, else the maximum) and median
  throughput at batch 32 (repeats interleaved) for ``transformers.pipeline("text-classification")``
  and each predictor variant, all built from one loaded fp32 model: eager fp32, torch.compile,
  bf16, int8 (torchao), ONNX Runtime fp32 and int8 (``ort-fp32``,
  ``ort-int8``: exported into ``<model>/onnx/``), and ``auto`` (the variant
  :func:`pt2aws.inference.selection.choose_by_measurement` chose on validation texts, as its own
  row);
* each row's label agreement with fp32 eager on the test texts;
* optionally the local endpoint (``--endpoint``: the serving image's server on 127.0.0.1).

Variants this CPU runs slowly (torchao int8 without int8 dot products, bf16 without native
bf16: :func:`pt2aws.inference.variants.slow_here`) are left out with the reason unless
``--include-slow``.

Targets (reported, never asserted): the best servable variant >= 2x the pipeline's batch-32
throughput at >= 99% agreement; ``auto`` not slower than eager.

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
VARIANTS = "eager,compile,bf16,int8,ort-fp32,ort-int8"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-dir", default=None, help="a fine-tuned model (default: train one)")
    parser.add_argument("--workdir", default="runs/bench-inference", help="the trained model")
    parser.add_argument("--variants", default=VARIANTS, help="comma-separated variant names")
    parser.add_argument(
        "--include-slow",
        action="store_true",
        help="also time variants this CPU runs slowly (torchao int8 without VNNI, bf16 without bf16)",
    )
    parser.add_argument("--no-pipeline", action="store_true", help="skip the HF pipeline row")
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


def build_predictors(model_dir: Path, args, auto_model=None) -> tuple[dict, dict[str, str]]:
    """``({row name: predictor}, {variant: reason left out})`` in table order; every variant is
    built from one loaded fp32 model."""
    from peers.pipeline import PipelinePredictor

    from pt2aws.inference.variants import Classifier, build_variant, load_fp32, runnable_variants

    model, tokenizer = load_fp32(str(model_dir))
    wanted = ["eager", *[v for v in args.variants.split(",") if v and v != "eager"]]
    runnable, left_out = runnable_variants(wanted, include_slow=args.include_slow)
    predictors = {}
    if not args.no_pipeline:
        limit = Classifier(model, tokenizer, model.config).max_length
        predictors["hf-pipeline"] = PipelinePredictor(str(model_dir), limit)
    for variant in runnable:
        module, call = build_variant(model, variant, "cpu", keep_fp32=True, model_dir=str(model_dir),
                                     tokenizer=tokenizer)  # fmt: skip
        predictors[variant] = Classifier(
            call, tokenizer, model.config, variant=variant, module=module
        )
    if auto_model is not None:
        predictors["auto"] = Classifier(auto_model, tokenizer, model.config, variant="auto")
    return predictors, left_out


def time_endpoint(model_dir: Path, args) -> dict | None:
    """The serving image's server on 127.0.0.1: one-text requests, back to back."""
    from pt2aws.inference.measure import latency_summary, time_calls
    from pt2aws.serving.local import LocalServer, server_missing

    if server_missing():
        print(f"local endpoint skipped: {server_missing()}")
        return None
    body = json.dumps({"inputs": SHORT_REVIEW})
    with LocalServer(model_dir, Path(args.workdir) / "serve") as server:
        seconds = time_calls(lambda: server.invoke(body), args.latency_calls)
    return {**latency_summary(seconds), "requests_per_s": len(seconds) / sum(seconds),
            "startup_s": server.startup_s}  # fmt: skip


def summary_lines(rows: list[dict], auto: dict | None) -> list[str]:
    """The target checks: best servable variant vs the pipeline, auto vs eager."""
    from pt2aws.inference.selection import fastest_agreeing

    by = {r["variant"]: r for r in rows}
    servable = [r for r in rows if r["variant"] not in ("hf-pipeline", "auto")]
    best = fastest_agreeing(servable)
    pipe = by.get("hf-pipeline", {}).get("samples_per_s")
    lines = [f"best servable variant with >= 99% agreement: {best['variant']}"]
    if pipe:
        lines[-1] += f", {best['samples_per_s'] / pipe:.2f}x the pipeline's batch-32 throughput"
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


def isa_notes() -> list[str]:
    """What the instruction-set caps in the environment do not reach (ONNX Runtime)."""
    import os

    caps = {
        k: os.environ[k] for k in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA") if k in os.environ
    }
    if not caps:
        return []
    return [
        f"{' '.join(f'{k}={v}' for k, v in caps.items())} cap torch's ATen and oneDNN only: "
        "ONNX Runtime's MLAS picks its kernels from CPUID when it loads (no variable or session "
        "option caps it), so the ort-* rows ran with this CPU's full instruction set"
    ]


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)  # kept by apply_runtime_settings
    from pt2aws.data import load_for_run
    from pt2aws.env import cpu_features
    from pt2aws.inference.measure import compare_predictors, format_table
    from pt2aws.inference.runtime import apply_runtime_settings
    from pt2aws.inference.selection import choose_by_measurement
    from pt2aws.inference.variants import load_fp32

    runtime = apply_runtime_settings()
    load_before = os.getloadavg()
    model_dir = ensure_model(args)
    data = load_for_run(model_dir.parent)
    texts = list(data.splits["test"]["text"])[: args.n_texts]
    auto, auto_model = None, None
    if not args.no_auto:
        print("== auto: choosing on validation texts")
        validation = list(data.splits["validation"]["text"])[: args.auto_texts]
        model, tokenizer = load_fp32(str(model_dir))
        choice, kept = choose_by_measurement(
            model, tokenizer, validation, model_dir=str(model_dir), device="cpu"
        )
        auto = {"variant": choice.variant, "reason": choice.reason}
        auto_model = kept.model
    started = time.perf_counter()
    predictors, left_out = build_predictors(model_dir, args, auto_model)
    setup_s = time.perf_counter() - started
    print(f"== {len(predictors)} rows on {len(texts)} test texts (set up in {setup_s:.0f} s)")
    rows = compare_predictors(
        predictors, texts, latency_calls=args.latency_calls, repeats=args.repeats
    )
    endpoint = time_endpoint(model_dir, args) if args.endpoint else None
    load_after = os.getloadavg()
    cpu = cpu_features()
    results = {
        "machine": {
            "cpu": cpu.description,
            "platform": platform.platform(),
            "python": sys.version.split()[0],
        },
        "runtime": runtime,
        "load_avg_before": load_before,
        "load_avg_after": load_after,
        "model_dir": str(model_dir),
        "n_texts": len(texts),
        "rows": rows,
        "left_out": left_out,
        "auto": auto,
        "endpoint": endpoint,
        "table": format_table(rows, baseline="hf-pipeline" if not args.no_pipeline else "eager"),
        "summary": summary_lines(rows, auto),
        "notes": isa_notes(),
    }
    print(
        f"\nCPU: {results['machine']['cpu']}; torch threads {runtime['torch_threads']}; load "
        f"average {load_before[0]:.2f} before, {load_after[0]:.2f} after\n"
    )
    print(results["table"])
    if endpoint:
        print(
            f"local endpoint: p50 {endpoint['p50_ms']:.1f} ms, {endpoint['requests_per_s']:.1f} req/s"
        )
    for variant, why in left_out.items():
        print(f"{variant} not timed: {why}")
    print("\n" + "\n".join(results["summary"] + results["notes"]))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(results, indent=2, default=str))
        print(f"\nwrote {args.json}")
    return results


if __name__ == "__main__":
    main()
