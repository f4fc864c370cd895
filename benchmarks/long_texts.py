"""Long texts: plain truncation versus overlapping windows, accuracy on texts over the limit.

Takes a finished training run, rebuilds its test split (all of it, not the run's evaluation cap),
keeps the texts longer than the model's limit (512 tokens for MiniLM and RoBERTa), or builds
such texts by joining same-label test texts (``--join``, for short-text data such as tweets),
and classifies each text five ways:

* ``truncate@train``: its first ``max_length`` tokens, the length the run trained with (what a
  tokenizer saved with the training length made the Predictor and the endpoint read);
* ``truncate@limit``: its first 512 tokens (plain truncation at the model's limit);
* ``windows-mean`` / ``windows-max``: 512-token windows overlapping by ``--overlap`` tokens
  (the fast tokenizer's ``return_overflowing_tokens`` + ``stride``), probabilities averaged
  weighted by text tokens (what the handler's ``PT2AWS_LONG_TEXTS=windows`` does:
  :func:`pt2aws.serving.handler.classify`) or taken from the most confident window;
* ``windows@train-mean``: windows of the training length, averaged (when it is below the limit).

Prints accuracy per way and, for each way against ``truncate@limit``, the paired counts (texts
one gets right and the other wrong), so a difference can be told from noise. Reported, never
asserted.

    python -m pt2aws.train --profile local --dataset imdb.csv --max_length 128 \\
        --max_train_samples 2000 --output_dir runs/long/train
    python benchmarks/long_texts.py --train-dir runs/long/train --json runs/long/long_texts.json
    python benchmarks/long_texts.py --train-dir runs/x/train --join 600   # tweets joined to 600+

Results: ``benchmarks/README.md``.
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


def _windows(tokenizer, texts, max_length: int, stride: int):
    """Each text's token windows (the fast tokenizer's overflow, as the handler reads them),
    the text each belongs to, and its text tokens (its weight in the mean)."""
    enc = tokenizer(texts, truncation=True, max_length=max_length, stride=stride,
                    return_overflowing_tokens=True, verbose=False)  # fmt: skip
    specials = tokenizer.num_special_tokens_to_add()
    weights = [max(1, len(ids) - specials) for ids in enc["input_ids"]]
    return enc["input_ids"], list(enc["overflow_to_sample_mapping"]), weights


def _probs(model, tokenizer, windows: list[list[int]], batch_size: int) -> list[list[float]]:
    """Class probabilities per window (token id lists), batched by length."""
    import torch

    order = sorted(range(len(windows)), key=lambda i: len(windows[i]))
    out: list[list[float]] = [[] for _ in windows]
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            enc = tokenizer.pad({"input_ids": [windows[i] for i in idx]}, return_tensors="pt")
            for i, p in zip(idx, model(**enc).logits.float().softmax(-1).tolist()):
                out[i] = p
    return out


def _combine(probs, owners, weights, n: int, method: str) -> list[int]:
    """Per text, the label of its windows' weighted mean (``mean``) or most confident (``max``)."""
    per_text: list[list[tuple[float, list[float]]]] = [[] for _ in range(n)]
    for p, o, w in zip(probs, owners, weights):
        per_text[o].append((w, p))
    labels = []
    for rows in per_text:
        if method == "max":
            scores = max((p for _, p in rows), key=max)
        else:
            total = sum(w for w, _ in rows)
            scores = [sum(w * p[k] for w, p in rows) / total for k in range(len(rows[0][1]))]
        labels.append(max(range(len(scores)), key=scores.__getitem__))
    return labels


def evaluate(model, tokenizer, texts, labels, *, train_length, limit, overlap, batch_size):
    from pt2aws.serving.handler import classify

    plans = {"truncate@limit": (limit, None), "windows": (limit, overlap)}
    if train_length < limit:  # a model trained on shorter texts than it accepts
        plans["truncate@train"] = (train_length, None)
        plans["windows@train"] = (train_length, train_length // 4)
    predictions, seconds, num_windows = {}, {}, 0
    for name, (length, stride) in plans.items():
        t0 = time.perf_counter()
        windows, owners, weights = _windows(tokenizer, texts, length, stride or 0)
        if stride is None:  # the first window of each text
            firsts = [k for k, o in enumerate(owners) if k == 0 or owners[k - 1] != o]
            windows, owners, weights = (
                [windows[k] for k in firsts],
                list(range(len(texts))),
                [1] * len(texts),
            )
        probs = _probs(model, tokenizer, windows, batch_size)
        for method in ("mean", "max") if name == "windows" else ("mean",):
            key = name if stride is None else f"{name}-{method}"
            predictions[key] = _combine(probs, owners, weights, len(texts), method)
        seconds[name] = round(time.perf_counter() - t0, 1)
        num_windows = len(windows) if name == "windows" else num_windows
    # the handler's own path reads the same windows: its labels are windows-mean's
    served = classify(texts, tokenizer, model, limit, stride=overlap, batch_size=batch_size)[0]
    agree = sum(
        int(a == b) for a, b in zip(served.argmax(-1).tolist(), predictions["windows-mean"])
    )
    print(f"the handler's classify agrees with windows-mean on {agree}/{len(texts)} texts")
    return predictions, seconds, num_windows


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
    from pt2aws.serving.handler import max_tokens

    model_dir = args.train_dir / "model"
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    limit = max_tokens(model.config, tokenizer)
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
