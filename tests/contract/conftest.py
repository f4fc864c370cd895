"""Fixtures for the serving contract suite: one model folder, the TorchServe reference, and the
project's server as a subprocess (``python -m pt2aws.serving.server serve``)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import pytest

from pt2aws.processes import free_port
from pt2aws.serving import HANDLER_PATH

#: Seconds to wait for a server's /ping = 200 (JVM or torch import on 2 loaded cores).
STARTUP_TIMEOUT_S = 180.0
#: Graviton runtime settings the server computes from its vCPUs and workers.
RUNTIME_VARIABLES = (
    "OMP_NUM_THREADS",
    "LRU_CACHE_CAPACITY",
    "THP_MEM_ALLOC_ENABLE",
    "DNNL_DEFAULT_FPMATH_MODE",
)


def make_model_folder(model_dir: Path, target: Path) -> Path:
    """``model_dir`` laid out as SageMaker extracts ``model.tar.gz``: the model files,
    ``code/inference.py`` (this checkout's handler) and ``code/requirements.txt`` pinned to the
    versions installed here (as ``pt2aws.deploy`` writes it)."""
    shutil.copytree(model_dir, target)
    code = target / "code"
    code.mkdir()
    shutil.copy(HANDLER_PATH, code / "inference.py")
    pins = [f"{p}=={metadata.version(p)}" for p in ("transformers", "tokenizers", "safetensors")]
    (code / "requirements.txt").write_text("\n".join(pins) + "\n")
    return target


@pytest.fixture(scope="session")
def contract_model(smoke_model_dir, tmp_path_factory) -> Path:
    """The smoke model as an extracted ``model.tar.gz`` (read-only for every server), with the
    ONNX Runtime variants' ``onnx/`` export that ``aws.artifact.package`` ships when
    ``variants.json`` records them (a read-only ``/opt/ml/model`` cannot export them)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from pt2aws.inference.ort import onnx_files

    folder = make_model_folder(smoke_model_dir, tmp_path_factory.mktemp("contract") / "model")
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    onnx_files(folder, model, AutoTokenizer.from_pretrained(folder))
    return folder


@pytest.fixture(scope="session")
def torchserve_if_java(request):
    """The TorchServe reference (``torchserve``, tests/conftest.py: the session's one, serving the
    same smoke model and handler) where Java is installed, else None (then only correctness is
    checked, not sameness)."""
    if shutil.which("java") is None:
        return None
    return request.getfixturevalue("torchserve")


def wait_healthy(port: int, proc: subprocess.Popen | None, log: Path, timeout_s: float) -> float:
    """Block until ``GET /ping`` on ``port`` answers 200; seconds waited.

    Raises:
        RuntimeError: the process exited or /ping stayed unhealthy; the message has the log tail.
    """
    from contract_cases import send

    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout_s:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}:\n{tail(log)}")
        try:
            if send(port, "GET", "/ping", None, None, None, timeout_s=5).status == 200:
                return time.perf_counter() - t0
        except OSError:
            pass
        time.sleep(0.25)
    raise RuntimeError(f"/ping on port {port} not 200 after {timeout_s:.0f} s:\n{tail(log)}")


def tail(log: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a log file (or a note that there is none)."""
    if not log.is_file():
        return f"(no log at {log})"
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


class ServerProcess:
    """``python -m pt2aws.serving.server serve`` on 127.0.0.1:<free port>, logs in ``log``.

    Args:
        model: the model folder (``--model-dir``).
        log: file for the server's stdout and stderr.
        workers: ``SAGEMAKER_MODEL_SERVER_WORKERS``.
        env: extra environment.
        port_from_env: pass the port as ``SAGEMAKER_BIND_TO_PORT`` instead of ``--port``.
    """

    def __init__(
        self,
        model: Path,
        log: Path,
        workers: int = 1,
        env: dict | None = None,
        port_from_env: bool = False,
    ):
        self.model, self.log, self.workers = model, log, workers
        self.env = dict(env or {})
        self.port_from_env = port_from_env
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.startup_s: float | None = None

    def start(self, wait: bool = True) -> ServerProcess:
        """Start it; with ``wait``, block until /ping is 200 (raises RuntimeError otherwise)."""
        inherited = {  # the server sets these itself; a value left by another test would win
            k: v for k, v in os.environ.items() if k not in RUNTIME_VARIABLES
        }
        env = {
            **inherited,
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(src_dir()), os.environ.get("PYTHONPATH")])
            ),
            "SAGEMAKER_MODEL_SERVER_WORKERS": str(self.workers),
            **self.env,
        }
        cmd = [sys.executable, "-m", "pt2aws.serving.server", "serve", "--host", "127.0.0.1"]
        cmd += ["--model-dir", str(self.model)]
        if self.port_from_env:
            env["SAGEMAKER_BIND_TO_PORT"] = str(self.port)
        else:
            cmd += ["--port", str(self.port)]
        with open(self.log, "ab") as fh:
            self.proc = subprocess.Popen(
                cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
            )
        if wait:
            try:
                self.startup_s = wait_healthy(self.port, self.proc, self.log, STARTUP_TIMEOUT_S)
            except RuntimeError:
                self.stop()
                raise
        return self

    def stop(self, timeout_s: float = 20.0) -> int | None:
        """SIGTERM (as SageMaker stops a container), SIGKILL to the group after ``timeout_s``;
        returns the exit status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # workers left behind, if any
        except (ProcessLookupError, PermissionError):
            pass
        return self.proc.wait()


def src_dir() -> Path:
    """This checkout's ``src`` folder (the server subprocess imports pt2aws from it)."""
    import pt2aws

    return Path(pt2aws.__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def asgi_server(contract_model, tmp_path_factory):
    """The project's server (one worker, as the reference) on 127.0.0.1."""
    server = ServerProcess(contract_model, tmp_path_factory.mktemp("asgi") / "server.log").start()
    yield server
    server.stop()


def pytest_terminal_summary(terminalreporter):
    """What the container tests measured (build and start-up times, sizes), when they ran."""
    from podman_image import REPORT

    for arch, rows in REPORT.items():
        terminalreporter.section(f"serving image, {arch}")
        for key, value in rows.items():
            if isinstance(value, dict):
                for sub, text in value.items():
                    terminalreporter.line(f"{key} {sub}: {text}")
            else:
                terminalreporter.line(f"{key}: {value}")


def pytest_collection_modifyitems(config, items):
    """The serving image's tests grouped by architecture, then by ``PT2AWS_VARIANT`` (in the
    order collected), so that each (architecture, variant) container starts once and one runs
    at a time; the per-architecture tests first (they use the eager container)."""
    ours = [i for i in items if i.path.name == "test_container.py" and hasattr(i, "callspec")]

    def target(item) -> tuple:
        params = item.callspec.params
        return params.get("target", (params.get("arch"), None))

    arches = list(dict.fromkeys(target(i)[0] for i in ours))
    variants = list(dict.fromkeys(target(i)[1] for i in ours if target(i)[1] is not None))

    def key(item) -> tuple:
        arch, variant = target(item)
        return arches.index(arch), -1 if variant is None else variants.index(variant)

    slots = [n for n, item in enumerate(items) if item in ours]
    for n, item in zip(slots, sorted(ours, key=key)):  # sorted() is stable
        items[n] = item
