"""CPU inference runtime settings (the AWS Graviton guide's), defined once for every server.

Source: AWS Graviton Technical Guide, machinelearning/pytorch.md
(github.com/aws/aws-graviton-getting-started, checked 2026-11):

* ``DNNL_DEFAULT_FPMATH_MODE=BF16``: oneDNN's bf16 "fast math" GEMM kernels for fp32 models,
  only where the CPU has bf16 instructions (Graviton3 and later; ``HWCAP2_BF16`` in the
  auxiliary vector, :func:`pt2aws.env.cpu_features`);
* ``LRU_CACHE_CAPACITY=1024``: oneDNN primitive cache, so kernels are reused across input shapes;
* ``THP_MEM_ALLOC_ENABLE=1``: transparent huge pages for large tensors (fewer TLB misses);
* ``OMP_NUM_THREADS = vCPUs / processes``: one intra-op thread pool per model-server worker.

:func:`graviton_settings` computes them from facts (architecture, bf16, vCPUs, processes);
:func:`runtime_settings` feeds it this machine's facts, and
:func:`pt2aws.aws.deploy.endpoint_environment` an instance type's facts from the catalog.
:func:`set_runtime_environment` puts them in this process's environment (the serving image's
server, before its workers import torch); :func:`apply_runtime_settings` does that and sets
torch's thread count (a notebook, a benchmark).
"""

from __future__ import annotations

import logging
import os

logger = logging.getLogger(__name__)


def graviton_settings(*, arm64: bool, bf16: bool, vcpus: int, processes: int = 1) -> dict:
    """The runtime environment for CPU inference and the reason for each variable.

    Args:
        arm64: the CPU is 64-bit Arm (Graviton).
        bf16: the CPU has bf16 instructions (Graviton3+; on x86 AVX512-BF16/AMX).
        vcpus: vCPUs the processes share.
        processes: inference processes (model-server workers) sharing them.

    Returns:
        ``{"env": {name: value}, "reasons": {name: str}, "threads": int}``; values are strings,
        ready for a container environment. ``DNNL_DEFAULT_FPMATH_MODE`` is only in ``env`` on
        arm64 with bf16 (the guide's setting is for Graviton).

    Raises:
        ValueError: ``vcpus`` or ``processes`` below 1.
    """
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
    }
    if arm64 and bf16:
        env["DNNL_DEFAULT_FPMATH_MODE"] = "BF16"
        reasons["DNNL_DEFAULT_FPMATH_MODE"] = "arm64 with bf16 (Graviton3+): bf16 fast math"
    else:
        reasons["DNNL_DEFAULT_FPMATH_MODE"] = "not set: " + (
            "arm64 without bf16 (Graviton2)"
            if arm64
            else "x86 (the guide's setting is for Graviton)"
        )
    return {"env": env, "reasons": reasons, "threads": threads}


def runtime_settings(num_processes: int = 1, cpu: dict | None = None) -> dict:
    """:func:`graviton_settings` for this machine, plus its transparent-huge-page mode.

    Args:
        num_processes: inference processes sharing the CPUs (model-server workers).
        cpu: ``{"bf16": bool, "graviton": bool}`` to use instead of this machine's
            :func:`pt2aws.env.cpu_features` (native bf16 from the kernel's HWCAP, so an emulated
            or containerised Graviton is seen as it is, and ``ONEDNN_MAX_CPU_ISA`` caps count).

    Returns:
        ``{"env": {name: value}, "threads": int, "reasons": {name: str}, "thp_mode": str|None}``.
    """
    from pt2aws.env.machine import available_cpus, is_arm64

    if cpu is None:
        from pt2aws.env import cpu_features

        features = cpu_features()
        cpu = {"bf16": features.bf16_native.available, "graviton": is_arm64(features.arch)}
    settings = graviton_settings(
        arm64=is_arm64() or bool(cpu.get("graviton")),
        bf16=bool(cpu.get("bf16")),
        vcpus=available_cpus(),
        processes=max(1, num_processes),
    )
    thp_mode = None
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as fh:
            thp_mode = fh.read().split("[")[1].split("]")[0]
    except (OSError, IndexError):
        pass
    return {**settings, "thp_mode": thp_mode}


def set_runtime_environment(num_processes: int = 1, *, override: bool = False) -> dict:
    """Put :func:`runtime_settings` in ``os.environ`` and log each (without importing torch).

    Environment variables already set (e.g. by the endpoint's ``Environment``) are kept unless
    ``override``. ``THP_MEM_ALLOC_ENABLE`` and ``LRU_CACHE_CAPACITY`` are read when torch
    allocates / first builds oneDNN kernels, and ``OMP_NUM_THREADS`` when it starts, so they act
    fully only when set before ``import torch`` (the serving image's server calls this before
    its workers start).

    Returns:
        :func:`runtime_settings` plus ``"applied": {name: value}`` (what this call set) and
        ``"kept": {name: value}`` (pre-set values left alone).
    """
    settings = runtime_settings(num_processes)
    applied, kept = {}, {}
    for name, value in settings["env"].items():
        if name in os.environ and not override:
            kept[name] = os.environ[name]
        else:
            os.environ[name] = value
            applied[name] = value
    for name, reason in settings["reasons"].items():
        logger.info("runtime: %s=%s (%s)", name, os.environ.get(name, "-"), reason)
    return {**settings, "applied": applied, "kept": kept}


def apply_runtime_settings(num_processes: int = 1, *, override: bool = False) -> dict:
    """:func:`set_runtime_environment`, then ``torch.set_num_threads`` to the thread count.

    Returns:
        :func:`set_runtime_environment`'s record plus ``"torch_threads"``.
    """
    import torch

    settings = set_runtime_environment(num_processes, override=override)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", settings["threads"])))
    return {**settings, "torch_threads": torch.get_num_threads()}
