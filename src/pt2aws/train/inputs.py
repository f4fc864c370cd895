"""What every trainer starts from: the data splits, the tokenizer and the model, tokenized once.

Shared by :mod:`pt2aws.train.loop` and the HF ``Trainer`` peer
(:mod:`pt2aws.lessons.training_ab.trainer_peer`), so both train on the same examples, weights,
attention implementation and dropout.
"""

from __future__ import annotations

import torch

from pt2aws.config import TrainConfig
from pt2aws.train.flags import choose_sdpa


def load_data_and_model(cfg: TrainConfig):
    """The splits, tokenizer and model that ``cfg`` names, prepared as every rank trains them.

    Shared with the HF ``Trainer`` peer in :mod:`pt2aws.lessons.training_ab.trainer_peer`, so
    both start from the same data, weights, attention implementation and dropout.

    ``cfg.max_length == "auto"`` is resolved here, from the tokenized training texts
    (:func:`pt2aws.data.choose_max_length`), and written back into ``cfg``; the choice is kept
    in ``data.stats["max_length_choice"]`` for the log and ``metrics.json``.

    Returns:
        ``(data, tokenizer, model, sdpa_choice)``: a :class:`pt2aws.data.SentimentData`, the
        tokenizer, the model on CPU, and the :class:`pt2aws.train.flags.Choice` made for SDPA.

    Raises:
        pt2aws.data.DataError, pt2aws.data.DataFileNotFoundError: data the user must fix.
    """
    from pt2aws.data import choose_max_length, load_sentiment_data
    from pt2aws.modeling import load_tokenizer_and_model, model_max_tokens

    data = load_sentiment_data(
        cfg.dataset,
        **cfg.reader_options(),
        label_map=cfg.label_map,
        three_class=cfg.three_class,
        max_train_samples=cfg.max_train_samples,
        max_eval_samples=cfg.max_eval_samples,
        seed=cfg.seed,
    )
    auto = cfg.max_length == "auto"
    train_texts = data.splits["train"]["text"]
    tokenizer, model = load_tokenizer_and_model(
        cfg.model_name_or_path,
        data.label_names,
        train_texts=train_texts,
        max_length=None if auto else cfg.max_length,
    )
    if auto:
        choice = choose_max_length(
            tokenizer, train_texts, model_max_tokens=model_max_tokens(model.config, tokenizer)
        )
        cfg.max_length = choice.max_length
        data.stats["max_length_choice"] = choice.to_dict() | {"describe": choice.describe()}
    sdpa = choose_sdpa(model, cfg.attn_implementation)
    if cfg.dropout is not None:
        for module in model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = cfg.dropout
    return data, tokenizer, model, sdpa


def tokenize_splits(data, tokenizer, max_length: int) -> dict[str, list[dict]]:
    """Tokenize every split once, truncated to ``max_length`` tokens and not padded.

    Args:
        data: a :class:`pt2aws.data.SentimentData`.
        tokenizer: the model's tokenizer.
        max_length: longest sequence in tokens.

    Returns:
        ``{split: [{"input_ids", "attention_mask", "labels"}, ...]}`` (lists of ints); padding
        happens per batch in the collator.
    """
    encoded = data.splits.map(
        lambda batch: tokenizer(batch["text"], truncation=True, max_length=max_length),
        batched=True,
        remove_columns=["text"],
    ).rename_column("label", "labels")
    return {split: encoded[split].to_list() for split in encoded}
