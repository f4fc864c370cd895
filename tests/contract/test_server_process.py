"""The project's server as SageMaker runs it (``serve`` in its own process group): workers and
their runtime settings, health under load, a model that fails to load, SIGTERM."""

from __future__ import annotations

import json
import platform
import threading
import time

import pytest
from conftest import ServerProcess, wait_healthy
from contract_cases import send

from pt2aws.serving import server

#: A handler (as code/inference.py in a model archive) that reports what its worker sees, in the
#: log at load time and in each answer.
PROBE_HANDLER = """
import json, os, time

NAMES = ("OMP_NUM_THREADS", "LRU_CACHE_CAPACITY", "THP_MEM_ALLOC_ENABLE",
         "DNNL_DEFAULT_FPMATH_MODE", "TOKENIZERS_PARALLELISM")

def _seen(model):
    return {"pid": os.getpid(), **model, **{n: os.environ.get(n) for n in NAMES}}

def model_fn(model_dir):
    import torch
    model = {"torch_threads": torch.get_num_threads()}
    print("probe:" + json.dumps(_seen(model)), flush=True)
    return model

def input_fn(body, content_type):
    return body

def predict_fn(data, model):
    if data == b"slow":
        time.sleep(3)
    return _seen(model)

def output_fn(prediction, accept):
    return json.dumps(prediction)
"""


@pytest.fixture(scope="module")
def probe_model(tmp_path_factory):
    model = tmp_path_factory.mktemp("probe") / "model"
    (model / "code").mkdir(parents=True)
    (model / "code" / "inference.py").write_text(PROBE_HANDLER)
    (model / "code" / "requirements.txt").write_text("not-a-real-package==1.0\n")
    return model


def test_workers_get_the_runtime_settings_and_the_archive_handler(probe_model, tmp_path):
    log = tmp_path / "server.log"
    with_two = ServerProcess(probe_model, log, workers=2, port_from_env=True).start()
    try:
        deadline = time.monotonic() + 120
        while log.read_text().count("model loaded and warmed up") < 2:
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        answer = send(with_two.port, "POST", "/invocations", b"x", "text/plain", None)
        assert answer.status == 200 and json.loads(answer.body)["LRU_CACHE_CAPACITY"] == "1024"
    finally:
        assert with_two.stop() == 0  # SIGTERM: clean shutdown
    text = log.read_text()
    seen = [json.loads(ln.split("probe:", 1)[1]) for ln in text.splitlines() if "probe:" in ln]
    assert len({s["pid"] for s in seen}) == 2, "expected 2 worker processes"
    threads = str(max(1, server.vcpus() // 2))
    for worker in seen:
        assert worker["OMP_NUM_THREADS"] == threads
        assert worker["torch_threads"] == int(threads)
        assert worker["LRU_CACHE_CAPACITY"] == "1024"
        assert worker["THP_MEM_ALLOC_ENABLE"] == "1"
        assert worker["TOKENIZERS_PARALLELISM"] == "false"
        if platform.machine() == "x86_64":  # BF16 fast math only on aarch64 with bf16
            assert worker["DNNL_DEFAULT_FPMATH_MODE"] is None
    assert "not-a-real-package==1.0" in text  # unmet requirements: logged, never installed
    assert "pip install" not in text


def test_ping_answers_fast_while_a_request_is_running(probe_model, tmp_path):
    one = ServerProcess(probe_model, tmp_path / "server.log", workers=1).start()
    try:
        slow = threading.Thread(
            target=send, args=(one.port, "POST", "/invocations", b"slow", "text/plain", None)
        )
        slow.start()
        time.sleep(0.5)
        t0 = time.perf_counter()
        assert send(one.port, "GET", "/ping", None, None, None, timeout_s=2).status == 200
        assert time.perf_counter() - t0 < 1.0  # SageMaker's /ping timeout is 2 s
        slow.join()
    finally:
        one.stop()


def test_a_model_that_fails_to_load_never_reports_healthy(tmp_path):
    empty = tmp_path / "model"  # a model.tar.gz without config.json or weights
    empty.mkdir()
    log = tmp_path / "server.log"
    broken = ServerProcess(empty, log, workers=2).start(wait=False)
    statuses = set()
    deadline = time.monotonic() + 180
    while broken.proc.poll() is None and time.monotonic() < deadline:
        try:
            statuses.add(send(broken.port, "GET", "/ping", None, None, None, timeout_s=2).status)
        except OSError:
            pass
        time.sleep(0.1)
    code = broken.stop()
    assert code == server.STARTUP_FAILURE, log.read_text()[-2000:]
    assert 200 not in statuses
    text = log.read_text()
    assert "the model failed to load" in text and "config.json" in text


def test_wait_healthy_reports_an_exited_server(tmp_path):
    missing = ServerProcess(tmp_path / "missing", tmp_path / "server.log").start(wait=False)
    with pytest.raises(RuntimeError, match="exited with 2"):
        wait_healthy(missing.port, missing.proc, missing.log, 60)
    assert "does not exist" in missing.log.read_text()
    missing.stop()
