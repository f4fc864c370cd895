"""What this machine is: versions, accelerators, CPU features, memory, disk, network, platform.

``collect()`` never fails on a CPU-only machine (it says so); each problem found comes with its
fix in ``report["notes"]``. Every probe reads files under a ``root`` (default ``/``) and an
``environ`` mapping, so tests can point it at a fake ``/proc`` and ``/sys``.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path

from pt2aws.config import get_profile

#: Arm MIDR part numbers of the Neoverse cores in AWS Graviton processors (Linux
#: ``arch/arm64/include/asm/cputype.h``: NEOVERSE_N1 0xD0C, NEOVERSE_V1 0xD40, NEOVERSE_V2 0xD4F).
GRAVITON_PARTS = {
    "0xd0c": ("Graviton2", "Neoverse N1"),
    "0xd40": ("Graviton3", "Neoverse V1"),
    "0xd4f": ("Graviton4", "Neoverse V2"),
}
#: Free disk below which a note is raised, bytes: the venv (2.5 GB) plus a few runs.
MIN_FREE_DISK = 10 * 2**30
#: RAM below which a note is raised, bytes (the local profile peaks at about 3 GB).
MIN_MEMORY = 8 * 2**30


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def cpu_info(root: str | Path = "/", machine: str | None = None) -> dict:
    """CPU model, cores and the ML-relevant feature flags (Linux ``/proc/cpuinfo``).

    Args:
        root: file-system root to read ``proc/cpuinfo`` under (tests use a fake one).
        machine: ``platform.machine()`` override (``x86_64``, ``aarch64``).

    Returns:
        ``{"model", "logical_cores", "physical_cores", "bf16", "amx", "avx512", "sve", "sve2",
        "graviton", "graviton_generation", "core"}``. Flags are bools (False when
        ``/proc/cpuinfo`` is unreadable); ``graviton_generation`` is e.g. ``"Graviton3"`` or None.
    """
    machine = machine or platform.machine()
    arm = machine in ("aarch64", "arm64")
    model, part, flags, cores = None, None, set(), set()
    physical_id = "0"
    text = _read(Path(root) / "proc" / "cpuinfo") or ""
    logical = 0
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "processor":
            logical += 1
        elif key == "model name" and not model:
            model = value
        elif key == "CPU part" and not part:
            part = value.lower()
        elif key in ("flags", "Features"):
            flags.update(value.split())
        elif key == "physical id":
            physical_id = value
        elif key == "core id":
            cores.add((physical_id, value))
    generation, core = GRAVITON_PARTS.get(part or "", (None, None))
    if model is None:
        model = (
            f"{generation} ({core})" if generation else platform.processor() or machine or "unknown"
        )
    logical_cores = (
        os.cpu_count() if Path(root) == Path("/") and os.cpu_count() else logical or None
    )
    return {
        "model": model,
        "logical_cores": logical_cores,
        "physical_cores": len(cores) or (logical_cores if arm else None),
        "bf16": bool({"avx512_bf16", "amx_bf16", "bf16"} & flags),
        "amx": "amx_tile" in flags,
        "avx512": "avx512f" in flags,
        "sve": "sve" in flags,
        "sve2": "sve2" in flags,
        "graviton": bool(generation) or (arm and ("sve" in flags or "bf16" in flags)),
        "graviton_generation": generation,
        "core": core,
    }


def _nvlink_topology() -> str | None:
    """``nvidia-smi topo -m`` text, or None without nvidia-smi (10 s timeout)."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        return subprocess.run(
            [exe, "topo", "-m"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def gpu_info() -> list[dict]:
    """One entry per visible CUDA GPU.

    Returns:
        Dicts with ``index``, ``name``, ``memory_bytes``, ``compute_capability`` ("8.0"),
        ``bf16`` (compute capability >= 8.0), ``peers`` (indices it can reach by P2P) and
        ``nvlink`` (True/False from ``nvidia-smi topo -m``, None when unknown).
    """
    import torch

    if not torch.cuda.is_available():
        return []
    count = torch.cuda.device_count()
    topo = _nvlink_topology() if count > 1 else None
    gpus = []
    for i in range(count):
        props = torch.cuda.get_device_properties(i)
        peers = [j for j in range(count) if j != i and torch.cuda.can_device_access_peer(i, j)]
        nvlink = None
        if topo:
            row = next((ln for ln in topo.splitlines() if ln.startswith(f"GPU{i}")), "")
            nvlink = any(cell.startswith("NV") for cell in row.split()[1 : count + 1])
        gpus.append(
            {
                "index": i,
                "name": props.name,
                "memory_bytes": int(props.total_memory),
                "compute_capability": f"{props.major}.{props.minor}",
                "bf16": props.major >= 8,
                "peers": peers,
                "nvlink": nvlink,
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
    """Total and free bytes of the file system holding ``path``."""
    path = Path(path)
    while not path.exists() and path != path.parent:
        path = path.parent
    usage = shutil.disk_usage(path)
    return {"path": str(path.resolve()), "total_bytes": usage.total, "free_bytes": usage.free}


def efa_info(root: str | Path = "/") -> dict:
    """Elastic Fabric Adapter devices: RDMA devices whose kernel driver is ``efa``.

    Returns:
        ``{"present": bool, "devices": [names]}`` from ``/sys/class/infiniband/*/device/driver``.
    """
    devices = []
    base = Path(root) / "sys" / "class" / "infiniband"
    for dev in sorted(base.glob("*")) if base.is_dir() else []:
        driver = dev / "device" / "driver"
        try:
            name = Path(os.readlink(driver)).name if driver.is_symlink() else None
        except OSError:
            name = None
        if name == "efa" or (driver / "efa").exists():
            devices.append(dev.name)
    return {"present": bool(devices), "devices": devices}


def platform_info(root: str | Path = "/", environ: Mapping[str, str] | None = None) -> dict:
    """Where this runs: DLAMI, an AWS Deep Learning Container, SageMaker (Studio, job), container.

    Signals (each documented by AWS): the DLAMI keeps ``/opt/dlami`` (NVMe mount point
    ``/opt/dlami/nvme`` in the DLAMI release notes) and its PyTorch at ``/opt/pytorch``; DLC
    Dockerfiles set ``DLC_CONTAINER_TYPE`` (training / inference); SageMaker Studio and notebook
    instances write ``/opt/ml/metadata/resource-metadata.json`` (Studio's has a ``DomainId``);
    training jobs set ``TRAINING_JOB_NAME`` / ``SM_TRAINING_ENV``.

    Returns:
        ``{"dlami": bool, "dlc": str | None, "sagemaker": str | None, "container": bool,
        "summary": str}``.
    """
    import json

    root, env = Path(root), os.environ if environ is None else environ
    dlami = (root / "opt" / "dlami").is_dir() or (root / "opt" / "pytorch" / "bin").is_dir()
    dlc = env.get("DLC_CONTAINER_TYPE") or None
    sagemaker = None
    meta = _read(root / "opt" / "ml" / "metadata" / "resource-metadata.json")
    if env.get("TRAINING_JOB_NAME") or env.get("SM_TRAINING_ENV"):
        sagemaker = "training-job"
    elif meta is not None:
        try:
            parsed = json.loads(meta)
        except ValueError:
            parsed = {}
        sagemaker = "studio" if parsed.get("DomainId") else "notebook-instance"
    container = (root / ".dockerenv").exists() or bool(dlc)
    parts = []
    if sagemaker:
        parts.append(
            {
                "studio": "SageMaker Studio",
                "notebook-instance": "SageMaker notebook instance",
                "training-job": "SageMaker training job",
            }[sagemaker]
        )
    if dlc:
        parts.append(f"AWS Deep Learning Container ({dlc})")
    if dlami:
        parts.append("AWS Deep Learning AMI")
    if container and not dlc:
        parts.append("a container")
    return {
        "dlami": dlami,
        "dlc": dlc,
        "sagemaker": sagemaker,
        "container": container,
        "summary": ", ".join(parts) or "not a DLAMI, DLC or SageMaker: a plain machine",
    }


def _versions() -> dict:
    import torch

    cudnn = nccl = None
    if torch.cuda.is_available():
        cudnn = torch.backends.cudnn.version()
        try:
            nccl = ".".join(map(str, torch.cuda.nccl.version()))
        except (AttributeError, RuntimeError):
            nccl = None
    return {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": cudnn,
        "nccl": nccl,
        "transformers": _version("transformers"),
        "datasets": _version("datasets"),
        "sagemaker": _version("sagemaker"),
        "boto3": _version("boto3"),
        "pt2aws": _version("pt2aws"),
    }


def problems(report: dict, root: str | Path = "/") -> list[str]:
    """The problems in ``report``, each with its fix (the ``notes`` of :func:`collect`)."""
    notes = []
    gpus, cpu, v = report["gpus"], report["cpu"], report["versions"]
    if not gpus:
        notes.append(
            "no CUDA GPU: training runs on CPU (profiles smoke/local work here); use a GPU "
            "instance (g5/g6/g6e, p4d/p5) for profile full"
        )
        if (Path(root) / "dev" / "nvidia0").exists():
            notes.append(
                "an NVIDIA device is present but torch sees no GPU: torch is a CPU build or the "
                "driver is not loaded; install the CUDA build of torch==2.13.0 or use the DLAMI"
            )
        elif v.get("cuda"):
            notes.append(
                "a CUDA build of torch on a machine without GPU (GBs of unused CUDA libraries): "
                "install the CPU wheel, torch==2.13.0 from download.pytorch.org/whl/cpu"
            )
    elif not all(g["bf16"] for g in gpus):
        notes.append(
            "a GPU without bf16 (pre-Ampere, compute capability < 8.0): training uses fp32 "
            "(--bf16 auto turns it off; pt2aws has no fp16 scaler path); prefer A10G/L4/L40S/"
            "A100/H100 instances (g5, g6, g6e, p4d, p5)"
        )
    if len(gpus) > 1:
        isolated = [g["index"] for g in gpus if len(g.get("peers", [])) < len(gpus) - 1]
        if isolated:
            notes.append(
                f"GPUs {isolated} lack peer-to-peer access to some GPUs: NCCL all-reduce goes "
                "through host memory and DDP scales poorly; use an NVSwitch instance (p4d/p5)"
            )
        if any(g.get("nvlink") is False for g in gpus):
            notes.append(
                "no NVLink between the GPUs (PCIe only, as on g5/g6): DDP works, FSDP's "
                "all-gathers are slower; for sharded training prefer p4d/p5"
            )
        if not report["efa"]["present"] and len(gpus) >= 8:
            notes.append(
                "8 GPUs but no EFA device: multi-node NCCL would fall back to TCP sockets; "
                "single-node runs are fine; for multi-node launch with an EFA interface and "
                "the aws-ofi-nccl plugin (preinstalled on the DLAMI)"
            )
    if not cpu["bf16"]:
        notes.append(
            "this CPU has no bf16 instructions"
            + (f" ({cpu['graviton_generation']})" if cpu.get("graviton_generation") else "")
            + ": Graviton3+ (c7g/c8g) or Sapphire Rapids (c7i, AMX) run bf16 inference faster"
        )
    mem = report.get("memory_bytes")
    if mem and mem < MIN_MEMORY:
        notes.append(
            f"{mem / 2**30:.1f} GiB of RAM: the local profile peaks at about 3 GB and roberta-base "
            "needs more; use an instance with 16 GiB or more (m7i.xlarge, m7g.xlarge)"
        )
    disk = report.get("disk") or {}
    if disk.get("free_bytes") is not None and disk["free_bytes"] < MIN_FREE_DISK:
        notes.append(
            f"only {disk['free_bytes'] / 2**30:.1f} GiB free on {disk['path']}: the venv takes "
            "2.5 GB and each run writes models (0.5 GB for roberta-base); free space or grow "
            "the EBS volume"
        )
    if not v.get("sagemaker"):
        notes.append("the SageMaker SDK is missing (notebook 03): pip install sagemaker==3.27.0")
    if report["profile"] == "full" and not gpus:
        notes.append(
            "profile full needs a GPU and the Hugging Face hub; this machine has no GPU: use "
            "smoke or local"
        )
    return notes


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
        "versions": _versions(),
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
        f"{cpu.get('physical_cores') or '?'} physical cores; bf16={cpu['bf16']} amx={cpu['amx']} "
        f"avx512={cpu['avx512']} sve={cpu['sve']} graviton={cpu['graviton']}",
        f"memory: {mem / 2**30:.1f} GiB" if mem else "memory: unknown",
    ]
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
