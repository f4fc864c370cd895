"""Tests of :mod:`pt2aws.serving.local`: our server on 127.0.0.1, and notebook 02's check."""

from __future__ import annotations

import pytest

from pt2aws.serving.local import LocalServer, ServerError, compare_with_handler

SAMPLES = ["I love my new phone!", "Worst service ever."]


def test_our_server_answers_like_the_handler_and_stops(smoke_model_dir, tmp_path):
    result = compare_with_handler(smoke_model_dir, tmp_path, SAMPLES, latency_calls=3)
    assert [a["status"] for a in result["answers"]] == [200, 200, 200, 415, 400]
    assert [a["content_type"] for a in result["answers"]][:2] == ["application/json", "text/csv"]
    assert all(a["same_as_in_process"] for a in result["answers"])  # byte for byte
    summary = result
    assert summary["matches_in_process"] is True and summary["stopped"] is True
    assert summary["calls"] == 3 and summary["p50_ms"] > 0
    log = (tmp_path / "server.log").read_text()
    assert "listening on http://127.0.0.1:" in log


def test_skipped_check_says_why(smoke_model_dir, tmp_path):
    result = compare_with_handler(smoke_model_dir, tmp_path, SAMPLES, start=False)
    assert result == {"answers": [], "skipped": "START_SERVER is False"}


def test_bad_model_and_a_stopped_server_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="model.tar.gz or a model folder"):
        LocalServer(tmp_path / "missing.tar.gz", tmp_path / "w").start()
    (tmp_path / "not-a-tar.gz").write_bytes(b"plain bytes")
    with pytest.raises(FileNotFoundError, match="not-a-tar.gz"):
        LocalServer(tmp_path / "not-a-tar.gz", tmp_path / "w").start()
    with pytest.raises(ServerError, match="not running"):
        LocalServer(tmp_path, tmp_path / "w").invoke("x")
    assert LocalServer(tmp_path, tmp_path / "w").stop() is None  # never started: nothing to stop
