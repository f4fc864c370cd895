"""max_length from the data, training versus serving length, and long texts as windows."""

import ast
import sys
from pathlib import Path

import pytest

from pt2aws.data import (
    choose_max_length,
    combine_by_text,
    combine_window_scores,
    plan_windows,
    sequence_length_record,
    special_tokens,
    token_windows,
)


class WordTokenizer:
    """One token per word plus 2 special tokens, like a real tokenizer's ``__call__``."""

    def __call__(self, texts, truncation=False, verbose=True, add_special_tokens=True):
        extra = 2 if add_special_tokens else 0
        return {"input_ids": [[7] * (len(t.split()) + extra) for t in texts]}


@pytest.fixture(scope="module")
def minilm_tokenizer():
    from transformers import AutoTokenizer

    from pt2aws.modeling import minilm_path

    return AutoTokenizer.from_pretrained(minilm_path())


def test_max_length_is_a_percentile_rounded_up_to_8():
    texts = [" ".join(["w"] * (n - 2)) for n in range(3, 103)]  # 3..102 tokens, 100 texts
    default = choose_max_length(WordTokenizer(), texts, model_max_tokens=512)
    assert (default.percentile, default.percentile_tokens, default.max_length) == (99.0, 101, 104)
    choice = choose_max_length(WordTokenizer(), texts, model_max_tokens=512, percentile=95)
    assert choice.percentile_tokens == 97  # nearest rank: the 95th of 100 sorted lengths
    assert choice.max_length == 104
    assert choice.fraction_truncated == 0.0 and choice.longest == 102
    assert "95th percentile of 100 training texts is 97 tokens" in choice.describe()
    assert choice.to_dict()["max_length"] == 104


def test_max_length_is_capped_at_the_model_limit_and_reports_the_cut():
    texts = [" ".join(["w"] * (n - 2)) for n in range(3, 103)]
    choice = choose_max_length(WordTokenizer(), texts, model_max_tokens=64)
    assert choice.max_length == 64
    assert choice.fraction_truncated == pytest.approx(38 / 100)  # lengths 65..102
    assert "capped at the model's limit of 64" in choice.describe()


def test_max_length_has_a_floor_and_checks_its_inputs():
    assert choose_max_length(WordTokenizer(), ["a"] * 5, model_max_tokens=512).max_length == 8
    with pytest.raises(ValueError, match="at least one"):
        choose_max_length(WordTokenizer(), [], model_max_tokens=512)
    with pytest.raises(ValueError, match="percentile"):
        choose_max_length(WordTokenizer(), ["a"], model_max_tokens=512, percentile=0)


def test_max_length_on_a_real_tokenizer(minilm_tokenizer):
    texts = [f"tweet number {i} " + "so good " * (i % 40) for i in range(400)]
    choice = choose_max_length(minilm_tokenizer, texts, model_max_tokens=512)
    assert choice.max_length % 8 == 0 and 8 <= choice.max_length <= 512
    assert choice.fraction_truncated <= 0.05


def test_sequence_length_record_explains_both_lengths():
    record = sequence_length_record(
        train_max_length=64, model_max_tokens=512, train_lengths=[10, 50, 100, 600]
    )
    assert record["serve_max_length"] == 512 and record["train_fraction_truncated"] == 0.5
    assert "first 64 tokens" in record["note"] and "up to 512 tokens" in record["note"]
    lowered = sequence_length_record(
        train_max_length=64, model_max_tokens=512, serve_max_length=128
    )
    assert lowered["serve_max_length"] == 128 and "below the model's limit" in lowered["note"]
    assert lowered["train_fraction_truncated"] is None


def test_windows_overlap_cover_the_text_and_carry_special_tokens():
    windows = token_windows(list(range(25)), max_tokens=12, overlap=4, prefix=[-1], suffix=[-2])
    assert windows == [
        [-1, *range(0, 10), -2],
        [-1, *range(6, 16), -2],
        [-1, *range(12, 22), -2],
        [-1, *range(18, 25), -2],
    ]
    assert token_windows([1, 2, 3], max_tokens=12, overlap=4) == [[1, 2, 3]]
    assert token_windows([], max_tokens=12, overlap=4, prefix=[0], suffix=[2]) == [[0, 2]]
    with pytest.raises(ValueError, match="overlap=10"):
        token_windows([1], max_tokens=12, overlap=10, prefix=[0], suffix=[2])
    with pytest.raises(ValueError, match="no room"):
        token_windows([1], max_tokens=2, overlap=0, prefix=[0], suffix=[2])


def test_windows_match_the_hugging_face_overflow_windows(minilm_tokenizer):
    tok = minilm_tokenizer
    text = " ".join(f"word{i} is quite good or bad" for i in range(60))
    expected = tok(text, truncation=True, max_length=64, stride=16, return_overflowing_tokens=True)[
        "input_ids"
    ]
    prefix, suffix = special_tokens(tok)
    assert (prefix, suffix) == ([tok.cls_token_id], [tok.sep_token_id])
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert token_windows(ids, max_tokens=64, overlap=16, prefix=prefix, suffix=suffix) == expected


def test_special_tokens_of_a_roberta_tokenizer():
    from pt2aws.modeling import build_tiny_roberta_tokenizer

    tok = build_tiny_roberta_tokenizer([f"the film {i} was good" for i in range(50)])
    assert special_tokens(tok) == ([tok.bos_token_id], [tok.eos_token_id])


def test_plan_and_combine_windows_per_text():
    windows, owners, weights = plan_windows(
        [list(range(25)), [1, 2]], max_tokens=12, overlap=4, prefix=[0], suffix=[2]
    )
    assert owners == [0, 0, 0, 0, 1] and weights == [10, 10, 10, 7, 2]
    scores = [[0.9, 0.1], [0.8, 0.2], [0.2, 0.8], [0.1, 0.9], [0.3, 0.7]]
    combined = combine_by_text(scores, owners, 2, weights=weights)
    assert combined[0] == pytest.approx([(9 + 8 + 2 + 0.7) / 37, (1 + 2 + 8 + 6.3) / 37])
    assert combined[1] == pytest.approx([0.3, 0.7])
    assert combine_by_text(scores, owners, 2, method="max")[0] == [0.9, 0.1]


def test_combine_window_scores_methods_and_errors():
    scores = [[0.9, 0.1], [0.3, 0.7]]
    assert combine_window_scores(scores) == pytest.approx([0.6, 0.4])
    assert combine_window_scores(scores, weights=[3, 1]) == pytest.approx([0.75, 0.25])
    assert combine_window_scores(scores, method="max") == [0.9, 0.1]
    with pytest.raises(ValueError, match="no window scores"):
        combine_window_scores([])
    with pytest.raises(ValueError, match="method='vote'"):
        combine_window_scores(scores, method="vote")
    with pytest.raises(ValueError, match="1 weights for 2 windows"):
        combine_window_scores(scores, weights=[1])


def test_windows_module_needs_only_the_standard_library():
    # the serving handler runs without pt2aws: it ships windows.py as a file next to it
    import pt2aws.data.windows as windows

    tree = ast.parse(Path(windows.__file__).read_text())
    imported = {
        (node.module if isinstance(node, ast.ImportFrom) else alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported
