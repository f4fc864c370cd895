"""Tests of :mod:`pt2aws.data.lengths`: the max_length choice and the length record."""

import pytest

from pt2aws.data import (
    choose_max_length,
    sequence_length_record,
)


class WordTokenizer:
    """One token per word plus 2 special tokens, like a real tokenizer's ``__call__``."""

    def __call__(self, texts, truncation=False, verbose=True, add_special_tokens=True):
        extra = 2 if add_special_tokens else 0
        return {"input_ids": [[7] * (len(t.split()) + extra) for t in texts]}


def test_max_length_is_a_percentile_rounded_up_to_8():
    texts = [" ".join(["w"] * (n - 2)) for n in range(3, 103)]  # 3..102 tokens, 100 texts
    choice = choose_max_length(WordTokenizer(), texts, model_max_tokens=512)
    assert choice["max_length"] == 104 and choice["fraction_truncated"] == 0.0
    # nearest rank: the 99th of 100 sorted lengths
    assert "99th percentile of 100 training texts is 101 tokens" in choice["description"]
    assert "(the longest has 102)" in choice["description"]


def test_max_length_is_capped_at_the_model_limit_and_reports_the_cut():
    texts = [" ".join(["w"] * (n - 2)) for n in range(3, 103)]
    choice = choose_max_length(WordTokenizer(), texts, model_max_tokens=64)
    assert choice["max_length"] == 64
    assert choice["fraction_truncated"] == pytest.approx(38 / 100)  # lengths 65..102
    assert "capped at the model's limit of 64" in choice["description"]


def test_max_length_has_a_floor_and_checks_its_inputs():
    assert choose_max_length(WordTokenizer(), ["a"] * 5, model_max_tokens=512)["max_length"] == 8
    with pytest.raises(ValueError, match="at least one"):
        choose_max_length(WordTokenizer(), [], model_max_tokens=512)


def test_max_length_on_a_real_tokenizer(minilm_tokenizer):
    texts = [f"tweet number {i} " + "so good " * (i % 40) for i in range(400)]
    choice = choose_max_length(minilm_tokenizer, texts, model_max_tokens=512)
    assert choice["max_length"] % 8 == 0 and 8 <= choice["max_length"] <= 512
    assert choice["fraction_truncated"] <= 0.05


def test_sequence_length_record_explains_both_lengths():
    record = sequence_length_record(
        train_max_length=64, model_max_tokens=512, train_lengths=[10, 50, 100, 600]
    )
    assert record["serve_max_length"] == 512 and record["train_fraction_truncated"] == 0.5
    assert "first 64 tokens" in record["note"] and "up to 512 tokens" in record["note"]
    assert "between 64 and 512 tokens are read whole" in record["note"]
    whole = sequence_length_record(train_max_length=512, model_max_tokens=512, train_lengths=[9])
    assert whole["train_fraction_truncated"] == 0.0 and "read whole" not in whole["note"]
