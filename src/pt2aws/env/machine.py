"""Facts of this machine and process that several stages need, each defined once."""

from __future__ import annotations

import os
import platform
from pathlib import Path

#: ``platform.machine()`` values of 64-bit Arm (Linux reports ``aarch64``, macOS ``arm64``).
ARM64_MACHINES = ("aarch64", "arm64")


def is_arm64(machine: str | None = None) -> bool:
    """True on 64-bit Arm (Graviton, Apple silicon), or for ``platform.machine()`` value ``machine``."""
    return (machine or platform.machine()).lower() in ARM64_MACHINES


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask, e.g. a container's cpuset), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS has no sched_getaffinity
        return os.cpu_count() or 1


def default_num_threads(local_processes: int | None = None) -> int:
    """``available_cpus() // local_processes`` (default ``LOCAL_WORLD_SIZE``, else 1), at least 1."""
    if local_processes is None:
        local_processes = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    return max(1, available_cpus() // max(1, local_processes))


def cpuinfo(root: str | Path = "/") -> list[dict[str, str]]:
    """``<root>/proc/cpuinfo`` as one dict per ``processor`` (first value of each key); [] if none."""
    try:
        text = (Path(root) / "proc" / "cpuinfo").read_text()
    except OSError:
        return []
    cpus: list[dict[str, str]] = []
    for line in text.splitlines():
        key, _, value = (s.strip() for s in line.partition(":"))
        if key == "processor" or not cpus:
            cpus.append({})
        cpus[-1].setdefault(key, value)
    return cpus


def cpu_name(root: str | Path = "/", machine: str | None = None) -> str:
    """The CPU model: :func:`cpuinfo`'s first ``model name`` (not an x86 host's on arm64, as
    under QEMU user mode), else the architecture."""
    first = (cpuinfo(root) or [{}])[0]
    name = None if is_arm64(machine) and "flags" in first else first.get("model name")
    return name or machine or platform.machine() or "unknown CPU"


def peak_memory_bytes(device=None) -> int:
    """Peak memory of this process on ``device`` (default CPU), bytes: CUDA
    ``max_memory_allocated``; CPU the peak RSS (``ru_maxrss``: KiB on Linux, bytes on macOS)."""
    kind = getattr(device, "type", device) or "cpu"
    if kind == "cuda":
        import torch

        return int(torch.cuda.max_memory_allocated(device if hasattr(device, "type") else None))
    import resource

    peak = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    return peak if platform.system() == "Darwin" else peak * 1024
