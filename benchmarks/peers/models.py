"""Models and data for speed measurements on machines without the real ones: a randomly
initialised RoBERTa of a chosen size (offline, with a locally trained tokenizer) and synthetic
labelled sentences.

Used by ``benchmarks/train_speed.py`` and ``benchmarks/gpu_check.sh``; the weights are random, so
only the speed figures mean anything.
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
