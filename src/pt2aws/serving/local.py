"""Our server on 127.0.0.1 (:class:`LocalServer`: the emulator's endpoints, ``pt2aws serve``,
notebook 02) and notebook 02's check that it answers as the in-process handler does."""

from __future__ import annotations

import contextlib
import http.client
import importlib.util
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from pt2aws.processes import free_port, stop_process_group
from pt2aws.serving.server import ModelService, Reply

JSON = "application/json"


class ServerError(RuntimeError):
    """The local server could not start or answer; the message ends with its log tail."""


def server_missing() -> str | None:
    """Why our server cannot run here (starlette or uvicorn missing), or None."""
    missing = [m for m in ("starlette", "uvicorn") if importlib.util.find_spec(m) is None]
    return f"{' and '.join(missing)} missing: pip install -e '.[serve]'" if missing else None


class LocalServer:
    """``python -m pt2aws.serving.server serve`` for a model folder or ``model.tar.gz`` (extracted
    into ``workdir/model``) on a free 127.0.0.1 port in its own process group, logging to
    ``workdir/server.log``: ``with LocalServer(model, workdir) as server: server.url``."""

    def __init__(self, model: str | Path, workdir: str | Path, *, port: int | None = None,
                 workers: int = 1, env: dict[str, str] | None = None, timeout_s: float = 180.0):  # fmt: skip
        self.model, self.workdir = Path(model), Path(workdir).resolve()
        self.workers, self.env, self.timeout_s = workers, dict(env or {}), timeout_s
        self.port, self.startup_s, self.returncode, self._proc = port, None, None, None
        self.log_path = self.workdir / "server.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def launch(self, model_dir: Path) -> list[str]:
        """The server's command."""
        return [sys.executable, "-m", "pt2aws.serving.server", "serve", "--host", "127.0.0.1",
                "--port", str(self.port), "--model-dir", str(model_dir),
                "--workers", str(self.workers)]  # fmt: skip

    def start(self) -> LocalServer:
        """Start and wait up to ``timeout_s`` for ``GET /ping`` = 200; FileNotFoundError: no such
        model, ServerError: it exited or stayed unhealthy (stopped; the message has the log)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        model_dir = self.model
        if not self.model.is_dir():
            if not self.model.is_file() or not tarfile.is_tarfile(self.model):
                raise FileNotFoundError(f"{self.model}: pass a model.tar.gz or a model folder")
            model_dir = self.workdir / "model"
            with tarfile.open(self.model, "r:*") as tar:
                tar.extractall(model_dir, filter="data")
        self.port = self.port or free_port()
        cmd = self.launch(model_dir.resolve())
        src = str(Path(__file__).resolve().parents[2])  # the subprocess imports this pt2aws
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
               "PYTHONPATH": os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")])),
               **self.env}  # fmt: skip
        t0 = time.perf_counter()
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(cmd, cwd=self.workdir, env=env, stdin=subprocess.DEVNULL,
                                          stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True)  # fmt: skip
        while time.perf_counter() - t0 < self.timeout_s:
            if not self.running:
                self.stop()
                raise ServerError(f"the server exited before it was healthy:\n{self.log_tail()}")
            if self.ping():
                self.startup_s = time.perf_counter() - t0
                return self
            time.sleep(0.25)
        self.stop()
        raise ServerError(f"not healthy within {self.timeout_s:.0f} s:\n{self.log_tail()}")

    def request(self, method: str, path: str, body: bytes | None = None, headers=None,
                timeout_s: float = 60.0) -> Reply:  # fmt: skip
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout_s)
        with contextlib.closing(conn):
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            return Reply(resp.status, resp.read(), resp.getheader("Content-Type"))

    def ping(self) -> bool:
        try:
            return self.request("GET", "/ping", timeout_s=5).status == 200
        except OSError:
            return False

    def invoke(self, body: bytes | str, content_type: str = JSON, accept: str = JSON) -> Reply:
        """``POST /invocations`` as ``InvokeEndpoint`` sends it (a ``str`` as UTF-8)."""
        if not self.running:
            raise ServerError("the local server is not running: call start() first")
        data = body.encode() if isinstance(body, str) else bytes(body)
        headers = {"Content-Type": content_type, "Accept": accept}
        return self.request("POST", "/invocations", data, headers)

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.is_file() else ""
        return "\n".join(text.splitlines()[-lines:]) or "(no log written)"

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL to the process group; the server's exit status (twice: None)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        stop_process_group(proc)
        self.returncode = proc.returncode
        return self.returncode

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def compare_with_handler(model_dir: str | Path, workdir: str | Path, texts: list[str], *,
                         start: bool = True, latency_calls: int = 10) -> dict:  # fmt: skip
    """Send each kind of request (JSON, CSV, plain text, a 415 and a 400) to our server on
    127.0.0.1 and to the handler in this process, then time ``latency_calls`` one-text requests:
    ``{"answers", "matches_in_process", "stopped", latency_summary's keys}``, or
    ``{"answers": [], "skipped": why}``."""
    from pt2aws.inference.measure import latency_summary, time_calls

    why = server_missing() if start else "START_SERVER is False"
    if why:
        print(f"local server skipped: {why}")
        return {"answers": [], "skipped": why}
    service = ModelService(model_dir)
    service.load()
    requests = [("json", json.dumps({"inputs": texts}).encode(), JSON, JSON),
                ("csv in, csv out", ("text\n" + "\n".join(texts)).encode(), "text/csv", "text/csv"),
                ("plain text", texts[0].encode(), "text/plain", JSON),
                ("bad: unsupported type", b"x", "application/x-npy", JSON),
                ("bad: not UTF-8", b'{"inputs": "\xff"}', JSON, JSON)]  # fmt: skip
    answers = []
    with LocalServer(model_dir, workdir) as server:
        print(f"{server.url} healthy after {server.startup_s:.1f} s")
        for name, body, content_type, accept in requests:
            got = server.invoke(body, content_type, accept)
            answers.append({"request": name, "status": got.status, "content_type": got.content_type,
                            "first_line": got.body.decode(errors="replace").split("\n")[0][:70],
                            "same_as_in_process": got == service.invoke(body, content_type, accept)})  # fmt: skip
        one = json.dumps({"inputs": texts[0]})
        seconds = time_calls(lambda: server.invoke(one), latency_calls)
    check = {"answers": answers, "matches_in_process": all(a["same_as_in_process"] for a in answers),
             "stopped": not server.running, **latency_summary(seconds)}  # fmt: skip
    print(f"same answers as in-process: {check['matches_in_process']}; request p50 "
          f"{check['p50_ms']:.1f} ms; stopped: {check['stopped']}")  # fmt: skip
    return check
