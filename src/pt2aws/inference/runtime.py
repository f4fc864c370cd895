"""CPU inference runtime settings from the AWS Graviton Technical Guide (aws-graviton-getting-
started, machinelearning/pytorch.md), read by torch at import: the server sets them before its
workers start."""

from __future__ import annotations

import logging
import os

logger = logging.getLogger(__name__)


def graviton_settings(*, arm64: bool, bf16: bool, vcpus: int, processes: int = 1) -> dict:
    """``{"env": {name: str}, "reasons": {name: str}, "threads": int}`` for CPU inference
    (``DNNL_DEFAULT_FPMATH_MODE`` only on arm64 with bf16); ValueError for counts below 1."""
    if vcpus < 1 or processes < 1:
        raise ValueError(f"vcpus ({vcpus}) and processes ({processes}) must be >= 1")
    threads = max(1, vcpus // processes)
    env = {
        "LRU_CACHE_CAPACITY": "1024",
        "THP_MEM_ALLOC_ENABLE": "1",
        "OMP_NUM_THREADS": str(threads),
    }
    reasons = {
        "LRU_CACHE_CAPACITY": "oneDNN primitive cache: reuse kernels across input shapes",
        "THP_MEM_ALLOC_ENABLE": "transparent huge pages for large tensors: fewer TLB misses",
        "OMP_NUM_THREADS": f"{vcpus} vCPUs / {processes} process(es)",
        "DNNL_DEFAULT_FPMATH_MODE": "not set: x86 (the guide's setting is for Graviton)",
    }
    if arm64:
        reasons["DNNL_DEFAULT_FPMATH_MODE"] = "not set: arm64 without bf16 (Graviton2)"
    if arm64 and bf16:
        env["DNNL_DEFAULT_FPMATH_MODE"] = "BF16"
        reasons["DNNL_DEFAULT_FPMATH_MODE"] = "arm64 with bf16 (Graviton3+): bf16 fast math"
    return {"env": env, "reasons": reasons, "threads": threads}


def runtime_settings(num_processes: int = 1, cpu: dict | None = None) -> dict:
    """:func:`graviton_settings` for this machine (or ``cpu``: ``{"bf16", "graviton"}``), plus
    ``"thp_mode"`` (the kernel's transparent huge page mode, or None)."""
    from pt2aws.env.machine import available_cpus, is_arm64

    if cpu is None:
        from pt2aws import env

        features = env.cpu_features()
        cpu = {"bf16": features.bf16_native.available, "graviton": is_arm64(features.arch)}
    settings = graviton_settings(arm64=is_arm64() or bool(cpu.get("graviton")), bf16=bool(cpu.get("bf16")),
                                 vcpus=available_cpus(), processes=max(1, num_processes))  # fmt: skip
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as fh:
            settings["thp_mode"] = fh.read().split("[")[1].split("]")[0]
    except (OSError, IndexError):
        settings["thp_mode"] = None
    return settings


def set_runtime_environment(num_processes: int = 1) -> dict:
    """Put :func:`runtime_settings` in ``os.environ``, keeping variables already set; logs each.
    Adds ``"applied"``/``"kept"``."""
    settings = runtime_settings(num_processes)
    settings["applied"], settings["kept"] = {}, {}
    for name, value in settings["env"].items():
        if name in os.environ:
            settings["kept"][name] = os.environ[name]
        else:
            os.environ[name] = settings["applied"][name] = value
    for name, reason in settings["reasons"].items():
        logger.info("runtime: %s=%s (%s)", name, os.environ.get(name, "-"), reason)
    return settings


def apply_runtime_settings() -> dict:
    """:func:`set_runtime_environment`, then ``torch.set_num_threads``; adds ``"torch_threads"``."""
    import torch

    settings = set_runtime_environment()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", settings["threads"])))
    return {**settings, "torch_threads": torch.get_num_threads()}


def fp32_matmul_mode(env: dict[str, str]) -> str:
    """``"fp32"``, or ``"bf16 (<name>=<mode>)"`` where oneDNN's fast-math mode makes fp32 matrix
    products bf16."""
    for name in ("ONEDNN_DEFAULT_FPMATH_MODE", "DNNL_DEFAULT_FPMATH_MODE"):
        if (env.get(name) or "").upper() in ("BF16", "ANY"):
            return f"bf16 ({name}={env[name].upper()})"
    return "fp32"
