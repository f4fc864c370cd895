"""The problems an environment report shows, each one sentence that names its fix."""

from __future__ import annotations

from pathlib import Path

#: Free disk below which a note is raised, bytes: the venv (2.5 GB) plus a few runs.
MIN_FREE_DISK = 10 * 2**30
#: RAM below which a note is raised, bytes (the local profile peaks at about 3 GB).
MIN_MEMORY = 8 * 2**30


def problems(report: dict, root: str | Path = "/") -> list[str]:
    """The problems in a :func:`pt2aws.env.collect` report, each naming its fix, GPUs first."""
    gpus, cpu, versions = report["gpus"], report["cpu"], report["versions"]
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
        (not gpus and not nvidia_device and versions.get("cuda"), "a CUDA build of torch on a "
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
        (not versions.get("sagemaker"), "the SageMaker SDK is missing (notebook 03): pip "
         "install sagemaker==3.27.0"),
        (report["profile"] == "full" and not gpus, "profile full needs a GPU and the Hugging "
         "Face hub: use smoke or local here"),
    ]  # fmt: skip
    return [message for applies, message in rules if applies]
