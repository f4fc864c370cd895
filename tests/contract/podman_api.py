"""Podman's Docker-compatible API on a private socket, for clients that speak to a Docker engine.

The SageMaker Python SDK's local mode drives containers through the Docker CLI and Docker
Compose; both find the engine through ``DOCKER_HOST``. No Docker engine runs on the project's
machines, so the tests start ``podman system service`` on a socket of their own and point
``DOCKER_HOST`` at it (the stack notes, "Containers": podman here runs only with ``runc`` and
the project's ``containers.conf``, and the same holds for the service).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from podman_image import CONTAINERS_CONF


def compose_command() -> list[str] | None:
    """The Compose command the SDK would run (``docker compose`` v2, else ``docker-compose``),
    or None when neither is installed."""
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, check=False)
        if probe.returncode == 0:
            return ["docker", "compose"]
    return ["docker-compose"] if shutil.which("docker-compose") else None


def missing_clients() -> str | None:
    """Why the SDK's local mode cannot run here, or None.

    The SDK runs ``docker context inspect`` before every request (to find the engine's host)
    and Docker Compose to start the container; podman serves both through its API socket.
    """
    if shutil.which("docker") is None:
        return (
            "no docker CLI: the SageMaker SDK's local mode runs `docker context inspect` "
            "(podman-docker provides a `docker` command)"
        )
    if compose_command() is None:
        return (
            "no Docker Compose: the SageMaker SDK's local mode starts containers with "
            "`docker compose` or `docker-compose` (apt-get install docker-compose)"
        )
    return None


class PodmanApiService:
    """``podman --runtime runc system service`` on ``<workdir>/podman.sock``.

    Args:
        workdir: folder for the socket and the service's log.

    Attributes:
        docker_host: the ``DOCKER_HOST`` value for clients (``unix://...``).
    """

    def __init__(self, workdir: Path):
        self.socket_path = workdir / "podman.sock"
        self.log = workdir / "podman-service.log"
        self.docker_host = f"unix://{self.socket_path}"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout_s: float = 30.0) -> PodmanApiService:
        """Start the service and wait until ``GET /_ping`` answers ``OK``.

        Raises:
            RuntimeError: the service exited or did not answer; the message has its log.
        """
        env = {**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF)}
        cmd = ["podman", "--runtime", "runc", "system", "service", "--time=0", self.docker_host]
        with open(self.log, "ab") as fh:
            self.proc = subprocess.Popen(
                cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            if self.ping():
                return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"podman API service not up on {self.docker_host}:\n{self.log_text()}")

    def ping(self) -> bool:
        """True when the engine answers ``GET /_ping`` with 200 (the Docker API's health check)."""
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(2)
                sock.connect(str(self.socket_path))
                sock.sendall(b"GET /_ping HTTP/1.0\r\nHost: podman\r\n\r\n")
                return sock.recv(64).split(b" ", 2)[1:2] == [b"200"]
        except OSError:
            return False

    def log_text(self) -> str:
        """The service's output so far."""
        return self.log.read_text(errors="replace") if self.log.is_file() else ""

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM the service (SIGKILL after ``timeout_s``); containers it started keep running."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
