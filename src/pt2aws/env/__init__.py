"""What this machine is (notebook 00, ``pt2aws env``), each problem with its fix; "is bf16/int8
native here" is :func:`cpu_features`, facts other stages need are in :mod:`pt2aws.env.machine`.
The probes never fail on a CPU-only machine; the file-reading ones take a ``root`` (default
``/``), a fake tree in tests."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path

from pt2aws.env.cpu import cpu_features
from pt2aws.env.machine import cpuinfo, is_arm64

PACKAGES = ("transformers", "datasets", "sagemaker", "boto3", "pt2aws")
#: Free disk below which a note is raised, bytes: the venv (2.5 GB) plus a few runs.
MIN_FREE_DISK = 10 * 2**30
#: RAM below which a note is raised, bytes (the local profile peaks at about 3 GB).
MIN_MEMORY = 8 * 2**30


def collect(profile: str = "local", disk_path: str | Path = ".") -> dict:
    """The environment report (JSON-serialisable), ``notes`` its problems with their fixes."""
    from pt2aws.config import get_profile

    gpus = gpu_info()
    report = {
        "profile": profile,
        "python": sys.version.split()[0],
        "arch": platform.machine(),
        "platform": platform.platform(),
        "versions": versions(),
        "accelerator": "cuda" if gpus else "cpu",
        "gpus": gpus,
        "cpu": cpu_info(cpu_features()),
        "memory_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),  # Linux, macOS
        "disk": disk_info(disk_path),
        "efa": efa_info(),
        "where": platform_info(),
        "suggested_instance": get_profile(profile).suggested_instance,
    }
    return report | {"notes": problems(report)}


def cpu_info(features, root: str | Path = "/", machine: str | None = None) -> dict:
    """Cores, Arm ``CPU part`` (None under QEMU, where ``/proc/cpuinfo`` is the x86 host's), its
    ``processor`` (``["Graviton3", "Neoverse V1"]``, else None) and ``features``
    (:func:`~pt2aws.env.cpu.cpu_features`) as a dict."""
    cpus = cpuinfo(root)
    first, arm = (cpus or [{}])[0], is_arm64(machine)
    cores = {(c.get("physical id", "0"), c["core id"]) for c in cpus if "core id" in c}
    logical = len(cpus) or os.cpu_count()
    part = first.get("CPU part") if arm and "flags" not in first else None
    from pt2aws.sizing.catalog import processor_by_cpu_part  # lazy: the image has no sizing/

    return {
        "cpu_part": part,
        "processor": processor_by_cpu_part(part) if part else None,
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
        nvlink = any(c.startswith("NV") for c in row[1 : count + 1]) if row else None
        gpus.append({"index": i, "name": props.name, "memory_bytes": int(props.total_memory),
                     "compute_capability": f"{props.major}.{props.minor}",
                     "bf16": props.major >= 8, "peers": peers, "nvlink": nvlink})  # fmt: skip
    return gpus


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
    installed = {(d.name or "").lower(): d.version for d in metadata.distributions()}
    return out | {name: installed.get(name) for name in PACKAGES}


def problems(report: dict, root: str | Path = "/") -> list[str]:
    """The problems in a :func:`collect` report, each one sentence naming its fix, GPUs first."""
    gpus, cpu, pkgs = report["gpus"], report["cpu"], report["versions"]
    features, disk = cpu.get("features") or {}, report.get("disk") or {}
    mem, free = report.get("memory_bytes") or 0, disk.get("free_bytes")
    nvidia_device = not gpus and (Path(root) / "dev" / "nvidia0").exists()
    bf16 = features.get("bf16_native") or {}
    rules = [
        (not gpus, "no CUDA GPU: training runs on CPU (profiles smoke/local work here); use a "
         "GPU instance (g5/g6/g6e, p4d/p5) for profile full"),
        (nvidia_device, "an NVIDIA device is present but torch sees no GPU: torch is a CPU "
         "build or the driver is not loaded; install the CUDA build of torch==2.13.0 or use "
         "the DLAMI"),
        (not gpus and not nvidia_device and pkgs.get("cuda"), "a CUDA build of torch on a "
         "machine without GPU (GBs of unused CUDA libraries): install the CPU wheel, "
         "torch==2.13.0 from download.pytorch.org/whl/cpu"),
        (gpus and not all(g["bf16"] for g in gpus), "a GPU without bf16 (pre-Ampere, compute "
         "capability < 8.0): training uses fp32 (--bf16 auto turns it off); prefer "
         "A10G/L4/L40S/A100/H100 (g5, g6, g6e, p4d, p5)"),
        (any(len(g.get("peers", [])) < len(gpus) - 1 for g in gpus), "GPUs lack peer-to-peer "
         "access to each other: NCCL all-reduce goes through host memory and DDP scales "
         "poorly; use an NVSwitch instance (p4d/p5)"),
        (len(gpus) > 1 and any(g.get("nvlink") is False for g in gpus), "no NVLink between "
         "the GPUs (PCIe only, as on g5/g6): DDP works, FSDP's all-gathers are slower; for "
         "sharded training prefer p4d/p5"),
        (len(gpus) >= 8 and not report["efa"]["present"], "8 GPUs but no EFA device: "
         "multi-node NCCL would fall back to TCP sockets; launch multi-node jobs with an EFA "
         "interface and aws-ofi-nccl (preinstalled on the DLAMI)"),
        (not bf16.get("available"), f"no native bf16 ({bf16.get('reason')}): bf16 is emulated "
         "and slow here, so training and serving stay fp32; Graviton3+ (c7g/c8g) or Sapphire "
         "Rapids (c7i, AMX) run bf16 faster"),
        *((True, note) for note in features.get("notes") or []),
        (0 < mem < MIN_MEMORY, f"{mem / 2**30:.1f} GiB of RAM: the local profile peaks at "
         "about 3 GB and roberta-base needs more; use an instance with 16 GiB or more "
         "(m7i.xlarge, m7g.xlarge)"),
        (free is not None and free < MIN_FREE_DISK, f"only {(free or 0) / 2**30:.1f} GiB free "
         f"on {disk.get('path')}: the venv takes 2.5 GB and each run writes models; free space "
         "or grow the EBS volume"),
        (not pkgs.get("sagemaker"), "the SageMaker SDK is missing (notebook 03): pip "
         "install sagemaker==3.27.0"),
        (report["profile"] == "full" and not gpus, "profile full needs a GPU and the Hugging "
         "Face hub: use smoke or local here"),
    ]  # fmt: skip
    return [message for applies, message in rules if applies]


def format_report(report: dict) -> str:
    """:func:`collect`'s report as lines of text."""
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
        lines.append("GPUs: none. This is a CPU-only machine: profiles smoke and local run here")
    lines.append(f"profile {report['profile']}: suggested instance {report['suggested_instance']}")
    return "\n".join(lines + [f"note: {n}" for n in report["notes"]])
