"""What this machine is (notebook 00, ``pt2aws env``): versions, accelerators, CPU features,
memory, disk, network, platform, and each problem found with its fix.

:func:`collect` gathers the report from the probes in :mod:`pt2aws.env.probes` and the notes of
:mod:`pt2aws.env.notes`; :func:`format_report` turns it into text. ``collect()`` never fails
on a CPU-only machine (it says so).
"""

from __future__ import annotations

import platform
import sys
from pathlib import Path

from pt2aws.config import get_profile
from pt2aws.env.cpu import CpuFeatures, cpu_features
from pt2aws.env.notes import problems
from pt2aws.env.probes import (
    cpu_info,
    disk_info,
    efa_info,
    gpu_info,
    memory_bytes,
    platform_info,
    versions,
)

__all__ = [
    "CpuFeatures",
    "collect",
    "cpu_features",
    "cpu_info",
    "disk_info",
    "efa_info",
    "format_report",
    "gpu_info",
    "memory_bytes",
    "platform_info",
    "problems",
    "versions",
]


def collect(profile: str = "local", disk_path: str | Path = ".") -> dict:
    """The environment report used by notebook 00 and ``pt2aws env``.

    Args:
        profile: ``smoke`` | ``local`` | ``full`` (for the suggested instance and the notes).
        disk_path: where the runs are written (its file system's free space is reported).

    Returns:
        A JSON-serialisable dict: ``profile``, ``python``, ``arch``, ``platform``, ``versions``
        (torch, cuda, cudnn, nccl, transformers, datasets, sagemaker, boto3, pt2aws),
        ``accelerator`` ("cuda" or "cpu"), ``gpus``, ``gpu_count``, ``cpu``, ``memory_bytes``,
        ``disk``, ``efa``, ``where`` (DLAMI / DLC / SageMaker), ``suggested_instance``,
        ``notes`` (problems found, each with its fix) and ``cpu_only`` (bool).
    """
    gpus = gpu_info()
    prof = get_profile(profile)
    report = {
        "profile": profile,
        "python": sys.version.split()[0],
        "arch": platform.machine(),
        "platform": platform.platform(),
        "versions": versions(),
        "accelerator": "cuda" if gpus else "cpu",
        "cpu_only": not gpus,
        "gpus": gpus,
        "gpu_count": len(gpus),
        "cpu": cpu_info(),
        "memory_bytes": memory_bytes(),
        "disk": disk_info(disk_path),
        "efa": efa_info(),
        "where": platform_info(),
        "suggested_instance": prof.suggested_instance,
    }
    report["notes"] = problems(report)
    return report


def format_report(report: dict) -> str:
    """Human-readable multi-line text of :func:`collect`'s report."""
    v, cpu = report["versions"], report["cpu"]
    mem, disk = report["memory_bytes"], report.get("disk") or {}
    gen = (
        f", {cpu['graviton_generation']} ({cpu['core']})" if cpu.get("graviton_generation") else ""
    )
    lines = [
        f"Python {report['python']} on {report['arch']} ({report['platform']})",
        "versions: " + ", ".join(f"{k} {val}" for k, val in v.items() if val),
        f"where: {report['where']['summary']}",
        f"CPU: {cpu['model']}{gen}, {cpu['logical_cores']} logical / "
        f"{cpu.get('physical_cores') or '?'} physical cores; torch dispatches {cpu.get('isa')}; "
        f"bf16={cpu['bf16']} int8_dot={cpu.get('int8_dot')} amx={cpu['amx']} "
        f"avx512={cpu['avx512']} sve={cpu['sve']} graviton={cpu['graviton']}",
        f"memory: {mem / 2**30:.1f} GiB" if mem else "memory: unknown",
    ]
    caps = (cpu.get("features") or {}).get("caps")
    if caps:
        lines.insert(4, "CPU capped: " + " ".join(f"{k}={v}" for k, v in caps.items()))
    if disk:
        lines.append(
            f"disk: {disk['free_bytes'] / 2**30:.1f} GiB free of {disk['total_bytes'] / 2**30:.0f} "
            f"GiB at {disk['path']}"
        )
    efa = report.get("efa") or {}
    lines.append(
        f"EFA: {', '.join(efa['devices'])}"
        if efa.get("present")
        else "EFA: none (single node only)"
    )
    if report["gpus"]:
        for g in report["gpus"]:
            link = {True: "NVLink", False: "PCIe", None: "link unknown"}[g.get("nvlink")]
            lines.append(
                f"GPU {g['index']}: {g['name']}, {g['memory_bytes'] / 2**30:.0f} GiB, "
                f"sm_{g['compute_capability']}, bf16={g['bf16']}, P2P to {g.get('peers', [])}, {link}"
            )
    else:
        lines.append(
            "GPUs: none. This is a CPU-only machine: the smoke and local profiles run here"
        )
    lines.append(f"profile {report['profile']}: suggested instance {report['suggested_instance']}")
    lines += [f"note: {n}" for n in report["notes"]]
    return "\n".join(lines)
