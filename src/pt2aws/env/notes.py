"""The problems an environment report shows, each one sentence that names its fix."""

from __future__ import annotations

from pathlib import Path

#: Free disk below which a note is raised, bytes: the venv (2.5 GB) plus a few runs.
MIN_FREE_DISK = 10 * 2**30
#: RAM below which a note is raised, bytes (the local profile peaks at about 3 GB).
MIN_MEMORY = 8 * 2**30


def _gpu_problems(report: dict, root: str | Path) -> list[str]:
    gpus, notes = report["gpus"], []
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
        elif report["versions"].get("cuda"):
            notes.append(
                "a CUDA build of torch on a machine without GPU (GBs of unused CUDA libraries): "
                "install the CPU wheel, torch==2.13.0 from download.pytorch.org/whl/cpu"
            )
    elif not all(g["bf16"] for g in gpus):
        notes.append(
            "a GPU without bf16 (pre-Ampere, compute capability < 8.0): training uses fp32 "
            "(--bf16 auto turns it off); prefer A10G/L4/L40S/A100/H100 (g5, g6, g6e, p4d, p5)"
        )
    if len(gpus) > 1 and any(len(g.get("peers", [])) < len(gpus) - 1 for g in gpus):
        notes.append(
            "GPUs lack peer-to-peer access to each other: NCCL all-reduce goes through host "
            "memory and DDP scales poorly; use an NVSwitch instance (p4d/p5)"
        )
    if len(gpus) > 1 and any(g.get("nvlink") is False for g in gpus):
        notes.append(
            "no NVLink between the GPUs (PCIe only, as on g5/g6): DDP works, FSDP's all-gathers "
            "are slower; for sharded training prefer p4d/p5"
        )
    if len(gpus) >= 8 and not report["efa"]["present"]:
        notes.append(
            "8 GPUs but no EFA device: multi-node NCCL would fall back to TCP sockets; launch "
            "multi-node jobs with an EFA interface and aws-ofi-nccl (preinstalled on the DLAMI)"
        )
    return notes


def problems(report: dict, root: str | Path = "/") -> list[str]:
    """The problems in a :func:`pt2aws.env.collect` report, each naming its fix, GPUs first."""
    notes, cpu = _gpu_problems(report, root), report["cpu"]
    features = cpu.get("features") or {}
    if not cpu["bf16"]:
        generation = f" ({cpu['graviton_generation']})" if cpu.get("graviton_generation") else ""
        why = (features.get("bf16_native") or {}).get("reason") or f"no bf16{generation}"
        notes.append(
            f"no native bf16 ({why}): bf16 is emulated and slow here, so training and serving "
            "stay fp32; Graviton3+ (c7g/c8g) or Sapphire Rapids (c7i, AMX) run bf16 faster"
        )
    notes += features.get("notes") or []
    mem, disk = report.get("memory_bytes"), report.get("disk") or {}
    if mem and mem < MIN_MEMORY:
        notes.append(
            f"{mem / 2**30:.1f} GiB of RAM: the local profile peaks at about 3 GB and roberta-base "
            "needs more; use an instance with 16 GiB or more (m7i.xlarge, m7g.xlarge)"
        )
    if disk.get("free_bytes") is not None and disk["free_bytes"] < MIN_FREE_DISK:
        notes.append(
            f"only {disk['free_bytes'] / 2**30:.1f} GiB free on {disk['path']}: the venv takes "
            "2.5 GB and each run writes models; free space or grow the EBS volume"
        )
    if not report["versions"].get("sagemaker"):
        notes.append("the SageMaker SDK is missing (notebook 03): pip install sagemaker==3.27.0")
    if report["profile"] == "full" and not report["gpus"]:
        notes.append("profile full needs a GPU and the Hugging Face hub: use smoke or local here")
    return notes
