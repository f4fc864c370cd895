"""The real SageMaker PyTorch serving stack (toolkit + TorchServe + Java) on 127.0.0.1.

One server for the session (tests/conftest.py ``torchserve``; about 5-20 s to start on 2 loaded
cores), shared with the serving contract's reference; the tests that stop or break a server
start their own. Every request is sent over HTTP and run through the handler in-process; status,
body and content type must match.
"""

from __future__ import annotations

import json
import shutil
import socket

import pytest

from pt2aws.processes import process_group_alive
from pt2aws.serving import handler
from pt2aws.standins.torchserve import LocalEndpoint, LocalEndpointError

pytestmark = pytest.mark.serve


LONG = "terrible " * 400


# (body, content type, accept): each documented input form, each Accept, each error
REQUESTS = [
    ('{"inputs": "What a wonderful phone!"}', "application/json", "application/json"),
    (
        '{"inputs": ["great", "   ", "awful service"]}',
        "application/json; charset=utf-8",
        "text/csv",
    ),
    ('["a bare", "list"]', "application/json", "application/json"),
    ('"a bare string"', "application/json", "*/*"),
    ('text\nfirst row\n"second, with comma"\n', "text/csv", "text/csv"),
    ("no header, just one row\n", "text/csv", "application/json"),
    ("the whole body is one text", "text/plain", "text/*"),
    ("caf\u00e9 cr\u00e8me".encode("latin-1"), "text/plain; charset=latin-1", "application/json"),
    (json.dumps({"inputs": ["ok", LONG]}), "application/json", "application/json"),
    ('{"inputs": []}', "application/json", "application/json"),
    # errors: 415, 400 (bad UTF-8 in JSON and CSV, bad JSON, wrong shape), 413, 406
    ("x", "application/x-npy", "application/json"),
    (b'{"inputs": "\xff\xfe"}', "application/json", "application/json"),
    (b"\xff\xfe,x", "text/csv", "application/json"),
    ("{not json", "application/json", "application/json"),
    ('{"text": "x"}', "application/json", "application/json"),
    (json.dumps({"inputs": ["x"] * (handler.MAX_BATCH + 1)}), "application/json", "*/*"),
    ('{"inputs": "x"}', "application/json", "application/xml"),
]


@pytest.fixture
def endpoint(torchserve):
    """The session's one serving stack (tests/conftest.py), serving the packaged smoke model;
    these tests only send it requests."""
    return torchserve


@pytest.fixture(scope="module")
def in_process(smoke_archive, tmp_path_factory):
    """The handler loaded from the archive the server extracted, as the toolkit loads it."""
    import tarfile

    from pt2aws.serving.service import load_handler

    root = tmp_path_factory.mktemp("unpacked")
    with tarfile.open(smoke_archive) as tar:
        tar.extractall(root, filter="data")
    module = load_handler(root, builtin=False)
    return module, module.model_fn(str(root))


def _in_process(module, model, body, content_type, accept) -> tuple[int, bytes, str]:
    """What the toolkit would answer, computed without TorchServe (status, body, type)."""
    try:
        texts = module.input_fn(body, content_type)
        out = module.output_fn(module.predict_fn(texts, model), accept)
    except module.GenericInferenceToolkitError as err:
        return err.status_code, err.message.encode(), ""
    body, media = out if isinstance(out, tuple) else (out, accept)
    return 200, body.encode(), media


def test_ping_url_and_ports(endpoint):
    assert endpoint.running and endpoint.ping()
    assert endpoint.url == f"http://127.0.0.1:{endpoint.port}"
    assert endpoint.workers_ready()
    assert (endpoint.workdir / "model" / "code" / "inference.py").is_file()
    props = (endpoint.workdir / "ts.properties").read_text()
    assert "0.0.0.0" not in props and f"127.0.0.1:{endpoint.port}" in props
    assert (endpoint.workdir / "logs" / "ts_log.log").is_file()


@pytest.mark.parametrize(("body", "content_type", "accept"), REQUESTS)
def test_http_equals_in_process(endpoint, in_process, body, content_type, accept):
    status, got, got_type = endpoint.invoke(body, content_type, accept)
    want_status, want, want_type = _in_process(*in_process, body, content_type, accept)
    assert status == want_status, got[:300]
    if status == 200:
        assert got_type.split(";")[0] == want_type
        if want_type == "application/json":
            got_json, want_json = json.loads(got), json.loads(want)
            assert [g.get("label") for g in got_json] == [w.get("label") for w in want_json]
            for g, w in zip(got_json, want_json):
                assert g.keys() == w.keys()
                if w["score"] is not None:
                    assert g["score"] == pytest.approx(w["score"], abs=1e-5)
        else:
            assert got == want
    else:  # a 4xx whose first line is the handler's message, never a 500
        assert 400 <= status < 500
        assert got.decode().splitlines()[0] == want.decode()


def test_http_flags_empty_and_truncated(endpoint):
    status, body, _ = endpoint.invoke(json.dumps({"inputs": ["good", "", LONG]}))
    out = json.loads(body)
    assert status == 200 and len(out) == 3
    assert out[1] == {"label": None, "score": None, "empty": True}
    assert out[2]["truncated"] is True and out[0].get("truncated") is None


def test_bad_model_path_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="model.tar.gz"):
        LocalEndpoint(tmp_path / "missing.tar.gz", tmp_path / "w").start()
    (tmp_path / "not-a-tar.gz").write_bytes(b"plain bytes")
    with pytest.raises(ValueError, match="not a tar archive"):
        LocalEndpoint(tmp_path / "not-a-tar.gz", tmp_path / "w").start()


def test_missing_java_is_reported_before_starting(tmp_path, monkeypatch, smoke_model_dir):
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda n, *a, **k: None if n == "java" else real_which(n))
    with pytest.raises(LocalEndpointError, match="Java"):
        LocalEndpoint(smoke_model_dir, tmp_path / "w").start()


def test_port_in_use_fails_with_the_log_tail(smoke_model_dir, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        ep = LocalEndpoint(smoke_model_dir, tmp_path / "w", port=port, startup_timeout_s=90)
        with pytest.raises(LocalEndpointError, match="server.log") as err:
            ep.start()
    assert "exited with status" in str(err.value)
    assert not ep.running


def test_a_picked_port_taken_before_the_bind_is_retried_on_fresh_ports(
    smoke_model_dir, tmp_path, monkeypatch
):
    import pt2aws.standins.torchserve as local

    real = local.free_port
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        picks = iter([port])  # the first pick is a port another process holds by now
        monkeypatch.setattr(local, "free_port", lambda: next(picks, None) or real())
        with LocalEndpoint(smoke_model_dir, tmp_path / "w", startup_timeout_s=120) as ep:
            assert ep.port != port and ep.ping()
            assert ep.invoke('{"inputs": ["good"]}')[0] == 200  # a worker has answered
            _stop_ends_every_process(ep)
    log = (tmp_path / "w" / "server.log").read_text(errors="replace")
    assert local._port_taken(log)  # the first attempt failed on the taken port, then retried


def _stop_ends_every_process(endpoint):
    """stop() leaves no launcher, JVM or worker behind, and frees the port (checked on the
    endpoint the port test started: the session's shared one must keep running)."""
    pgid = endpoint._proc.pid
    endpoint.stop()
    assert not endpoint.running and not endpoint.ping()
    assert not process_group_alive(pgid)  # no live (non-zombie) process left in its group
    with pytest.raises(LocalEndpointError, match="not running"):
        endpoint.invoke("x", "text/plain")
    endpoint.stop()  # twice is fine
    with socket.socket() as s:  # the inference port is free again
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", endpoint.port))
