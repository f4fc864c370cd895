"""Build and run the serving image with podman on a machine without Docker or a registry.

What the project's CI machines need (shared/notes stack-notes, "Containers"): ``podman`` with the
``runc`` runtime (crun fails there), a project-local ``containers.conf`` without default ulimits,
a base image made from Debian packages by ``mmdebstrap`` (no registry is reachable), host
networking for the build with the host's CA bundle and pip settings mounted, and torch from the
host's local CPU wheel folder where it has one (PyPI's torch is a multi-GB CUDA build). None of
this is in the Dockerfile: it builds from ``python:3.12-slim`` and the public indexes by default.

Architectures: the machine's own (``amd64`` on the project's machines) and, under QEMU user
emulation, the other one (``arm64``: Graviton). Emulation needs ``qemu-user-static`` registered
with binfmt_misc (``container/install-emulation.sh``), and an emulated container needs two
things torch needs under QEMU: a stand-in for ``/sys/devices/system/cpu`` (:func:`write_cpu_sysfs`;
torch's CPU probing reads the host's x86 cache entries there and crashes) and ``QEMU_CPU`` set to
a real core (:data:`QEMU_CPU`; QEMU's default ``max`` model made oneDNN's kernels give other
scores than the host).
"""

from __future__ import annotations

import hashlib
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONTAINERS_CONF = ROOT / "container" / "containers.conf"
#: The base image's Python (Debian 12) must match the local torch wheel's (cp311 here).
DEBIAN_SUITE = "bookworm"
#: Debian 12's python3 and glibc: which wheels :func:`prefetch_wheels` fetches for the image.
DEBIAN_PYTHON, DEBIAN_GLIBC = "3.11", (2, 36)
#: Where wheels fetched for an emulated build are kept between sessions (like the layer cache).
WHEEL_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pt2aws"
#: Architectures the image is built for (podman's and Debian's names).
ARCHES = ("amd64", "arm64")
#: ``uname -m`` names of :data:`ARCHES`.
MACHINES = {"amd64": "x86_64", "arm64": "aarch64"}
#: The arm64 CPU QEMU emulates: a Neoverse N1 (Graviton2). QEMU's default ``max`` model (SVE,
#: BF16) made oneDNN's aarch64 kernels score the smoke model 0.53 where the x86 host gives 0.62;
#: with ``neoverse-n1`` they agreed to 1e-7 (shared/notes stack-notes, "Containers").
QEMU_CPU = "neoverse-n1"
#: ``MIDR_EL1`` of a Neoverse N1 r3p1 (implementer 0x41 Arm, part 0xd0c), as the kernel shows it.
NEOVERSE_N1_MIDR = "0x00000000413fd0c1"
BINFMT = Path("/proc/sys/fs/binfmt_misc")
#: What the container tests measured, per architecture (build and start-up times, image size,
#: torch build); printed at the end of the session (``tests/contract/conftest.py``).
REPORT: dict[str, dict] = {}


def host_arch() -> str:
    """This machine's architecture as podman names it (``amd64``, ``arm64``).

    Raises:
        RuntimeError: a machine that is neither x86_64 nor aarch64.
    """
    machine = platform.machine().lower()
    for arch, name in MACHINES.items():
        if machine in (name, arch):
            return arch
    raise RuntimeError(f"no serving image for a {machine} machine: build on x86_64 or aarch64")


def emulated(arch: str) -> bool:
    """True when ``arch`` containers run under QEMU here (not this machine's architecture)."""
    return arch != host_arch()


def base_image(arch: str) -> str:
    """The tag of the Debian base image made for ``arch``."""
    return f"localhost/pt2aws-debian-py:{DEBIAN_SUITE}-{arch}"


def image(arch: str) -> str:
    """The tag of the serving image built for ``arch``."""
    return f"localhost/pt2aws-serving:test-{arch}"


def write_cpu_sysfs(target: Path, cpus: int, midr: str = NEOVERSE_N1_MIDR) -> Path:
    """A stand-in for ``/sys/devices/system/cpu`` that lets torch import under QEMU user mode.

    Under emulation torch's CPU probing (cpuinfo) reads the host's ``/sys/devices/system/cpu``,
    finds x86 cache entries where it expects an arm64 CPU's, and crashes (segmentation fault).
    Bind-mounted read-only over that path in an emulated container, this folder describes
    ``cpus`` arm64 cores instead: the CPU lists (``possible``, ``present``, ``online``,
    ``kernel_max``) and per core ``online`` and ``regs/identification/midr_el1``. (A tmpfs
    there fails with "tmpcopyup ... input/output error".)

    Args:
        target: the folder to write (created; files in it are overwritten).
        cpus: cores to describe, numbered from 0 (the host's count: QEMU user mode reports the
            host's CPU affinity).
        midr: each core's ``MIDR_EL1``; the default matches ``QEMU_CPU=neoverse-n1``.

    Returns:
        ``target``.

    Raises:
        ValueError: ``cpus`` < 1, or ``midr`` is not a 64-bit hex number (``0x`` + 16 digits).
    """
    if cpus < 1:
        raise ValueError(f"cpus={cpus}: describe at least one core")
    if not (midr.startswith("0x") and len(midr) == 18 and int(midr, 16) >= 0):
        raise ValueError(f"midr={midr!r}: write it as the kernel does, 0x + 16 hex digits")
    target.mkdir(parents=True, exist_ok=True)
    span = "0" if cpus == 1 else f"0-{cpus - 1}"
    for name in ("possible", "present", "online"):
        (target / name).write_text(span + "\n")
    (target / "kernel_max").write_text(f"{cpus - 1}\n")
    for cpu in range(cpus):
        regs = target / f"cpu{cpu}" / "regs" / "identification"
        regs.mkdir(parents=True, exist_ok=True)
        (target / f"cpu{cpu}" / "online").write_text("1\n")
        (regs / "midr_el1").write_text(midr + "\n")
        (regs / "revidr_el1").write_text("0x0000000000000000\n")
    return target


def emulation_problem(arch: str, binfmt: Path = BINFMT) -> str | None:
    """Why ``arch`` containers cannot run here, or None (native, or QEMU registered with F)."""
    if not emulated(arch):
        return None
    entry = binfmt / f"qemu-{MACHINES[arch]}"
    if not entry.is_file():
        return (
            f"{arch} runs under QEMU here, and qemu-{MACHINES[arch]} is not registered in "
            f"{binfmt}: run container/install-emulation.sh (qemu-user-static, binfmt-support)"
        )
    text = entry.read_text()
    flags = next((ln.split(":", 1)[1] for ln in text.splitlines() if ln.startswith("flags:")), "")
    if not text.startswith("enabled") or "F" not in flags:
        return (
            f"{entry} must be enabled with the F flag (found {text.splitlines()[0]!r}, flags "
            f"{flags.strip()!r}) for containers to find QEMU: update-binfmts --enable"
        )
    return None


def missing_tools(arch: str | None = None) -> str | None:
    """Why the ``arch`` image (default: this machine's) cannot be built and run here, or None."""
    arch = arch or host_arch()
    for tool, package in (("podman", "podman"), ("runc", "runc"), ("mmdebstrap", "mmdebstrap")):
        if shutil.which(tool) is None:
            return f"{tool} is not installed: run container/install-podman.sh (apt-get install {package})"
    if (why := emulation_problem(arch)) is not None:
        return why
    if arch == "amd64" and torch_wheels(arch) is None:
        return (
            "no local CPU torch wheel for amd64 (pip find-links, PIP_FIND_LINKS): the build "
            "would download PyPI's multi-GB CUDA torch; point PIP_FIND_LINKS at a CPU wheel folder"
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
        cmd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
        preexec_fn=no_core_dumps,
    )
    if check and proc.returncode != 0:
        out = (proc.stdout + proc.stderr)[-4000:]
        raise RuntimeError(f"{' '.join(cmd[:6])} ... exited {proc.returncode}:\n{out}")
    return proc


def no_core_dumps() -> None:
    """Core dumps off (soft limit 0) in a podman child: containers inherit its limits (podman's
    ``--ulimit`` is refused here, it also resets RLIMIT_NOFILE), and a crash under QEMU
    otherwise spends minutes writing a core."""
    _, hard = resource.getrlimit(resource.RLIMIT_CORE)
    resource.setrlimit(resource.RLIMIT_CORE, (0, hard))


def image_exists(tag: str) -> bool:
    """True when ``tag`` is in podman's local store."""
    return podman("image", "exists", tag, check=False).returncode == 0


def image_size(tag: str) -> int:
    """``tag``'s size in bytes, as ``podman image inspect --format '{{.Size}}'`` reports it."""
    return int(podman("image", "inspect", "--format", "{{.Size}}", tag).stdout.strip())


def ensure_base_image(arch: str | None = None) -> float:
    """Make the ``arch`` base image from Debian packages unless present; seconds spent.

    minbase + python3, python3-venv and ca-certificates: about 20-30 s natively, about 5 min
    for arm64 under QEMU (the packages' maintainer scripts run emulated). The image in podman's
    store is the cache: it is made once per machine.
    """
    arch = arch or host_arch()
    tag = base_image(arch)
    if image_exists(tag):
        return 0.0
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pt2aws-rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs.tar"
        subprocess.run(
            [
                "mmdebstrap",
                "--quiet",
                f"--arch={arch}",
                "--variant=minbase",
                "--include=ca-certificates,python3,python3-venv",
                DEBIAN_SUITE,
                str(rootfs),
            ],
            check=True,
            capture_output=True,
            timeout=1800,
        )
        podman("import", "--arch", arch, str(rootfs), tag)
    return time.perf_counter() - t0


def _pip_cert() -> str:
    """The CA bundle the host's pip uses (the build's pip needs the same)."""
    return os.environ.get("PIP_CERT") or "/etc/ssl/certs/ca-certificates.crt"


def torch_wheels(arch: str) -> str | None:
    """The host's local wheel folder (pip ``find-links``) when it holds a CPU torch wheel at the
    pinned version for ``arch``, else None (then the build takes PyPI's, a CUDA build)."""
    folder = os.environ.get("PIP_FIND_LINKS", "/opt/wheels").split()[0]
    pattern = f"torch-{pins()['torch']}+cpu-*_{MACHINES[arch]}.whl"
    return folder if Path(folder).is_dir() and any(Path(folder).glob(pattern)) else None


def pins() -> dict[str, str]:
    """``container/requirements.txt`` as ``{name: version}``."""
    from packaging.requirements import Requirement

    found = {}
    for line in (ROOT / "container" / "requirements.txt").read_text().splitlines():
        if line.split("#")[0].strip():
            req = Requirement(line.split("#")[0])
            found[req.name] = str(req.specifier).removeprefix("==")
    return found


def prefetch_wheels(arch: str, folder: Path | None = None) -> float:
    """Download the image's wheels for ``arch`` here, natively, into ``folder``; seconds spent.

    An emulated build's pip downloads through emulated Python and TLS: about 5 MB/s here,
    against 38 MB/s natively, for 2.8 GB of arm64 wheels (PyPI's CUDA torch; 45 s here). Given
    this folder as ``WHEELS_DIR`` the build installs the same files from disk, with no
    index (:func:`build_image` sets pip's ``no-index``: its resolver prefers an index's file to
    an equal ``--find-links`` one). pip resolves here with the target's platform tags and
    Python; environment markers are evaluated for this machine, so a dependency only arm64
    needs would be missing and the build fail, naming it. Skipped when the folder was filled for
    the same ``container/requirements.txt``.

    Args:
        arch: the image's architecture.
        folder: default ``WHEEL_CACHE/wheels-<arch>``.

    Raises:
        subprocess.CalledProcessError: pip failed (its output in the exception).
    """
    folder = folder or WHEEL_CACHE / f"wheels-{arch}"
    requirements = ROOT / "container" / "requirements.txt"
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()
    stamp = folder / ".requirements.sha256"
    if stamp.is_file() and stamp.read_text() == digest:
        return 0.0
    folder.mkdir(parents=True, exist_ok=True)
    major, minor = DEBIAN_GLIBC
    platforms = [f"manylinux_{major}_{m}_{MACHINES[arch]}" for m in range(minor, 16, -1)]
    platforms.append(f"manylinux2014_{MACHINES[arch]}")
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:"]
    for platform_tag in platforms:
        cmd += ["--platform", platform_tag]
    cmd += ["--python-version", DEBIAN_PYTHON, "--implementation", "cp", "--dest", str(folder)]
    cmd += ["--requirement", str(requirements)]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=1800)
    stamp.write_text(digest)
    return time.perf_counter() - t0


@dataclass
class Build:
    """What :func:`build_image` did: seconds (``prefetch_s`` of them fetching wheels), the
    torch build it reported, the log's path."""

    seconds: float
    torch: str
    log: Path
    prefetch_s: float = 0.0


def build_image(arch: str | None = None, log: Path | None = None) -> Build:
    """Build ``container/Dockerfile`` for ``arch`` as :func:`image` (layer cache kept).

    pip inside the build gets the host's CA bundle, PyPI as the torch index (PyTorch's CPU index
    is not reachable here) and, when the host has a CPU torch wheel for ``arch`` in its local
    wheel folder, that folder (``WHEELS_DIR``) and a constraint to ``torch==<pin>+cpu``, so
    nothing falls back to PyPI's CUDA build. For arm64 the host has none, and PyPI's is a CUDA
    build: the build log says so (``container/torch_build.py``), and so does :attr:`Build.torch`.
    An emulated build gets its wheels fetched natively first (:func:`prefetch_wheels`) as
    ``WHEELS_DIR``, and pip there uses that folder alone (``no-index``; the Dockerfile's commands
    are the same). The image is built as a Docker v2 image (``--format docker``), which
    SageMaker accepts.

    Args:
        arch: ``amd64`` or ``arm64`` (default: this machine's); another than this machine's
            builds under QEMU (slow: g++ and pip run emulated; container/README.md has times).
        log: where to write podman's output (default: a file under the system's temp folder).

    Raises:
        RuntimeError: the build failed; the message has the log's tail.
    """
    arch = arch or host_arch()
    log = log or Path(tempfile.gettempdir()) / f"pt2aws-build-{arch}.log"
    t0 = time.perf_counter()
    links = torch_wheels(arch)
    prefetch_s, offline = 0.0, False
    if links is None and emulated(arch):
        prefetch_s, offline = prefetch_wheels(arch), True
        links = str(WHEEL_CACHE / f"wheels-{arch}")
    with tempfile.TemporaryDirectory(prefix="pt2aws-build-") as tmp:
        pip_conf = Path(tmp) / "pip.conf"
        conf = ["[global]", "cert = /etc/ssl/certs/ca-certificates.crt"]
        volumes = ["-v", f"{_pip_cert()}:/etc/ssl/certs/ca-certificates.crt:ro"]
        build_args = ["TORCH_INDEX_URL=", f"BASE={base_image(arch)}"]
        if links:
            volumes += ["-v", f"{links}:/wheels:ro"]
            build_args += ["WHEELS_DIR=/wheels"]
        if offline:  # pip's resolver takes an index's file over an equal --find-links one
            conf += ["no-index = true"]
        if torch_wheels(arch):  # a local CPU wheel: nothing may fall back to the CUDA build
            constraints = Path(tmp) / "constraints.txt"
            constraints.write_text(f"torch=={pins()['torch']}+cpu\n")
            conf += ["constraint = /etc/pip-constraints.txt"]
            volumes += ["-v", f"{constraints}:/etc/pip-constraints.txt:ro"]
        pip_conf.write_text("\n".join(conf) + "\n")
        volumes += ["-v", f"{pip_conf}:/etc/pip.conf:ro"]
        cmd = ["podman", "--runtime", "runc", "build", "--arch", arch, "--format", "docker"]
        cmd += ["--network", "host", *volumes]
        for arg in build_args:
            cmd += ["--build-arg", arg]
        cmd += ["--ignorefile", str(ROOT / "container" / "Dockerfile.dockerignore")]
        cmd += ["-f", str(ROOT / "container" / "Dockerfile"), "-t", image(arch), str(ROOT)]
        env = {**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF)}
        with open(log, "w") as fh:
            proc = subprocess.run(
                cmd,
                env=env,
                stdout=fh,
                stderr=subprocess.STDOUT,
                timeout=5400,
                check=False,
                preexec_fn=no_core_dumps,
            )
    text = log.read_text(errors="replace")
    if proc.returncode != 0:
        raise RuntimeError(f"podman build for {arch} exited {proc.returncode}:\n{text[-4000:]}")
    return Build(time.perf_counter() - t0, torch_build_line(text), log, prefetch_s)


def torch_build_line(log_text: str) -> str:
    """The last ``torch build: ...`` line ``container/torch_build.py`` printed in a build log
    ("" when the step was cached and printed nothing), with a CUDA build's next line joined."""
    lines = log_text.splitlines()
    found = ""
    for i, line in enumerate(lines):
        if line.startswith("torch build:"):
            found = line.removeprefix("torch build:").strip()
            if "CUDA" in line and i + 1 < len(lines):
                found += " " + lines[i + 1].strip()
    return found


def run_options(arch: str, sysfs: Path | None) -> list[str]:
    """``podman run`` options for an ``arch`` container here: for an emulated one, the CPU
    stand-in (``sysfs``, from :func:`write_cpu_sysfs`) and ``QEMU_CPU``; none for a native one.

    Raises:
        ValueError: an emulated ``arch`` without ``sysfs``.
    """
    options: list[str] = []
    if emulated(arch):
        if sysfs is None:
            raise ValueError(f"an emulated {arch} container needs the CPU stand-in (sysfs)")
        options += ["--arch", arch, "-v", f"{sysfs}:/sys/devices/system/cpu:ro"]
        options += ["-e", f"QEMU_CPU={QEMU_CPU}"]
    return options


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
