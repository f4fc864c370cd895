"""The project's server as SageMaker runs it (``serve`` in its own process group): workers and
their runtime settings, health under load, a model that fails to load, SIGTERM."""

from __future__ import annotations

import json
import platform
import threading
import time

import pytest
from contract_cases import send

from pt2aws.env.machine import available_cpus
from pt2aws.processes import free_port
from pt2aws.serving import server
from pt2aws.serving.local import LocalServer, ServerError

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


class PortFromEnvironment(LocalServer):
    """The port as SageMaker passes it: ``SAGEMAKER_BIND_TO_PORT``, no ``--port``."""

    def launch(self, model_dir):
        self.env["SAGEMAKER_BIND_TO_PORT"] = str(self.port)
        cmd = super().launch(model_dir)
        return cmd[: cmd.index("--port")] + cmd[cmd.index("--port") + 2 :]


def test_workers_get_the_runtime_settings_and_the_archive_handler(probe_model, tmp_path):
    with_two = PortFromEnvironment(probe_model, tmp_path, port=free_port(), workers=2).start()
    log = with_two.log_path
    try:
        deadline = time.monotonic() + 120
        while log.read_text().count("model loaded and warmed up") < 2:
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        answer = with_two.invoke(b"x", "text/plain", "application/json")
        assert answer.status == 200 and json.loads(answer.body)["LRU_CACHE_CAPACITY"] == "1024"
    finally:
        assert with_two.stop() == 0  # SIGTERM: clean shutdown
    text = log.read_text()
    seen = [json.loads(ln.split("probe:", 1)[1]) for ln in text.splitlines() if "probe:" in ln]
    assert len({s["pid"] for s in seen}) == 2, "expected 2 worker processes"
    threads = str(max(1, available_cpus() // 2))
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
    with LocalServer(probe_model, tmp_path) as one:
        slow = threading.Thread(target=one.invoke, args=(b"slow", "text/plain"))
        slow.start()
        time.sleep(0.5)
        t0 = time.perf_counter()
        assert send(one.port, "GET", "/ping", None, None, None, timeout_s=2).status == 200
        assert time.perf_counter() - t0 < 1.0  # SageMaker's /ping timeout is 2 s
        slow.join()


def test_a_model_that_fails_to_load_never_reports_healthy(tmp_path):
    empty = tmp_path / "model"  # a model.tar.gz without config.json or weights
    empty.mkdir()
    broken = LocalServer(empty, tmp_path / "serve", workers=2)
    with pytest.raises(ServerError, match="exited before it was healthy") as err:
        broken.start()  # it polls /ping until 200 or the exit
    assert broken.returncode == server.STARTUP_FAILURE, broken.log_tail()
    assert "the model failed to load" in str(err.value) and "config.json" in str(err.value)
