"""Probes for the environment report, JSON-serialisable, never failing on a CPU-only machine;
the file-reading ones take a ``root`` (default ``/``), a fake tree in tests."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path

from pt2aws.env.machine import cpuinfo, is_arm64

PACKAGES = ("transformers", "datasets", "sagemaker", "boto3", "pt2aws")


def cpu_info(features, root: str | Path = "/", machine: str | None = None) -> dict:
    """Cores, Arm ``CPU part`` (None under QEMU, where ``/proc/cpuinfo`` is the x86 host's) and
    ``features`` (:func:`~pt2aws.env.cpu.cpu_features`) as a dict."""
    cpus = cpuinfo(root)
    first, arm = (cpus or [{}])[0], is_arm64(machine)
    cores = {(c.get("physical id", "0"), c["core id"]) for c in cpus if "core id" in c}
    logical = len(cpus) or os.cpu_count()
    return {
        "cpu_part": first.get("CPU part") if arm and "flags" not in first else None,
        "logical_cores": logical,
        "physical_cores": len(cores) or (logical if arm else None),
        "features": features.as_dict(),
    }


def gpu_info() -> list[dict]:
    """Per CUDA GPU: name, memory, compute capability, bf16, P2P ``peers``, ``nvlink``
    (``nvidia-smi topo -m``; None when unknown)."""
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    topo = ""
    if count > 1 and shutil.which("nvidia-smi"):
        try:
            command = ["nvidia-smi", "topo", "-m"]
            topo = subprocess.run(command, capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            pass
    gpus = []
    for i in range(count):
        props = torch.cuda.get_device_properties(i)
        row = next((ln.split() for ln in topo.splitlines() if ln.startswith(f"GPU{i}")), None)
        peers = [j for j in range(count) if j != i and torch.cuda.can_device_access_peer(i, j)]
        gpus.append(
            {
                "index": i,
                "name": props.name,
                "memory_bytes": int(props.total_memory),
                "compute_capability": f"{props.major}.{props.minor}",
                "bf16": props.major >= 8,
                "peers": peers,
                "nvlink": any(c.startswith("NV") for c in row[1 : count + 1]) if row else None,
            }
        )
    return gpus


def memory_bytes() -> int | None:
    """Total physical memory in bytes (Linux), else None."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def disk_info(path: str | Path = ".") -> dict:
    """``{"path", "total_bytes", "free_bytes"}`` of ``path`` or its nearest existing parent."""
    path = Path(path)
    while not path.exists() and path != path.parent:
        path = path.parent
    usage = shutil.disk_usage(path)
    return {"path": str(path.resolve()), "total_bytes": usage.total, "free_bytes": usage.free}


def efa_info(root: str | Path = "/") -> dict:
    """``{"present", "devices"}``: RDMA devices in ``/sys/class/infiniband`` with driver ``efa``."""
    base = Path(root) / "sys" / "class" / "infiniband"
    devices = [
        d.name for d in sorted(base.glob("*")) if (d / "device/driver").resolve().name == "efa"
    ]
    return {"present": bool(devices), "devices": devices}


def platform_info(root: str | Path = "/", environ: Mapping[str, str] | None = None) -> dict:
    """``{"dlami", "dlc", "sagemaker", "container", "summary"}`` from what AWS documents:
    ``/opt/dlami``, ``DLC_CONTAINER_TYPE``, ``/opt/ml/metadata/resource-metadata.json`` (Studio's
    has a ``DomainId``), ``TRAINING_JOB_NAME``/``SM_TRAINING_ENV``."""
    root, env = Path(root), os.environ if environ is None else environ
    dlami = (root / "opt" / "dlami").is_dir() or (root / "opt" / "pytorch" / "bin").is_dir()
    dlc = env.get("DLC_CONTAINER_TYPE") or None
    meta_file = root / "opt" / "ml" / "metadata" / "resource-metadata.json"
    meta = meta_file.read_text() if meta_file.is_file() else ""
    sagemaker = None
    if env.get("TRAINING_JOB_NAME") or env.get("SM_TRAINING_ENV"):
        sagemaker = "training-job"
    elif meta:
        sagemaker = "studio" if '"DomainId"' in meta else "notebook-instance"
    container = (root / ".dockerenv").exists() or bool(dlc)
    parts = [
        sagemaker
        and "SageMaker " + {"studio": "Studio"}.get(sagemaker, sagemaker.replace("-", " ")),
        dlc and f"AWS Deep Learning Container ({dlc})",
        dlami and "AWS Deep Learning AMI",
        container and not dlc and "a container",
    ]
    summary = ", ".join(p for p in parts if p) or "not a DLAMI, DLC or SageMaker: a plain machine"
    where = {"dlami": dlami, "dlc": dlc, "sagemaker": sagemaker, "container": container}
    return {**where, "summary": summary}


def versions() -> dict:
    """torch, CUDA, cuDNN, NCCL and :data:`PACKAGES` versions (None where absent)."""
    import torch

    gpu = torch.cuda.is_available()
    out = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if gpu else None,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())) if gpu else None,
    }
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out
