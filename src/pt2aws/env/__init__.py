"""What this machine is (notebook 00, ``pt2aws env``), each problem with its fix; "is bf16/int8
native here" is :func:`cpu_features`, facts other stages need are in :mod:`pt2aws.env.machine`."""

from __future__ import annotations

import platform
import sys
from pathlib import Path

from pt2aws.env import probes
from pt2aws.env.cpu import CpuFeatures, cpu_features
from pt2aws.env.notes import problems

__all__ = ["CpuFeatures", "collect", "cpu_features", "format_report", "problems"]


def collect(profile: str = "local", disk_path: str | Path = ".") -> dict:
    """The environment report (JSON-serialisable), ``notes`` its problems with their fixes."""
    from pt2aws.config import get_profile

    gpus = probes.gpu_info()
    report = {
        "profile": profile,
        "python": sys.version.split()[0],
        "arch": platform.machine(),
        "platform": platform.platform(),
        "versions": probes.versions(),
        "accelerator": "cuda" if gpus else "cpu",
        "cpu_only": not gpus,
        "gpus": gpus,
        "gpu_count": len(gpus),
        "cpu": probes.cpu_info(cpu_features()),
        "memory_bytes": probes.memory_bytes(),
        "disk": probes.disk_info(disk_path),
        "efa": probes.efa_info(),
        "where": probes.platform_info(),
        "suggested_instance": get_profile(profile).suggested_instance,
    }
    return report | {"notes": problems(report)}


def format_report(report: dict) -> str:
    """:func:`collect`'s report as lines of text (``cpu["processor"]``: the caller's
    ``(generation, core)`` of the Arm ``cpu_part``, e.g. ``sizing.catalog.processor_by_cpu_part``)."""
    cpu, mem, disk, efa = report["cpu"], report["memory_bytes"], report["disk"], report["efa"]
    features, processor = cpu["features"], cpu.get("processor")
    gen = ", {} ({})".format(*processor) if processor else ""
    lines = [
        f"Python {report['python']} on {report['arch']} ({report['platform']})",
        "versions: " + ", ".join(f"{k} {v}" for k, v in report["versions"].items() if v),
        f"where: {report['where']['summary']}",
        f"CPU: {features['model']}{gen}, {cpu['logical_cores']} logical / "
        f"{cpu.get('physical_cores') or '?'} physical cores; {features['description']}",
        f"memory: {mem / 2**30:.1f} GiB" if mem else "memory: unknown",
        f"disk: {disk['free_bytes'] / 2**30:.1f} GiB free of {disk['total_bytes'] / 2**30:.0f} "
        f"GiB at {disk['path']}",
        f"EFA: {', '.join(efa['devices'])}" if efa["present"] else "EFA: none (single node only)",
    ]
    for g in report["gpus"]:
        link = {True: "NVLink", False: "PCIe", None: "link unknown"}[g.get("nvlink")]
        lines.append(
            f"GPU {g['index']}: {g['name']}, {g['memory_bytes'] / 2**30:.0f} GiB, sm_"
            f"{g['compute_capability']}, bf16={g['bf16']}, P2P to {g.get('peers', [])}, {link}"
        )
    if not report["gpus"]:
        lines.append(
            "GPUs: none. This is a CPU-only machine: the smoke and local profiles run here"
        )
    lines.append(f"profile {report['profile']}: suggested instance {report['suggested_instance']}")
    return "\n".join(lines + [f"note: {n}" for n in report["notes"]])
