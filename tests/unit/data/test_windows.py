"""Tests of :mod:`pt2aws.data.windows`: long texts as overlapping windows."""

import ast
import sys
from pathlib import Path

import pytest

from pt2aws.data.windows import (
    combine_by_text,
    combine_window_scores,
    plan_windows,
    special_tokens,
    token_windows,
)


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
