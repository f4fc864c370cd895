"""Probes of this machine: CPU features, GPUs, memory, disk, EFA, platform, package versions.

Each probe returns plain JSON-serialisable values and never fails on a CPU-only machine. The
file-reading probes take a ``root`` (default ``/``) and :func:`platform_info` an ``environ``
mapping, so tests can point them at a fake ``/proc``, ``/sys`` and ``/opt``.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path

from pt2aws.sizing.catalog import processor_by_cpu_part
from pt2aws.system import is_arm64


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


def cpu_info(root: str | Path = "/", machine: str | None = None, features=None) -> dict:
    """CPU model, cores and the ML-relevant features, as this process will use them.

    Model and cores come from ``/proc/cpuinfo``; the features from
    :func:`pt2aws.env.cpu.cpu_features` (the kernel's view: HWCAP on aarch64, CPUID on x86;
    honouring ``ATEN_CPU_CAPABILITY`` / ``ONEDNN_MAX_CPU_ISA`` caps), because under QEMU user-mode
    emulation ``/proc/cpuinfo`` describes the host. With a ``root`` other than ``/`` (tests),
    the features are read from that tree's ``proc/cpuinfo`` flags, without caps.

    Args:
        root: file-system root to read ``proc/cpuinfo`` under (tests use a fake one).
        machine: ``platform.machine()`` override (``x86_64``, ``aarch64``).
        features: a :class:`pt2aws.env.cpu.CpuFeatures` to report instead of probing.

    Returns:
        ``{"model", "logical_cores", "physical_cores", "bf16", "int8_dot", "amx", "avx512",
        "sve", "sve2", "isa", "graviton", "graviton_generation", "core", "features"}``. Flags
        are bools (``bf16``: native bf16, ``int8_dot``: int8 dot-product instructions, both as
        capped); ``isa`` is torch's dispatch level; ``features`` is
        :meth:`CpuFeatures.as_dict` (with the reasons); ``graviton_generation`` is e.g.
        ``"Graviton3"`` and ``core`` ``"Neoverse V1"``, from the ``CPU part`` number and the
        instance catalog (:func:`pt2aws.sizing.catalog.processor_by_cpu_part`), else None.
    """
    from pt2aws.env.cpu import cpu_features, features_from, hardware_from_cpuinfo

    machine = machine or platform.machine()
    arm = is_arm64(machine)
    model, part, cores = None, None, set()
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
        elif key == "physical id":
            physical_id = value
        elif key == "core id":
            cores.add((physical_id, value))
    if features is None:
        if Path(root) == Path("/"):
            features = cpu_features()
        else:
            hardware = hardware_from_cpuinfo(text)
            features = features_from(machine, hardware, environ={}, model=model or machine)
    if arm and any(line.startswith("flags") for line in text.splitlines()):
        model = part = None  # an x86 host's /proc/cpuinfo under QEMU user mode: not this CPU
    generation, core = processor_by_cpu_part(part or "") or (None, None)
    if model is None:
        model = f"{generation} ({core})" if generation else features.model or machine
    logical_cores = (
        os.cpu_count() if Path(root) == Path("/") and os.cpu_count() else logical or None
    )
    return {
        "model": model,
        "logical_cores": logical_cores,
        "physical_cores": len(cores) or (logical_cores if arm else None),
        "bf16": features.bf16_native.available,
        "int8_dot": features.int8_dot.available,
        "amx": features.amx.available,
        "avx512": features.avx512.available,
        "sve": features.sve.available,
        "sve2": "sve2" in features.hardware and features.sve.available,
        "isa": features.isa,
        "graviton": bool(generation) or (arm and bool({"sve", "bf16"} & features.hardware)),
        "graviton_generation": generation,
        "core": core,
        "features": features.as_dict(),
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


def versions() -> dict:
    """Versions of torch, its CUDA / cuDNN / NCCL (None on a CPU build or without a GPU) and
    of the Python packages pt2aws uses (None when not installed)."""
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
