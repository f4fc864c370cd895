"""Small facts about this process and machine that several stages need, each defined once.

Nothing here imports torch at module level (the CLI and the serving image import it cheaply).
"""

from __future__ import annotations

import os
import platform
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

#: Environment variables that cap the instruction set torch's libraries use (ATen's kernel
#: dispatch, oneDNN, MKL): set on a newer CPU they make torch behave as on an older one
#: (:func:`pt2aws.env.cpu_features` reads them; ``benchmarks/cpu_caps.py`` checks what they do).
CAP_VARIABLES = (
    "ATEN_CPU_CAPABILITY",
    "ONEDNN_MAX_CPU_ISA",
    "DNNL_MAX_CPU_ISA",
    "MKL_ENABLE_INSTRUCTIONS",
)


def inductor_cache_for_caps(environ: dict | None = None) -> str | None:
    """Give ``torch.compile`` a cache of its own while the instruction set is capped.

    TorchInductor keeps the C++ kernels it compiles in ``TORCHINDUCTOR_CACHE_DIR`` (default
    ``<tmp>/torchinductor_<user>``) and reuses them across processes; its cache key does not
    include :data:`CAP_VARIABLES`. Measured here (torch 2.13.0+cpu, AMD EPYC with AVX-512):
    after runs with ``ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2`` had filled the shared
    cache, the torchao ``int8`` variant compiled without the caps crashed the process
    ("malloc(): unaligned tcache chunk detected") and, with the caps, answered NaN for a second
    input shape; with an empty cache both were correct. So when a cap is set and the user has
    not chosen a cache folder, this points ``TORCHINDUCTOR_CACHE_DIR`` at
    ``<tmp>/torchinductor_<user>_<caps>``. ``import pt2aws`` calls it, before anything compiles;
    subprocesses (torchrun, notebook kernels) inherit the variable.

    Args:
        environ: the environment to read and change; ``None``: ``os.environ``.

    Returns:
        The cache folder it set, or ``None`` (no cap, or ``TORCHINDUCTOR_CACHE_DIR`` already set).
    """
    import getpass
    import re
    import tempfile

    env = os.environ if environ is None else environ
    caps = [f"{name}={env[name]}" for name in CAP_VARIABLES if env.get(name)]
    if not caps or env.get("TORCHINDUCTOR_CACHE_DIR"):
        return None
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid()) if hasattr(os, "getuid") else "user"
    tag = re.sub(r"[^A-Za-z0-9_.-]+", "_", "_".join(caps).lower())
    folder = os.path.join(tempfile.gettempdir(), f"torchinductor_{user}_{tag}")
    env["TORCHINDUCTOR_CACHE_DIR"] = folder
    return folder


#: ``platform.machine()`` values of 64-bit Arm (Linux reports ``aarch64``, macOS ``arm64``).
ARM64_MACHINES = ("aarch64", "arm64")


def is_arm64(machine: str | None = None) -> bool:
    """True on 64-bit Arm (AWS Graviton, Apple silicon).

    Args:
        machine: a ``platform.machine()`` value to test instead of this machine's.
    """
    return (machine or platform.machine()).lower() in ARM64_MACHINES


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask, e.g. a container's cpuset), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS has no sched_getaffinity
        return os.cpu_count() or 1


def default_num_threads(local_processes: int | None = None) -> int:
    """Intra-op threads for one of ``local_processes`` CPU processes sharing this machine.

    Args:
        local_processes: processes on this node; default ``LOCAL_WORLD_SIZE`` (set by torchrun),
            else 1.

    Returns:
        ``available_cpus() // local_processes``, at least 1.
    """
    if local_processes is None:
        local_processes = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    return max(1, available_cpus() // max(1, local_processes))


def peak_memory_bytes(device=None) -> int:
    """Peak memory of this process on ``device``, bytes.

    CUDA: ``torch.cuda.max_memory_allocated`` (tensors only, since the last reset). CPU: the
    process's peak resident set size (``getrusage`` ``ru_maxrss``: KiB on Linux, bytes on macOS).

    Args:
        device: a ``torch.device`` or ``"cuda"``/``"cpu"``; default CPU.
    """
    kind = getattr(device, "type", device) or "cpu"
    if kind == "cuda":
        import torch

        return int(torch.cuda.max_memory_allocated(device if hasattr(device, "type") else None))
    import resource

    peak = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    return peak if platform.system() == "Darwin" else peak * 1024


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that is free now (the OS picks it).

    Another process can take it before the caller binds it: callers that start servers retry
    on "address in use".
    """
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def cpu_name(root: str | Path = "/") -> str:
    """The CPU model from ``/proc/cpuinfo`` (``model name``), else ``platform.processor()``."""
    try:
        for line in (Path(root) / "proc" / "cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def die_with_parent():
    """A ``preexec_fn`` that makes a child process get SIGTERM when its parent dies (Linux
    ``prctl(PR_SET_PDEATHSIG)``), or ``None`` where that does not exist.

    For the training subprocesses a notebook starts: when the kernel or ``make run`` is killed,
    ``torchrun`` is told to stop (and stops its workers) instead of training on, orphaned.
    """
    if not sys.platform.startswith("linux"):
        return None

    def set_death_signal() -> None:
        import ctypes

        pr_set_pdeathsig = 1  # <linux/prctl.h>
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)

    return set_death_signal


def stop_process_group(proc: subprocess.Popen, timeout_s: float = 15.0) -> None:
    """Stop ``proc`` (started with ``start_new_session=True``) and every process of its group.

    SIGTERM to ``proc`` first (a server forwards it to its children), then SIGTERM and, after
    ``timeout_s`` seconds, SIGKILL to the whole group; returns once ``proc`` is reaped. Safe on
    a process that has already exited.
    """
    pgid = proc.pid  # start_new_session: the group id is the leader's pid
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            pass
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            break
        end = time.monotonic() + (timeout_s if sig == signal.SIGTERM else 5)
        while time.monotonic() < end and process_group_alive(pgid):
            time.sleep(0.1)
        if not process_group_alive(pgid):
            break
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def process_group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` is alive (zombies do not count)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # zombies still count for killpg(0); reap ours via /proc state
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False
