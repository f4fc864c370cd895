"""A local SageMaker endpoint: the real PyTorch serving stack on 127.0.0.1, without Docker.

:class:`LocalEndpoint` serves a ``model.tar.gz`` (or an extracted model folder) with the same
software the SageMaker PyTorch inference container runs: ``sagemaker-pytorch-inference`` 2.0.25
(the toolkit that calls ``model_fn``/``input_fn``/``predict_fn``/``output_fn``), TorchServe
0.12.0 and Java 17. It answers ``GET /ping`` and ``POST /invocations`` as the container does,
so a request that works here works on the endpoint, and a bad request gets the same 4xx.

Example::

    with LocalEndpoint("runs/x/package/model.tar.gz", workdir="runs/x/serve") as ep:
        status, body, content_type = ep.invoke('{"inputs": ["great phone"]}')

Everything the server writes (TorchServe logs, its config, the launcher's output) stays in
``workdir``; every port (inference, management, metrics, two gRPC) is a free one on 127.0.0.1.
Needs the ``serve`` extra (``pip install -e ".[serve]"``) and Java 17 on ``PATH``.
"""

from __future__ import annotations

import atexit
import http.client
import json
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import weakref
from pathlib import Path

from pt2aws.processes import free_port, stop_process_group
from pt2aws.serving import HANDLER_PATH

logger = logging.getLogger(__name__)

LAUNCHER_PATH = Path(__file__).with_name("ts_launcher.py")
#: Seconds ``start()`` waits for ``GET /ping`` = 200. Measured here: 3-6 s alone, up to about
#: 40 s with four other jobs on the 2 cores (JVM start plus the worker importing torch).
DEFAULT_STARTUP_TIMEOUT_S = 180.0


class LocalEndpointError(RuntimeError):
    """The local serving stack could not start or answer; the message ends with the log tail."""


def java_available() -> bool:
    """True when a ``java`` executable is on ``PATH`` (TorchServe's frontend needs Java 11+)."""
    return shutil.which("java") is not None


def serve_stack_missing() -> str | None:
    """Why the local endpoint cannot run here (Java or the ``serve`` extra missing), or None."""
    if not java_available():
        return "Java is not installed: install OpenJDK 17 (apt-get install openjdk-17-jre-headless)"
    import importlib.util

    for module, package in (
        ("ts", "torchserve==0.12.0"),
        ("sagemaker_pytorch_serving_container", "sagemaker-pytorch-inference==2.0.25"),
        ("sagemaker_inference", "sagemaker-inference==1.10.1"),
        ("pkg_resources", "'setuptools<81'"),
    ):
        if importlib.util.find_spec(module) is None:
            return f"{package} is missing: pip install -e '.[serve]'"
    return None


def _prepare_model_dir(model: Path, target: Path) -> None:
    """Extract ``model.tar.gz`` into ``target`` or copy a model folder there, adding ``code/``."""
    if target.exists():
        shutil.rmtree(target)
    if model.is_file():
        if not tarfile.is_tarfile(model):
            raise ValueError(f"{model} is not a tar archive: pass a model.tar.gz or a model folder")
        with tarfile.open(model, "r:*") as tar:
            tar.extractall(target, filter="data")
    elif model.is_dir():
        shutil.copytree(model, target, symlinks=False)
    else:
        raise FileNotFoundError(
            f"model {model} does not exist: pass a model.tar.gz (pt2aws.aws.artifact.package) or the "
            "folder written by save_pretrained"
        )
    if not (target / "config.json").is_file():
        raise ValueError(
            f"{model}: no config.json at the top level; the archive must hold the model files at "
            "its root (build it with pt2aws.aws.artifact.package)"
        )
    code = target / "code"
    if not (code / "inference.py").is_file():
        code.mkdir(exist_ok=True)
        shutil.copy(HANDLER_PATH, code / "inference.py")


#: Starts :meth:`LocalEndpoint.start` tries when a port it picked was taken before it was bound.
PORT_ATTEMPTS = 3


def _port_taken(message: str) -> bool:
    """Whether a start failure's log tail says a port was already bound (Java or Python)."""
    return "Address already in use" in message or "BindException" in message


class LocalEndpoint:
    """The SageMaker PyTorch serving stack for one model, as a subprocess on 127.0.0.1.

    Args:
        model: a ``model.tar.gz`` (SageMaker layout: model files at the root, ``code/inference.py``)
            or an extracted model folder; a folder without ``code/inference.py`` gets this
            package's handler.
        workdir: folder for the extracted model (``workdir/model``), TorchServe's config and logs
            (``workdir/logs``, ``workdir/server.log``); created if missing.
        port: inference port (``/ping``, ``/invocations``); default: a free one.
        workers: TorchServe worker processes (``SAGEMAKER_MODEL_SERVER_WORKERS``); each loads the
            model once.
        env: extra environment for the server (for example ``{"PT2AWS_MAX_BATCH": "16"}`` or the
            Graviton settings of :func:`pt2aws.aws.deploy.endpoint_environment`).
        startup_timeout_s: seconds :meth:`start` waits for ``/ping`` to answer 200.

    The object is a context manager: ``with LocalEndpoint(...) as ep:`` starts and always stops.
    """

    def __init__(
        self,
        model: str | Path,
        workdir: str | Path,
        port: int | None = None,
        workers: int = 1,
        *,
        env: dict[str, str] | None = None,
        startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S,
    ):
        if workers < 1:
            raise ValueError(f"workers={workers}: need at least 1 worker process")
        self.model = Path(model)
        self.workdir = Path(workdir).resolve()
        self.port = port
        self.workers = workers
        self.env = dict(env or {})
        self.startup_timeout_s = startup_timeout_s
        self.startup_s: float | None = None
        self.management_port: int | None = None
        self._proc: subprocess.Popen | None = None
        self._tmp: str | None = None
        self._log_fh = None

    # ----------------------------------------------------------------------------- lifecycle
    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:40123`` (the port is chosen by :meth:`start`)."""
        if self.port is None:
            raise LocalEndpointError("the endpoint has no port yet: call start() first")
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        """The launcher's and TorchServe's console output (``workdir/server.log``)."""
        return self.workdir / "server.log"

    @property
    def running(self) -> bool:
        """True while the launcher process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of ``server.log`` and TorchServe's ``logs/model_log.log``."""
        parts = []
        for path in (self.log_path, self.workdir / "logs" / "model_log.log"):
            if path.is_file():
                text = path.read_text(errors="replace").splitlines()[-lines:]
                parts.append(f"--- {path} (last {len(text)} lines)\n" + "\n".join(text))
        return "\n".join(parts) or "(no log written)"

    @staticmethod
    def missing() -> str | None:
        """Why this kind of server cannot start here (a missing package or Java), or None."""
        return serve_stack_missing()

    def _launch_spec(self) -> tuple[list[str], dict[str, str]]:
        """The command and environment that start TorchServe through the SageMaker toolkit."""
        self.management_port = free_port()
        ports = {
            "management_port": self.management_port,
            "metrics_port": free_port(),
            "grpc_inference_port": free_port(),
            "grpc_management_port": free_port(),
        }
        # TorchServe keeps its pid file and the worker's Unix socket in the temp dir; a private,
        # short one (socket paths are limited to 107 bytes) keeps servers apart.
        self._tmp = tempfile.mkdtemp(
            prefix="pt2aws-ts-", dir="/tmp" if os.path.isdir("/tmp") else None
        )
        env = {
            "SAGEMAKER_BASE_DIR": str(self.workdir),
            "SAGEMAKER_BIND_TO_PORT": str(self.port),
            "SAGEMAKER_MODEL_SERVER_WORKERS": str(self.workers),
            "SAGEMAKER_PROGRAM": "inference.py",
            "LOG_LOCATION": str(self.workdir / "logs"),
            "METRICS_LOCATION": str(self.workdir / "logs"),
            "TEMP": self._tmp,
            "TMPDIR": self._tmp,
            "PT2AWS_TS_LAUNCH": json.dumps(
                {"config_file": str(self.workdir / "ts.properties"), **ports}
            ),
        }
        return [sys.executable, str(LAUNCHER_PATH)], env

    def start(self) -> LocalEndpoint:
        """Start the server and block until ``GET /ping`` returns 200.

        Returns:
            ``self``.

        Raises:
            LocalEndpointError: Java or the ``serve`` extra is missing, the server exited, or
                ``/ping`` did not answer 200 within ``startup_timeout_s`` seconds; the message
                includes the log tail. The server is stopped before raising.
        """
        if self.running:
            return self
        missing = self.missing()
        if missing:
            raise LocalEndpointError(f"cannot start the local endpoint: {missing}")
        self.workdir.mkdir(parents=True, exist_ok=True)
        _prepare_model_dir(self.model, self.workdir / "model")
        # free ports are picked before the server binds them, so on a busy machine another
        # process can take one in between: then start again on fresh ports (ours only)
        chosen = self.port is None
        for attempt in range(1, PORT_ATTEMPTS):
            try:
                self._start_once()
                return self
            except LocalEndpointError as err:
                if not chosen or not _port_taken(str(err)):
                    raise
                logger.warning("local endpoint: a port was taken (attempt %d); retrying", attempt)
                self.port = None
        self._start_once()  # the last attempt: its error is the caller's
        return self

    def _start_once(self) -> None:
        """One start: pick the ports, launch, wait until healthy (see :meth:`start`)."""
        self.port = self.port or free_port()
        cmd, server_env = self._launch_spec()
        env = {
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "HF_HUB_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            **server_env,
            **self.env,
        }
        self._log_fh = open(self.log_path, "ab")
        t0 = time.perf_counter()
        self._proc = subprocess.Popen(
            cmd,
            cwd=self.workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log_fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stop() ends the server and workers
        )
        _RUNNING.add(self)
        logger.info(
            "local endpoint: pid %s, %s, logs in %s", self._proc.pid, self.url, self.workdir
        )
        self._wait_healthy(t0)

    def _wait_healthy(self, t0: float) -> None:
        deadline = t0 + self.startup_timeout_s
        while time.perf_counter() < deadline:
            code = self._proc.poll()
            if code is not None:
                tail = self.log_tail()
                self.stop()
                raise LocalEndpointError(
                    f"the serving stack exited with status {code} before the model was loaded "
                    f"(port {self.port} taken? Java too old?)\n{tail}"
                )
            if self.ping() and self.workers_ready():
                self.startup_s = time.perf_counter() - t0
                logger.info("local endpoint healthy after %.1f s", self.startup_s)
                return
            time.sleep(0.25)
        tail = self.log_tail()
        self.stop()
        raise LocalEndpointError(
            f"/ping at {self.url} did not answer 200 within {self.startup_timeout_s:.0f} s "
            f"(raise startup_timeout_s on a loaded machine)\n{tail}"
        )

    def stop(self, timeout_s: float = 15.0) -> None:
        """Stop TorchServe, its Java process and its Python workers; safe to call twice.

        Sends SIGTERM to the launcher (the toolkit forwards it to the JVM, which stops its
        workers), then SIGTERM and after ``timeout_s`` SIGKILL to the whole process group.
        """
        proc, self._proc = self._proc, None
        _RUNNING.discard(self)
        if proc is not None:
            stop_process_group(proc, timeout_s)
        if self._log_fh is not None:
            self._log_fh.close()
            self._log_fh = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> LocalEndpoint:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __del__(self):  # a forgotten endpoint must not outlive the interpreter's objects
        try:
            if self._proc is not None:
                self.stop(timeout_s=5)
        except Exception:  # noqa: BLE001, S110 - best effort during garbage collection
            pass

    # ------------------------------------------------------------------------------- requests
    def _request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict | None = None,
        timeout_s: float = 60.0,
        port: int | None = None,
    ) -> tuple[int, bytes, str]:
        conn = http.client.HTTPConnection("127.0.0.1", port or self.port, timeout=timeout_s)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, resp.read(), resp.getheader("Content-Type", "")
        finally:
            conn.close()

    def ping(self) -> bool:
        """True when ``GET /ping`` answers 200 (the health check SageMaker runs)."""
        if self.port is None:
            return False
        try:
            return self._request("GET", "/ping", timeout_s=5.0)[0] == 200
        except OSError:
            return False

    def workers_ready(self) -> bool:
        """True when every TorchServe worker has loaded the model (management API
        ``GET /models/model``: all workers ``READY``).

        ``/ping`` turns 200 as soon as the frontend runs, seconds before the worker has imported
        torch and called ``model_fn``; waiting for ``READY`` as well keeps that load time out of
        the first request.
        """
        if self.management_port is None:
            return False
        try:
            status, body, _ = self._request(
                "GET", "/models/model", timeout_s=5.0, port=self.management_port
            )
            workers = json.loads(body)[0]["workers"] if status == 200 else []
        except (OSError, ValueError, KeyError, IndexError):
            return False
        ready = [w for w in workers if w.get("status") == "READY"]
        return len(ready) >= self.workers

    def invoke(
        self,
        body: bytes | str,
        content_type: str = "application/json",
        accept: str = "application/json",
        timeout_s: float = 60.0,
    ) -> tuple[int, bytes, str]:
        """``POST /invocations`` as ``sagemaker-runtime InvokeEndpoint`` sends it.

        Args:
            body: request body; ``str`` is sent as UTF-8.
            content_type: ``Content-Type`` header (e.g. ``"text/csv"``).
            accept: ``Accept`` header (``"application/json"`` or ``"text/csv"``).
            timeout_s: socket timeout in seconds.

        Returns:
            ``(HTTP status, response body bytes, response Content-Type)``. Errors come back as
            4xx/5xx statuses, not exceptions.

        Raises:
            LocalEndpointError: the server is not running.
        """
        if not self.running:
            raise LocalEndpointError("the local endpoint is not running: call start() first")
        data = body.encode("utf-8") if isinstance(body, str) else bytes(body)
        headers = {"Content-Type": content_type, "Accept": accept}
        return self._request("POST", "/invocations", data, headers, timeout_s)

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"LocalEndpoint({str(self.model)!r}, port={self.port}, {state})"


#: Endpoints started and not yet stopped: stopped at interpreter exit, so a script or kernel that
#: ends without stop() leaves no TorchServe behind (a SIGKILLed interpreter still can).
_RUNNING: weakref.WeakSet[LocalEndpoint] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    for endpoint in list(_RUNNING):
        endpoint.stop(timeout_s=5)
