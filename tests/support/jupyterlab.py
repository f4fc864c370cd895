"""A JupyterLab server on 127.0.0.1 for the browser test (``tests/browser/``), started from this
Python environment so that the ``python3`` kernel is this environment's, with its own config,
data and runtime folders (nothing from ``~/.jupyter`` or ``~/.local/share/jupyter``), and stopped
with every kernel it started."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

#: User settings written before start: no news or update checks (they fetch from the internet).
SETTINGS = {
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False}
}


@contextmanager
def jupyterlab(root_dir: Path, home: Path, log: Path, start_timeout_s: float = 120):
    """Run ``jupyter lab`` serving ``root_dir`` on a free port of 127.0.0.1; yields its base URL
    (``http://127.0.0.1:<port>/``) and token as ``(url, token)``.

    ``home`` holds its config, settings, workspaces and runtime files; ``log`` gets what it
    prints. ``window.jupyterapp`` is exposed to the page (``expose_app_in_browser``), for reading
    the notebook model. Kernels are shut down through the REST API before the server stops.

    Raises:
        RuntimeError: the server exited or did not answer within ``start_timeout_s`` (the
            message ends with the log's tail).
    """
    env = dict(os.environ)
    for name in ("config", "data", "runtime"):
        env[f"JUPYTER_{name.upper()}_DIR"] = str(home / name)
    for key, values in SETTINGS.items():
        path = home / "config" / "lab" / "user-settings" / f"{key}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    # kernelspec `python3` runs `python`: this environment's, first on PATH
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    token = secrets.token_hex(16)
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ip=127.0.0.1",
        "--port=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root_dir}",
        "--LabApp.expose_app_in_browser=True",
    ]
    if os.geteuid() == 0:  # CI runs as root; JupyterLab refuses to without this flag
        cmd.append("--allow-root")
    with open(log, "ab") as out:
        server = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = None
    try:
        url = _wait_started(server, home / "runtime", token, log, start_timeout_s)
        yield url, token
    finally:
        if url and server.poll() is None:
            shutdown_kernels(url, token)
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _api(url: str, token: str, path: str, method: str = "GET"):
    request = urllib.request.Request(
        f"{url}api/{path}", method=method, headers={"Authorization": f"token {token}"}
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        body = answer.read()
    return json.loads(body) if body else None


def _wait_started(server, runtime: Path, token: str, log: Path, timeout_s: float) -> str:
    info = runtime / f"jpserver-{server.pid}.json"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and server.poll() is None:
        if info.exists():
            url = f"http://127.0.0.1:{json.loads(info.read_text())['port']}/"
            try:
                _api(url, token, "status")
                return url
            except OSError:
                pass
        time.sleep(0.5)
    tail = log.read_text(errors="replace")[-2000:]
    server.kill()
    server.wait()
    raise RuntimeError(f"JupyterLab did not start within {timeout_s:.0f} s; its log:\n{tail}")


def shutdown_kernels(url: str, token: str) -> None:
    """Shut down every kernel of the server at ``url`` (each kernel runs in a process session of
    its own: stopping the server's process alone could leave them running)."""
    try:
        for kernel in _api(url, token, "kernels"):
            _api(url, token, f"kernels/{kernel['id']}", method="DELETE")
    except OSError:
        pass
