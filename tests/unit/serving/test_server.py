"""Tests of :mod:`pt2aws.serving.server`: one worker's model behind the handler, and the HTTP
side of the serving image."""

from __future__ import annotations

import json
import os
import threading

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")  # starlette.testclient
from starlette.testclient import TestClient

from pt2aws.serving import server
from pt2aws.serving.server import HEALTHY_BODY, ModelService, Reply, create_app


class GatedService(ModelService):
    """A service whose load waits for ``gate`` and then succeeds or raises ``fail``."""

    def __init__(self, fail: BaseException | None = None):
        super().__init__("unused")
        self.gate = threading.Event()
        self.fail = fail
        self.calls: list[tuple] = []

    def load(self) -> None:
        self.gate.wait(10)
        if self.fail is not None:
            raise self.fail
        self.ready = True

    def invoke(self, body, content_type, accept) -> Reply:
        self.calls.append((body, content_type, accept))
        return Reply(200, b"[]", "application/json")


def _wait_for(predicate, timeout_s: float = 10.0) -> None:
    done = threading.Event()
    for _ in range(int(timeout_s / 0.01)):
        if predicate():
            return
        done.wait(0.01)
    raise AssertionError("condition not reached")


def test_ping_is_503_while_loading_and_200_after():
    service = GatedService()
    with TestClient(create_app(service, load_wait_s=0.2)) as client:
        loading = client.get("/ping")
        assert loading.status_code == 503 and loading.json() == {"status": "Loading"}
        early = client.post("/invocations", content=b'{"inputs": "x"}')
        assert early.status_code == 503 and "still loading" in early.text
        service.gate.set()
        _wait_for(lambda: service.ready)
        healthy = client.get("/ping")
        assert healthy.status_code == 200 and healthy.content == HEALTHY_BODY
        assert healthy.headers["content-type"] == "application/json"
        assert client.head("/ping").status_code == 200
        assert client.post("/invocations", content=b"x").status_code == 200


def test_invocation_waits_for_a_model_that_finishes_loading():
    service = GatedService()
    with TestClient(create_app(service, load_wait_s=10)) as client:
        threading.Timer(0.3, service.gate.set).start()
        reply = client.post("/invocations", content=b"x", headers={"content-type": "text/plain"})
        assert reply.status_code == 200
        assert service.calls == [(b"x", "text/plain", "*/*")]  # httpx sends Accept: */*


def test_failed_load_is_never_healthy_and_calls_the_hook():
    failures = []
    service = GatedService(fail=OSError("no config.json in /opt/ml/model"))
    service.gate.set()
    app = create_app(service, on_load_failure=failures.append, load_wait_s=5)
    with TestClient(app) as client:
        _wait_for(lambda: failures)
        ping = client.get("/ping")
        assert ping.status_code == 503
        assert ping.json()["status"] == "Unhealthy" and "no config.json" in ping.json()["error"]
        invocation = client.post("/invocations", content=b"x")
        assert invocation.status_code == 503 and "failed to load" in invocation.text
    assert len(failures) == 1 and isinstance(failures[0], OSError)


def test_body_over_the_limit_is_413_without_reaching_the_handler():
    service = GatedService()
    service.gate.set()
    with TestClient(create_app(service, max_request_bytes=1000)) as client:
        _wait_for(lambda: service.ready)
        reply = client.post("/invocations", content=b"x" * 1001)
        assert reply.status_code == 413 and "the limit is 1000 bytes" in reply.text
        assert reply.headers["content-type"] == "text/plain; charset=utf-8"
        assert client.post("/invocations", content=b"x" * 1000).status_code == 200
    assert len(service.calls) == 1


def test_wrong_method_and_path_are_4xx():
    service = GatedService()
    service.gate.set()
    with TestClient(create_app(service)) as client:
        assert client.get("/invocations").status_code == 405
        assert client.get("/models").status_code == 404


def test_payload_limit_setting(monkeypatch):
    monkeypatch.delenv("SAGEMAKER_MAX_PAYLOAD_IN_MB", raising=False)
    assert server.max_request_bytes() == 6_553_500
    monkeypatch.setenv("SAGEMAKER_MAX_PAYLOAD_IN_MB", "2")
    assert server.max_request_bytes() == 2 * 1024 * 1024
    monkeypatch.setenv("SAGEMAKER_MAX_PAYLOAD_IN_MB", "lots")
    with pytest.raises(ValueError, match="SAGEMAKER_MAX_PAYLOAD_IN_MB"):
        server.max_request_bytes()


def test_main_refuses_other_commands_and_bad_settings(capsys, tmp_path, monkeypatch):
    assert server.main(["train"]) == 2
    assert "`<image> serve`" in capsys.readouterr().err
    assert server.main(["serve", "--model-dir", str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err
    for workers in ("many", "0"):
        monkeypatch.setenv("SAGEMAKER_MODEL_SERVER_WORKERS", workers)
        assert server.main(["serve", "--model-dir", str(tmp_path)]) == 2
        assert f"SAGEMAKER_MODEL_SERVER_WORKERS='{workers}'" in capsys.readouterr().err


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


def test_handler_from_the_archive_wins_and_must_be_complete(tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "inference.py").write_text("def model_fn(model_dir):\n    return model_dir\n")
    with pytest.raises(AttributeError, match="input_fn, predict_fn, output_fn"):
        server.load_handler(tmp_path)
    assert server.load_handler(tmp_path / "elsewhere").__name__ == "pt2aws.serving.handler"


def test_an_archive_without_a_handler_is_an_error_when_asked(tmp_path):
    with pytest.raises(FileNotFoundError, match="code/inference.py missing"):
        server.load_handler(tmp_path, builtin=False)


def test_model_dir_precedence(monkeypatch, capsys):
    for name in ("PT2AWS_MODEL_DIR", "SAGEMAKER_BASE_DIR", "SAGEMAKER_MODEL_SERVER_WORKERS"):
        monkeypatch.delenv(name, raising=False)

    def refused(*flags) -> str:
        assert server.main(["serve", *flags]) == 2
        return capsys.readouterr().err

    if not os.path.isdir("/opt/ml/model"):  # the default, outside SageMaker
        assert "model folder /opt/ml/model does not exist" in refused()
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", "/no-base")
    assert "model folder /no-base/model does not exist" in refused()
    monkeypatch.setenv("PT2AWS_MODEL_DIR", "/no-env")
    assert "model folder /no-env does not exist" in refused()
    assert "model folder /no-arg does not exist" in refused("--model-dir", "/no-arg")


def test_model_folder_without_config_names_the_archive_layout(tmp_path):
    (tmp_path / "model").mkdir()  # e.g. model.tar.gz packed with a top folder
    with pytest.raises(FileNotFoundError, match="no config.json.*at its root"):
        ModelService(tmp_path).load()
