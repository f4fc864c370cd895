"""The A/B training benchmark: each optimization alone, all together, and HF ``Trainer`` as the peer.

Every variant trains the same model on the same data for the same number of steps with the same
batch size, sequence cap and seed, each in a **fresh subprocess** (``python -m pt2aws.train …``,
or :func:`trainer_main` for HF ``Trainer``), so compile caches in memory, allocator state and
peak-memory counters never leak from one variant into the next. Repeats are interleaved
(variant 1..N, then again 1..N) so a slow patch of a shared machine hits every variant alike,
and the table reports the **median** per variant.

Measured per run (all from the subprocess's own ``metrics.json`` / log):

* steady-state ``samples/s`` and ``tokens/s`` (real, non-pad tokens) over the steps after the
  first ``warmup_steps``: compile and allocator warm-up are excluded and reported separately as
  ``warmup_s`` (time of the first ``warmup_steps`` optimizer steps);
* ``peak_mem``: peak CUDA memory allocated on GPU, peak resident set size (RSS) on CPU;
* ``final_loss``: mean training loss (cross-entropy, nats) over the last 10 optimizer steps,
  computed the same way for every variant from its per-step log.

Variants (flags of :mod:`pt2aws.train`; the seed blog's recipe is compile + bf16 + fused AdamW,
claimed 1.42x on 8 A100 for RoBERTa fine-tuning; that figure is the blog's, not ours):

==================  =========================================================================
baseline            eager, fp32, ``AdamW(foreach=False)`` (``--bf16 off --torch_compile off
                    --fused_adamw off``)
+compile            ``torch.compile`` only
+bf16               bf16 autocast only
+fused              fused AdamW only
recipe              all three
recipe+bucketing    all three + length-bucketed batches (``--length_bucketing true``), when the
                    installed ``pt2aws.train`` has that flag
Trainer baseline    ``transformers.Trainer``, ``optim="adamw_torch"`` (torch picks foreach on
                    CUDA, the for-loop on CPU), no compile, fp32
Trainer recipe      ``Trainer`` with ``torch_compile=True, bf16=True, optim="adamw_torch_fused"``
==================  =========================================================================

The Trainer runs see the same examples in the same order as ``pt2aws.train`` (its seeded
``epoch_batches``) with the same init and dropout stream, so at equal flags their per-step losses
agree (tested). Also ``average_tokens_across_devices=False`` (transformers 5 otherwise scales the
logged loss by the world size) and ``use_cpu=True`` on CPU (required for bf16 there).
"""

from __future__ import annotations

import json
from pathlib import Path

#: Model sizes the benchmark can build locally with random weights (RoBERTa architecture).
#: ``roberta-base`` matches FacebookAI/roberta-base's config (125 M parameters with its
#: 50,265-token vocabulary; Liu et al. 2019, "RoBERTa", Table/Appendix: 12 layers, hidden 768,
#: 12 heads, FFN 3072).
MODEL_SIZES = {
    "small-roberta": dict(
        hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024
    ),
    "roberta-base": dict(
        hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072
    ),
}


ROBERTA_BASE_VOCAB = 50265


def build_random_roberta(
    kind: str, out_dir: str | Path, texts: list[str], *, max_length: int = 128
) -> Path:
    """Save a randomly initialised RoBERTa of size ``kind`` plus a BPE tokenizer to ``out_dir``.

    For speed measurements only: the weights are random, so accuracy means nothing, but the
    compute per step is that of the real architecture. The tokenizer is a byte-level BPE trained
    on ``texts`` (no download); for ``roberta-base`` the embedding keeps the real 50,265 rows.

    Args:
        kind: a key of :data:`MODEL_SIZES`.
        out_dir: folder to write (``config.json``, ``model.safetensors``, tokenizer files).
        texts: training texts for the tokenizer.
        max_length: the longest sequence, tokens.

    Returns:
        ``out_dir``, loadable with ``--model_name_or_path out_dir``.

    Raises:
        ValueError: unknown ``kind``.
    """
    from transformers import RobertaConfig, RobertaForSequenceClassification

    from pt2aws.modeling import build_tiny_roberta_tokenizer

    if kind not in MODEL_SIZES:
        raise ValueError(f"unknown model size {kind!r}: choose one of {', '.join(MODEL_SIZES)}")
    out = Path(out_dir)
    if (out / "config.json").is_file():
        return out
    vocab = 8000 if kind == "small-roberta" else ROBERTA_BASE_VOCAB
    tokenizer = build_tiny_roberta_tokenizer(texts, vocab_size=vocab, max_length=max_length)
    config = RobertaConfig(
        vocab_size=max(len(tokenizer), vocab if kind == "roberta-base" else len(tokenizer)),
        max_position_embeddings=max_length + 2,
        type_vocab_size=1,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        num_labels=2,
        id2label={0: "negative", 1: "positive"},
        label2id={"negative": 0, "positive": 1},
        problem_type="single_label_classification",
        **MODEL_SIZES[kind],
    )
    model = RobertaForSequenceClassification(config)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def synthetic_sentiment_file(path: str | Path, n: int = 4000, seed: int = 0) -> Path:
    """A deterministic labelled JSONL (``text``, ``label``) for machines without the tweet data.

    Speed only: sentences of 5-40 random words with a sentiment word that sets the label.
    """
    import random

    rng = random.Random(seed)
    words = "the a movie film plot actor day food service place time music story show".split()
    cues = {"positive": ["great", "loved", "wonderful"], "negative": ["awful", "hated", "boring"]}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for i in range(n):
            label = "positive" if i % 2 else "negative"
            body = [rng.choice(words) for _ in range(rng.randint(5, 40))]
            body.insert(rng.randrange(len(body)), rng.choice(cues[label]))
            f.write(json.dumps({"text": " ".join(body), "label": label}) + "\n")
    return path
