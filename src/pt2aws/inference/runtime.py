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
    fast_math = arm64 and bf16
    env = {"LRU_CACHE_CAPACITY": "1024", "THP_MEM_ALLOC_ENABLE": "1",
           "OMP_NUM_THREADS": str(threads)}  # fmt: skip
    if fast_math:
        env["DNNL_DEFAULT_FPMATH_MODE"] = "BF16"
    reasons = {
        "LRU_CACHE_CAPACITY": "oneDNN primitive cache: reuse kernels across input shapes",
        "THP_MEM_ALLOC_ENABLE": "transparent huge pages for large tensors: fewer TLB misses",
        "OMP_NUM_THREADS": f"{vcpus} vCPUs / {processes} process(es)",
        "DNNL_DEFAULT_FPMATH_MODE": "arm64 with bf16 (Graviton3+): bf16 fast math" if fast_math
        else "not set: arm64 without bf16 (Graviton2)" if arm64
        else "not set: x86 (the guide's setting is for Graviton)",
    }  # fmt: skip
    return {"env": env, "reasons": reasons, "threads": threads}


def apply_runtime_settings(processes: int = 1, *, torch_threads: bool = True) -> dict:
    """:func:`graviton_settings` for this CPU put in ``os.environ`` (a variable already set is kept
    and ``"env"`` shows it), each logged; then ``torch.set_num_threads`` and ``"torch_threads"``
    unless not ``torch_threads`` (the server, before its workers import torch)."""
    from pt2aws import env
    from pt2aws.env.machine import available_cpus, is_arm64

    features = env.cpu_features()
    settings = graviton_settings(arm64=is_arm64(features.arch), vcpus=available_cpus(),
                                 bf16=features.bf16_native.available, processes=processes)  # fmt: skip
    settings["env"] = {name: os.environ.setdefault(name, v) for name, v in settings["env"].items()}
    for name, reason in settings["reasons"].items():
        logger.info("runtime: %s=%s (%s)", name, os.environ.get(name, "-"), reason)
    if torch_threads:
        import torch

        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
        settings["torch_threads"] = torch.get_num_threads()
    return settings
