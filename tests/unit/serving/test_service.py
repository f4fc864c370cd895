"""Tests of :mod:`pt2aws.serving.service`: one worker's model behind the handler functions."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")  # starlette.testclient
from pt2aws.serving import service as model_service
from pt2aws.serving.service import ModelService, Reply


@pytest.fixture(scope="module")
def loaded(smoke_model_dir):
    service = ModelService(smoke_model_dir)
    service.load()
    return service


def test_load_warms_up_and_invoke_maps_handler_errors(loaded):
    assert loaded.ready and loaded.load_s > 0
    ok = loaded.invoke(b'{"inputs": ["great", ""]}', "application/json", None)
    assert ok.status == 200 and ok.content_type == "application/json"
    assert [r.get("empty", False) for r in json.loads(ok.body)] == [False, True]
    wildcard = loaded.invoke(b'["x"]', None, "*/*")
    assert wildcard.content_type == "application/json"  # */* means the default, as the toolkit
    csv_reply = loaded.invoke(b'["x"]', None, "text/*")
    assert csv_reply.content_type == "text/csv" and csv_reply.body.startswith(b"label,score")
    bad = loaded.invoke(b"{", "application/json", None)
    assert bad == Reply(400, bad.body, "text/plain; charset=utf-8")
    assert (
        bad.body.decode().startswith("request body is not valid JSON")
        and bad.body.count(b"\n") == 1
    )


def test_default_accept_comes_from_the_service(smoke_model_dir, loaded):
    service = ModelService(smoke_model_dir, default_accept="text/csv")
    service.handler, service.model, service.ready = loaded.handler, loaded.model, True
    assert service.invoke(b'["x"]', "application/json", None).content_type == "text/csv"


def test_unexpected_handler_error_is_500_without_traceback(loaded, monkeypatch):
    monkeypatch.setenv("PT2AWS_MAX_BATCH", "zero")  # a server misconfiguration, not the client's
    reply = loaded.invoke(b'["x"]', "application/json", None)
    assert reply.status == 500
    assert reply.body.decode() == "PT2AWS_MAX_BATCH='zero': set a positive integer, e.g. 64\n"


def test_missing_model_folder_is_a_clear_load_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="--model-dir"):
        ModelService(tmp_path / "nope").load()


def test_handler_from_the_archive_wins_and_must_be_complete(tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "inference.py").write_text("def model_fn(model_dir):\n    return model_dir\n")
    with pytest.raises(AttributeError, match="input_fn, predict_fn, output_fn"):
        model_service.load_handler(tmp_path)
    assert model_service.load_handler(tmp_path / "elsewhere").__name__ == "pt2aws.serving.handler"


def test_an_archive_without_a_handler_is_an_error_when_asked(tmp_path):
    with pytest.raises(FileNotFoundError, match="code/inference.py missing"):
        model_service.load_handler(tmp_path, builtin=False)


def test_model_dir_precedence(monkeypatch):
    for name in ("PT2AWS_MODEL_DIR", "SAGEMAKER_BASE_DIR"):
        monkeypatch.delenv(name, raising=False)
    assert str(model_service.resolve_model_dir()) == "/opt/ml/model"
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", "/base")
    assert str(model_service.resolve_model_dir()) == "/base/model"
    monkeypatch.setenv("PT2AWS_MODEL_DIR", "/env")
    assert str(model_service.resolve_model_dir()) == "/env"
    assert str(model_service.resolve_model_dir("/arg")) == "/arg"


def test_model_folder_without_config_names_the_archive_layout(tmp_path):
    (tmp_path / "model").mkdir()  # e.g. model.tar.gz packed with a top folder
    with pytest.raises(FileNotFoundError, match="no config.json.*at its root"):
        ModelService(tmp_path).load()
