"""What this machine is: versions, accelerators, CPU features, memory; and a suggested instance.

``collect()`` never fails on a CPU-only machine; each problem found comes with its fix in
``report["notes"]``.
"""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata

from pt2aws.config import get_profile


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def cpu_info() -> dict:
    """CPU model, logical cores and the ML-relevant feature flags (Linux ``/proc/cpuinfo``).

    Returns:
        ``{"model", "logical_cores", "bf16", "amx", "avx512", "sve", "graviton"}``; the flags are
        bools (False where ``/proc/cpuinfo`` is unavailable).
    """
    model, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("model name", "CPU part") and model in (
                    "",
                    platform.machine(),
                    platform.processor(),
                ):
                    model = value.strip()
                if key in ("flags", "Features"):
                    flags.update(value.split())
    except OSError:
        pass
    arm = platform.machine() in ("aarch64", "arm64")
    return {
        "model": model,
        "logical_cores": os.cpu_count(),
        "bf16": bool({"avx512_bf16", "amx_bf16", "bf16"} & flags),
        "amx": "amx_tile" in flags,
        "avx512": "avx512f" in flags,
        "sve": "sve" in flags,
        "graviton": arm and "sve" in flags or arm and "bf16" in flags,
    }


def gpu_info() -> list[dict]:
    """One entry per visible CUDA GPU: name, memory (bytes), compute capability, bf16 support."""
    import torch

    if not torch.cuda.is_available():
        return []
    gpus = []
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        gpus.append(
            {
                "index": i,
                "name": props.name,
                "memory_bytes": int(props.total_memory),
                "compute_capability": f"{props.major}.{props.minor}",
                "bf16": props.major >= 8,
            }
        )
    return gpus


def memory_bytes() -> int | None:
    """Total physical memory in bytes (Linux), else None."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def collect(profile: str = "local") -> dict:
    """The environment report used by notebook 00 and ``pt2aws env``.

    Returns:
        A JSON-serialisable dict: ``versions``, ``python``, ``arch``, ``cpu``, ``gpus``,
        ``memory_bytes``, ``accelerator`` ("cuda" or "cpu"), ``profile``, ``suggested_instance``
        and ``notes`` (problems found, each with its fix).
    """
    import torch

    gpus, cpu = gpu_info(), cpu_info()
    notes = []
    if not gpus:
        notes.append(
            "no CUDA GPU: training runs on CPU (profiles smoke/local); use a GPU instance for profile full"
        )
    elif not all(g["bf16"] for g in gpus):
        notes.append(
            "a GPU without bf16 (pre-Ampere): training will use fp32; prefer A10G/A100/H100 instances"
        )
    if not cpu["bf16"]:
        notes.append(
            "this CPU has no bf16 instructions: Graviton3+ (c7g) or Sapphire Rapids run bf16 inference faster"
        )
    prof = get_profile(profile)
    if profile == "full" and not gpus:
        notes.append(
            "profile full needs a GPU and the Hugging Face hub; this machine has no GPU: use smoke or local"
        )
    return {
        "profile": profile,
        "python": sys.version.split()[0],
        "arch": platform.machine(),
        "platform": platform.platform(),
        "versions": {
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "transformers": _version("transformers"),
            "datasets": _version("datasets"),
            "sagemaker": _version("sagemaker"),
            "pt2aws": _version("pt2aws"),
        },
        "accelerator": "cuda" if gpus else "cpu",
        "gpus": gpus,
        "cpu": cpu,
        "memory_bytes": memory_bytes(),
        "suggested_instance": prof.suggested_instance,
        "notes": notes,
    }


def format_report(report: dict) -> str:
    """Human-readable multi-line text of :func:`collect`'s report."""
    v, cpu = report["versions"], report["cpu"]
    mem = report["memory_bytes"]
    lines = [
        f"Python {report['python']} on {report['arch']} ({report['platform']})",
        "versions: " + ", ".join(f"{k} {val}" for k, val in v.items() if val),
        f"CPU: {cpu['model']}, {cpu['logical_cores']} logical cores; bf16={cpu['bf16']} amx={cpu['amx']} "
        f"avx512={cpu['avx512']} sve={cpu['sve']} graviton={cpu['graviton']}",
        f"memory: {mem / 2**30:.1f} GiB" if mem else "memory: unknown",
    ]
    if report["gpus"]:
        lines += [
            f"GPU {g['index']}: {g['name']}, {g['memory_bytes'] / 2**30:.0f} GiB, sm_{g['compute_capability']}, bf16={g['bf16']}"
            for g in report["gpus"]
        ]
    else:
        lines.append("GPUs: none")
    lines.append(f"profile {report['profile']}: suggested instance {report['suggested_instance']}")
    lines += [f"note: {n}" for n in report["notes"]]
    return "\n".join(lines)
