"""Build and run the serving image with podman on a machine without Docker or a registry.

What the project's CI machines need (shared/notes stack-notes, "Containers"): ``podman`` with the
``runc`` runtime (crun fails there), a project-local ``containers.conf`` without default ulimits,
a base image made from Debian packages by ``mmdebstrap`` (no registry is reachable), host
networking for the build with the host's CA bundle and pip settings mounted, and torch from the
host's local CPU wheel folder (PyPI's x86_64 torch is the multi-GB CUDA build). None of this is
in the Dockerfile: it builds from ``python:3.12-slim`` and the public indexes by default.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONTAINERS_CONF = ROOT / "container" / "containers.conf"
BASE_IMAGE = "localhost/pt2aws-debian-py:bookworm"
IMAGE = "localhost/pt2aws-serving:test"
#: The base image's Python (Debian 12) must match the local torch wheel's (cp311 here).
DEBIAN_SUITE = "bookworm"


def missing_tools() -> str | None:
    """Why the image cannot be built and run here, or None."""
    for tool, package in (("podman", "podman"), ("runc", "runc"), ("mmdebstrap", "mmdebstrap")):
        if shutil.which(tool) is None:
            return f"{tool} is not installed: run container/install-podman.sh (apt-get install {package})"
    if _pip_settings()[1] is None:
        return (
            "no local torch wheel folder (pip find-links, PIP_FIND_LINKS): the build would "
            "download PyPI's multi-GB CUDA torch; point PIP_FIND_LINKS at a CPU wheel folder"
        )
    return None


def podman(*args: str, timeout_s: float = 600, check: bool = True) -> subprocess.CompletedProcess:
    """``podman --runtime runc ARGS`` with the project's containers.conf; output captured.

    Raises:
        RuntimeError: ``check`` and a non-zero exit; the message has the command's output tail.
    """
    env = {**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF)}
    cmd = ["podman", "--runtime", "runc", *args]
    proc = subprocess.run(
        cmd, env=env, capture_output=True, text=True, timeout=timeout_s, check=False
    )
    if check and proc.returncode != 0:
        out = (proc.stdout + proc.stderr)[-4000:]
        raise RuntimeError(f"{' '.join(cmd[:6])} ... exited {proc.returncode}:\n{out}")
    return proc


def image_exists(tag: str) -> bool:
    """True when ``tag`` is in podman's local store."""
    return podman("image", "exists", tag, check=False).returncode == 0


def ensure_base_image(tag: str = BASE_IMAGE) -> float:
    """Make ``tag`` from Debian packages unless present (minbase + python3, python3-venv and
    ca-certificates; about 20-30 s); seconds spent."""
    if image_exists(tag):
        return 0.0
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pt2aws-rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs.tar"
        subprocess.run(
            [
                "mmdebstrap",
                "--quiet",
                "--variant=minbase",
                "--include=ca-certificates,python3,python3-venv",
                DEBIAN_SUITE,
                str(rootfs),
            ],
            check=True,
            capture_output=True,
            timeout=900,
        )
        podman("import", str(rootfs), tag)
    return time.perf_counter() - t0


def _pip_settings() -> tuple[str, str | None]:
    """(CA bundle, local wheel folder or None) that the host's pip uses."""
    cert = os.environ.get("PIP_CERT") or "/etc/ssl/certs/ca-certificates.crt"
    links = os.environ.get("PIP_FIND_LINKS", "/opt/wheels").split()[0]
    return cert, links if Path(links).is_dir() else None


def build_image(tag: str = IMAGE, base: str = BASE_IMAGE) -> float:
    """Build ``container/Dockerfile`` as ``tag`` from ``base`` (layer cache kept); seconds spent.

    pip inside the build gets the host's CA bundle and, when the host has a local wheel folder
    (pip ``find-links``), a constraint to the local ``torch==<pin>+cpu`` wheel, so nothing
    falls back to PyPI's CUDA build.
    """
    from packaging.requirements import Requirement

    cert, links = _pip_settings()
    pins = {}
    for line in (ROOT / "container" / "requirements.txt").read_text().splitlines():
        if line.split("#")[0].strip():
            req = Requirement(line)
            pins[req.name] = str(req.specifier).removeprefix("==")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pt2aws-build-") as tmp:
        pip_conf = Path(tmp) / "pip.conf"
        constraints = Path(tmp) / "constraints.txt"
        conf = ["[global]", "cert = /etc/ssl/certs/ca-certificates.crt"]
        volumes = ["-v", f"{cert}:/etc/ssl/certs/ca-certificates.crt:ro"]
        if links:
            conf += ["find-links = /wheels", "constraint = /etc/pip-constraints.txt"]
            constraints.write_text(f"torch=={pins['torch']}+cpu\n")
            volumes += [
                "-v",
                f"{links}:/wheels:ro",
                "-v",
                f"{constraints}:/etc/pip-constraints.txt:ro",
            ]
        pip_conf.write_text("\n".join(conf) + "\n")
        volumes += ["-v", f"{pip_conf}:/etc/pip.conf:ro"]
        podman(
            "build",
            "--network",
            "host",
            *volumes,
            "--build-arg",
            f"BASE={base}",
            "--build-arg",
            "TORCH_INDEX_URL=https://pypi.org/simple",
            "--ignorefile",
            str(ROOT / "container" / "Dockerfile.dockerignore"),
            "-f",
            str(ROOT / "container" / "Dockerfile"),
            "-t",
            tag,
            str(ROOT),
            timeout_s=1800,
        )
    return time.perf_counter() - t0


class Container:
    """``podman run -d`` of the image as SageMaker runs it: ``<image> serve``, the model
    read-only at /opt/ml/model, container port 8080 published on 127.0.0.1:<free port>.

    Args:
        image: the image tag.
        model: host folder mounted at /opt/ml/model (read-only).
        port: the host port.
        args: the command after the image name (SageMaker passes ``serve``).
        options: more ``podman run`` options (``--user``, ``--read-only``, ``-e``).
    """

    def __init__(self, image: str, model: Path, port: int, args=("serve",), options=()):
        self.image, self.model, self.port = image, model, port
        self.args, self.options = list(args), list(options)
        self.name = f"pt2aws-test-{os.getpid()}-{port}"

    def start(self) -> Container:
        """Start it detached (returns at once; poll /ping for health)."""
        podman(
            "run",
            "-d",
            "--name",
            self.name,
            "-p",
            f"127.0.0.1:{self.port}:8080",
            "-v",
            f"{self.model}:/opt/ml/model:ro",
            "-e",
            "SAGEMAKER_MODEL_SERVER_WORKERS=1",
            *self.options,
            self.image,
            *self.args,
        )
        return self

    def running(self) -> bool:
        """True while the container runs."""
        proc = podman("inspect", "--format", "{{.State.Running}}", self.name, check=False)
        return proc.stdout.strip() == "true"

    def logs(self) -> str:
        """Its stdout and stderr so far."""
        proc = podman("logs", self.name, check=False)
        return proc.stdout + proc.stderr

    def stop(self, timeout_s: int = 20) -> int | None:
        """``podman stop`` (SIGTERM, SIGKILL after ``timeout_s``), then remove; exit status."""
        podman("stop", "-t", str(timeout_s), self.name, check=False, timeout_s=timeout_s + 30)
        proc = podman("inspect", "--format", "{{.State.ExitCode}}", self.name, check=False)
        podman("rm", "-f", self.name, check=False)
        return int(proc.stdout.strip()) if proc.stdout.strip().isdigit() else None
