"""scripts/torch_source.py (where set-up installs torch from) and its use in scripts/setup-env.sh.

The GPU is faked by an ``nvidia-smi`` on ``PATH``; the CPU index by an HTTP server on 127.0.0.1
(reachable) or a closed port (unreachable). No network, no pip.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "torch_source.py"
linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the CPU index is used on Linux only"
)


def _load():
    spec = importlib.util.spec_from_file_location("torch_source", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["torch_source"] = module  # dataclasses look the module up by name
    spec.loader.exec_module(module)
    return module


ts = _load()
INDEX = "https://download.pytorch.org/whl/cpu"


@pytest.mark.parametrize(
    ("platform", "gpu", "reachable", "args", "reason"),
    [
        (
            "linux",
            False,
            True,
            ("--index-url", INDEX),
            f"no NVIDIA GPU: the CPU build from {INDEX}",
        ),
        ("linux", False, False, (), "is not reachable: the plain pin"),
        ("linux", True, None, (), "NVIDIA GPU found (nvidia-smi -L): the CUDA build from PyPI"),
        ("linux", True, True, (), "the CUDA build from PyPI"),  # a GPU wins over the index
        ("darwin", False, None, (), "darwin: PyPI's torch wheel is the CPU build"),
        ("win32", False, None, (), "win32: PyPI's torch wheel is the CPU build"),
    ],
)
def test_choice_for_each_machine(platform, gpu, reachable, args, reason):
    source = ts.choose(platform, gpu, INDEX, reachable)
    assert source.pip_args == args
    assert reason in source.reason


def _fake_nvidia_smi(folder: Path, stdout: str, status: int) -> str:
    """A ``PATH`` whose only ``nvidia-smi`` prints ``stdout`` and exits with ``status``."""
    folder.mkdir(exist_ok=True)
    tool = folder / "nvidia-smi"
    tool.write_text(f"#!/bin/sh\nprintf '%s\\n' '{stdout}'\nexit {status}\n")
    tool.chmod(0o755)
    return str(folder)


@linux_only
@pytest.mark.parametrize(
    ("stdout", "status", "found"),
    [
        ("GPU 0: NVIDIA A10G (UUID: GPU-5a3c0c1e-0000-0000-0000-000000000000)", 0, True),
        ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", 9, False),
        ("No devices found.", 6, False),
        ("", 0, False),  # runs, lists nothing
    ],
)
def test_gpu_is_what_nvidia_smi_lists(tmp_path, monkeypatch, stdout, status, found):
    monkeypatch.setenv("PATH", _fake_nvidia_smi(tmp_path / "bin", stdout, status))
    assert ts.nvidia_gpu_present() is found


def test_no_nvidia_smi_is_no_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # empty folder: no nvidia-smi at all
    assert ts.nvidia_gpu_present() is False


class _Index:
    """An HTTP server on 127.0.0.1 answering ``/torch/`` with ``head`` (HEAD) and ``get`` (GET)
    statuses; ``hang`` accepts connections and never answers."""

    def __init__(self, head: int = 200, get: int = 200, hang: bool = False):
        self.methods: list[str] = []
        index = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, status):
                index.methods.append(self.command)
                if hang:
                    time.sleep(3)
                self.send_response(status if self.path == "/whl/cpu/torch/" else 404)
                self.send_header("Content-Length", "1")
                self.end_headers()
                if self.command == "GET":
                    self.wfile.write(b"<")

            def do_HEAD(self):
                self._answer(head)

            def do_GET(self):
                self._answer(get)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/whl/cpu"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize(
    ("head", "get", "reachable", "methods"),
    [
        (200, 200, True, ["HEAD"]),
        (405, 200, True, ["HEAD", "GET"]),  # a server that refuses HEAD
        (404, 404, False, ["HEAD"]),
        (403, 200, False, ["HEAD"]),
        (405, 503, False, ["HEAD", "GET"]),
    ],
)
def test_index_probe_reads_the_status(head, get, reachable, methods):
    index = _Index(head, get)
    try:
        assert ts.index_reachable(index.url, timeout_s=5) is reachable
        assert index.methods == methods
    finally:
        index.close()


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/whl/cpu"


def test_index_probe_gives_up_fast():
    assert ts.index_reachable(_closed_port_url(), timeout_s=5) is False  # refused at once
    assert ts.index_reachable("not a url") is False
    hung = _Index(hang=True)
    try:
        t0 = time.monotonic()
        assert ts.index_reachable(hung.url, timeout_s=0.5) is False
        assert time.monotonic() - t0 < 2.5  # the timeout, not pip's minutes of retries
    finally:
        hung.close()


def test_installed_from_reads_pips_report(tmp_path):
    url = "https://download.pytorch.org/whl/cpu/torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    report = tmp_path / "report.json"
    report.write_text(
        json.dumps(
            {
                "install": [
                    {"metadata": {"name": "filelock"}, "download_info": {"url": "x"}},
                    {"metadata": {"name": "torch"}, "download_info": {"url": url}},
                ]
            }
        )
    )
    assert ts.installed_from(str(report)) == url
    report.write_text(json.dumps({"install": []}))
    assert ts.installed_from(str(report)) == "already installed (pip installed nothing new)"
    assert ts.installed_from(str(tmp_path / "missing.json")) == "unknown (no pip report)"


def _environment(tmp_path, gpu: bool, index_url: str) -> dict:
    smi = "GPU 0: NVIDIA H100" if gpu else "No devices found."
    path = _fake_nvidia_smi(tmp_path / "bin", smi, 0 if gpu else 6)
    return {
        **os.environ,
        "PATH": os.pathsep.join([path, os.environ["PATH"]]),
        "PT2AWS_TORCH_CPU_INDEX": index_url,
    }


@linux_only
def test_script_prints_the_pip_arguments_for_this_machine(tmp_path):
    index = _Index()
    try:
        cases = {
            (False, index.url): f"--index-url {index.url}",
            (False, _closed_port_url()): "",
            (True, index.url): "",
        }
        for (gpu, url), expected in cases.items():
            done = subprocess.run(
                [sys.executable, str(SCRIPT)],
                env=_environment(tmp_path, gpu, url),
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0, done.stderr
            assert done.stdout.strip() == expected, (gpu, url)
            assert done.stderr.startswith("torch: ") and done.stderr.count("\n") == 1
    finally:
        index.close()


@linux_only
@pytest.mark.parametrize("cpu_index_works", [True, False])
def test_setup_env_installs_torch_as_decided_and_says_which(tmp_path, cpu_index_works):
    """setup-env.sh with a stand-in Python: pip commands are recorded, not run. Without a GPU and
    with the index reachable, torch is installed from the index; if that install fails, the plain
    pin follows; then the installed torch is reported and the package installed."""
    index = _Index()
    log = tmp_path / "calls.log"
    fake_python = tmp_path / "python"
    fake_python.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {log}\n'
        f'case "$1" in scripts/torch_source.py) exec {sys.executable} "$@";; esac\n'
        'case "$*" in *--index-url*) exit ' + ("0" if cpu_index_works else "1") + ";; esac\n"
        "exit 0\n"
    )
    fake_python.chmod(0o755)
    try:
        done = subprocess.run(
            ["bash", str(ROOT / "scripts" / "setup-env.sh"), str(fake_python)],
            env=_environment(tmp_path, False, index.url),
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        index.close()
    assert done.returncode == 0, done.stderr
    calls = log.read_text().splitlines()
    torch_installs = [c for c in calls if c.startswith("-m pip install -q --report")]
    assert torch_installs[0].endswith(f"torch==2.13.0 --index-url {index.url}")
    if cpu_index_works:
        assert len(torch_installs) == 1
    else:
        assert torch_installs[1].endswith("torch==2.13.0")  # the plain pin after the failure
        assert "the plain pin instead" in done.stderr
    assert f"torch: no NVIDIA GPU: the CPU build from {index.url}" in done.stderr
    reported = calls.index(
        next(c for c in calls if c.startswith("scripts/torch_source.py --installed"))
    )
    assert calls.index(torch_installs[-1]) < reported
    assert any(
        c.startswith("-m pip install -q -e .[dev,serve] torch==2.13.0") for c in calls[reported:]
    )
    # the report line names the torch this interpreter has (the stand-in's pip installed nothing)
    import torch

    assert f"torch {torch.__version__} (CUDA " in done.stdout
