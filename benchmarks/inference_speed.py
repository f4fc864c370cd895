"""Inference speed on this machine: predictor variants beside the HF pipeline and the local endpoint.

For each model (default: MiniLM-L6 fine-tuned briefly on the tweets, and the tiny RoBERTa):

* p50/p90/p99 latency at batch 1 and median throughput at batch 32 for each predictor variant
  (eager fp32, torch.compile, bf16, dynamic int8) and for ``transformers.pipeline
  ("text-classification")`` on the same model and texts, measured in one run, one after another;
* each variant's label agreement with fp32 eager on the test texts;
* the local endpoint (real SageMaker serving stack on 127.0.0.1): request latency and
  requests/s for one short review.

Targets on a CPU (reported, never asserted): best variant >= 2x the pipeline's batch-32
throughput with >= 99% agreement; local endpoint p50 < 50 ms.

    python benchmarks/inference_speed.py --json runs/bench/inference_speed.json
    python benchmarks/inference_speed.py --models tiny-roberta --no-endpoint    # quick look
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

SHORT_REVIEW = "Great phone, the battery lasts all day."


def _train(model: str, out: Path, train_samples: int, epochs: float) -> Path:
    from pt2aws.train import loop

    profile = "smoke" if model == "tiny-roberta" else "local"
    if not (out / "model" / "config.json").is_file():
        loop.main(
            [
                "--profile", profile,
                "--model_name_or_path", model,
                "--output_dir", str(out),
                "--max_train_samples", str(train_samples),
                "--max_eval_samples", "600",
                "--num_train_epochs", str(epochs),
                "--torch_compile", "off",
            ]
        )  # fmt: skip
    return out


def _texts(train_dir: Path, n: int) -> list[str]:
    from pt2aws.data import load_for_run

    data = load_for_run(train_dir)
    texts = list(data.splits["test"]["text"]) + list(data.splits["validation"]["text"])
    return texts[:n]


def bench_model(model: str, args, workdir: Path) -> dict:
    from pt2aws.bench import inference
    from pt2aws.inference.metrics import label_agreement
    from pt2aws.inference.predictor import Predictor
    from pt2aws.inference.variants import choose_variant

    train_dir = Path(args.model_dir).parent if args.model_dir else workdir / model / "train"
    t0 = time.perf_counter()
    if not args.model_dir:
        _train(model, train_dir, args.train_samples, args.epochs)
    model_dir = str(Path(args.model_dir) if args.model_dir else train_dir / "model")
    texts = _texts(train_dir, args.n_texts)
    lat_texts = texts[: args.latency_calls]
    print(
        f"\n== {model}: {len(texts)} texts, model {model_dir} (ready in {time.perf_counter() - t0:.0f} s)"
    )

    rows, reference = [], None
    for variant in args.variants:
        t1 = time.perf_counter()
        predictor = Predictor(model_dir, variant=variant, batch_size=32)
        predictor.predict_proba(texts[:64])  # compile / first-call costs stay out of the timings
        setup_s = time.perf_counter() - t1
        ids = predictor.predict_ids(texts)
        reference = ids if variant == "eager" else reference
        row = inference.measure_predictor(predictor, texts, lat_texts, repeats=args.repeats)
        row["agreement"] = label_agreement(reference, ids) if reference else None
        row["setup_s"] = setup_s
        row["variant_reason"] = predictor.variant_reason
        rows.append(row)
        print(f"  {variant}: p50 {row['p50_ms']:.1f} ms, {row['samples_per_s']:.1f} samples/s")
        max_length = predictor.max_length
        del predictor

    pipe = inference.make_pipeline(model_dir)
    row = inference.measure_pipeline(
        pipe, texts, lat_texts, max_length=max_length, repeats=args.repeats
    )
    label2id = pipe.model.config.label2id
    row["agreement"] = (
        label_agreement(
            reference, [label2id[x] for x in inference.pipeline_labels(pipe, texts, max_length)]
        )
        if reference
        else None
    )
    rows.insert(0, row)
    print(f"  hf-pipeline: p50 {row['p50_ms']:.1f} ms, {row['samples_per_s']:.1f} samples/s")
    del pipe

    endpoint = None
    if not args.no_endpoint:
        from pt2aws.aws.artifact import package
        from pt2aws.serving.local import LocalEndpoint, serve_stack_missing

        missing = serve_stack_missing()
        if missing:
            print(f"  local endpoint skipped: {missing}")
        else:
            archive = package(model_dir, workdir / model / "model.tar.gz")
            with LocalEndpoint(archive, workdir / model / "serve") as ep:
                endpoint = inference.measure_endpoint(ep, SHORT_REVIEW, calls=args.endpoint_calls)
                endpoint["startup_s"] = ep.startup_s
            rows.append(endpoint)
            print(
                f"  local endpoint: p50 {endpoint['p50_ms']:.1f} ms, {endpoint['requests_per_s']:.1f} req/s"
            )

    pipe_sps = rows[0]["samples_per_s"]
    good = [
        r
        for r in rows[1:]
        if r.get("agreement") is not None and r["agreement"] >= 0.99 and "samples_per_s" in r
    ]
    best = max(good, key=lambda r: r["samples_per_s"]) if good else None
    choice = choose_variant("cpu")
    return {
        "model": model,
        "model_dir": model_dir,
        "n_texts": len(texts),
        "latency_calls": len(lat_texts),
        "rows": rows,
        "best_variant": best["variant"] if best else None,
        "best_vs_pipeline": best["samples_per_s"] / pipe_sps if best else None,
        "auto_variant": {"variant": choice.variant, "reason": choice.reason},
        "endpoint": endpoint,
        "table": inference.format_table(rows),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--models", default="minilm-l6,tiny-roberta", help="comma list: minilm-l6, tiny-roberta"
    )
    parser.add_argument(
        "--model-dir",
        default=None,
        help="an already fine-tuned model dir (its parent holds train_config.json)",
    )
    parser.add_argument("--variants", default="eager,compile,bf16,int8")
    parser.add_argument("--n-texts", type=int, default=512, help="texts for throughput/agreement")
    parser.add_argument("--latency-calls", type=int, default=60, help="batch-1 calls per variant")
    parser.add_argument("--endpoint-calls", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3, help="throughput repeats (median)")
    parser.add_argument("--train-samples", type=int, default=1280, help="fine-tuning examples")
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--workdir", default="runs/bench-inference")
    parser.add_argument("--no-endpoint", action="store_true")
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="intra-op threads for every row and the endpoint worker (default: vCPUs); on a "
        "machine shared with other jobs, 1 avoids OpenMP threads waiting on each other",
    )
    args = parser.parse_args(argv)
    from pt2aws.inference.variants import VARIANTS

    wanted = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = sorted(set(wanted) - set(VARIANTS))
    if unknown:
        parser.error(f"unknown variant(s) {unknown}: choose from {', '.join(VARIANTS)}")
    # eager first: it is the reference for label agreement
    args.variants = ["eager"] + [v for v in wanted if v != "eager"]

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from pt2aws.env import cpu_info
    from pt2aws.inference.runtime import apply_runtime_settings

    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)  # kept by apply_runtime_settings
    runtime = apply_runtime_settings()
    load_before = os.getloadavg()
    workdir = Path(args.workdir)
    results = {
        "machine": {
            "cpu": cpu_info(),
            "platform": platform.platform(),
            "python": sys.version.split()[0],
        },
        "runtime": runtime,
        "load_avg_before": load_before,
        "models": [],
    }
    for model in [m.strip() for m in args.models.split(",") if m.strip()]:
        results["models"].append(bench_model(model, args, workdir))
    results["load_avg_after"] = os.getloadavg()

    print(
        f"\nCPU: {results['machine']['cpu']['model']}, {results['machine']['cpu']['logical_cores']} "
        f"logical cores; torch threads {runtime['torch_threads']}; load average "
        f"{load_before[0]:.1f} before, {results['load_avg_after'][0]:.1f} after"
    )
    for m in results["models"]:
        print(
            f"\n### {m['model']} ({m['n_texts']} texts; batch-1 latency over {m['latency_calls']} calls)\n"
        )
        print(m["table"])
        if m["best_variant"]:
            print(
                f"\nbest variant with >= 99% agreement: {m['best_variant']}, "
                f"{m['best_vs_pipeline']:.2f}x the pipeline's batch-32 throughput"
            )
        print(f"auto choice here: {m['auto_variant']['variant']} ({m['auto_variant']['reason']})")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(results, indent=2, default=str))
        print(f"\nwrote {args.json}")
    return results


if __name__ == "__main__":
    main()
