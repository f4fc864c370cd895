"""Tests of :mod:`pt2aws.serving.server`: the serving image's HTTP side."""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")  # starlette.testclient
from starlette.testclient import TestClient

from pt2aws.serving import server
from pt2aws.serving.server import HEALTHY_BODY, create_app
from pt2aws.serving.service import ModelService, Reply


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
        assert reply.status_code == 413 and "limit is 1000 bytes" in reply.text
        assert reply.headers["content-type"] == "text/plain; charset=utf-8"
        assert client.post("/invocations", content=b"x" * 1000).status_code == 200
    assert len(service.calls) == 1


def test_wrong_method_and_path_are_4xx():
    service = GatedService()
    service.gate.set()
    with TestClient(create_app(service)) as client:
        assert client.get("/invocations").status_code == 405
        assert client.get("/models").status_code == 404


def test_worker_count_and_payload_limit_settings(monkeypatch):
    monkeypatch.delenv("SAGEMAKER_MODEL_SERVER_WORKERS", raising=False)
    assert server.worker_count() == server.vcpus()
    monkeypatch.setenv("SAGEMAKER_MODEL_SERVER_WORKERS", "3")
    assert server.worker_count() == 3 and server.worker_count(5) == 5
    monkeypatch.setenv("SAGEMAKER_MODEL_SERVER_WORKERS", "0")
    with pytest.raises(ValueError, match="SAGEMAKER_MODEL_SERVER_WORKERS='0'"):
        server.worker_count()
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
    monkeypatch.setenv("SAGEMAKER_MODEL_SERVER_WORKERS", "many")
    assert server.main(["serve", "--model-dir", str(tmp_path)]) == 2
    assert "SAGEMAKER_MODEL_SERVER_WORKERS" in capsys.readouterr().err
