import pytest

from pt2aws.serving.service import Reply
from pt2aws.standins.serving_check import compare_with_handler, default_requests, same_answer

SAMPLES = ["I love my new phone!", "Worst service ever."]


def test_answers_compare_as_data_and_errors_by_first_line():
    ok = Reply(200, b'[{"label": "positive", "score": 0.9}]', "application/json")
    assert same_answer(200, b'[{"score": 0.9, "label": "positive"}]', "application/json", ok)
    assert not same_answer(200, b'[{"label": "negative", "score": 0.9}]', "application/json", ok)
    assert not same_answer(400, b"", "application/json", ok)
    err = Reply.error(415, "content type 'x' is not supported")
    assert same_answer(415, b"content type 'x' is not supported\nTraceback ...", None, err)
    assert not same_answer(415, b"something else", None, err)
    kinds = [(name, ctype) for name, _, ctype, _ in default_requests(SAMPLES)]
    assert [c for _, c in kinds] == [
        "application/json",
        "text/csv",
        "text/plain",
        "application/x-npy",
        "application/json",
    ]


def test_skipped_server_says_why(smoke_model_dir, tmp_path):
    result = compare_with_handler(smoke_model_dir, tmp_path, SAMPLES, start=False)
    assert result == {"answers": [], "summary": {"skipped": "START_ENDPOINT is False"}}


@pytest.mark.serve
def test_real_stack_answers_like_the_handler(smoke_model_dir, tmp_path):
    result = compare_with_handler(smoke_model_dir, tmp_path, SAMPLES, latency_calls=3)
    assert [a["status"] for a in result["answers"]] == [200, 200, 200, 415, 400]
    assert result["summary"]["matches_in_process"] is True
    assert result["summary"]["stopped"] is True and result["summary"]["p50_ms"] > 0
