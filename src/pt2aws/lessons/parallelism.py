"""Data, fully sharded and tensor parallelism side by side, on 2 CPU processes (notebook 01).

* :func:`compare_memory`: the same model trained one step under DDP and under FSDP2, reporting
  what each rank holds (parameters, gradients, AdamW state) and its peak resident memory. DDP
  keeps a full replica of everything on every rank; FSDP2 keeps ``1 / world_size`` of each
  tensor and all-gathers one layer's weights at a time.
* :func:`tensor_parallel_demo`: a 2-layer MLP split with ``torch.distributed.tensor.parallel``
  (first layer column-wise, second row-wise, Megatron-LM style): each rank holds half of each
  weight, and the output equals the unsplit model's.

Each runs ``torchrun --nproc_per_node 2 -m pt2aws.lessons.parallelism --mode …`` in fresh CPU
processes (gloo, also on a GPU machine), so a notebook kernel never starts a process group and
each measurement starts clean.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from torch import nn

from pt2aws.env.machine import peak_memory_bytes
from pt2aws.train.distributed import all_gather, compute_cleanup, compute_init, exit_worker


def make_mlp(dim: int = 1024, layers: int = 8) -> nn.Sequential:
    """``layers`` square ``Linear(dim, dim)`` + ReLU blocks: ``layers * (dim**2 + dim)`` params."""
    return nn.Sequential(*(nn.Sequential(nn.Linear(dim, dim), nn.ReLU()) for _ in range(layers)))


def _local(t: torch.Tensor) -> torch.Tensor:
    """A DTensor's shard on this rank; a plain tensor as is."""
    return t.to_local() if hasattr(t, "to_local") else t


def _bytes(tensors) -> int:
    return sum(_local(t).numel() * t.element_size() for t in tensors if t is not None)


def _current_rss_bytes() -> int | None:
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE")


def _memory_worker(mode: str, dim: int, layers: int) -> dict:
    """One rank: build, wrap (``mode``), one AdamW step; what this rank holds afterwards."""
    from torch.distributed.fsdp import fully_shard
    from torch.nn.parallel import DistributedDataParallel as DDP

    warm = nn.Linear(64, 64)  # a first step loads kernels and thread pools: do it beforehand,
    warm(torch.randn(8, 64)).sum().backward()  # so that the growth measured below is the model
    torch.optim.AdamW(warm.parameters()).step()
    rss_start = _current_rss_bytes()
    torch.manual_seed(0)
    if mode == "fsdp":
        with torch.device("meta"):  # FSDP2 idiom: no rank ever holds the whole model
            model = make_mlp(dim, layers)
        for block in model:
            fully_shard(block)  # one unit per layer: all-gathered for its forward, then freed
        fully_shard(model)
        model.to_empty(device="cpu")  # allocate this rank's shards only, then initialise them
        for module in model.modules():
            if isinstance(module, nn.Linear):
                module.reset_parameters()
        step_model = model
    else:
        model = make_mlp(dim, layers)
        step_model = DDP(model)  # a full replica per rank, plus gradient buckets for all-reduce
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(16, dim, generator=torch.Generator().manual_seed(1))
    step_model(x).pow(2).mean().backward()
    optimizer.step()
    state = [t for s in optimizer.state.values() for t in s.values() if torch.is_tensor(t)]
    peak = peak_memory_bytes("cpu")
    return {
        "parameters_bytes": _bytes(model.parameters()),
        "gradients_bytes": _bytes(p.grad for p in model.parameters()),
        "optimizer_state_bytes": _bytes(state),
        "peak_rss_bytes": peak,
        "peak_rss_increase_bytes": peak - rss_start if rss_start else None,
    }


def _tensor_parallel_worker(dim: int, hidden: int) -> dict:
    """One rank: column-wise first layer, row-wise second; compare with the unsplit MLP."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    mesh = init_device_mesh("cpu", (int(os.environ["WORLD_SIZE"]),))
    torch.manual_seed(0)  # the same weights on every rank before splitting
    mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))
    reference = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))
    reference.load_state_dict(mlp.state_dict())
    x = torch.randn(4, dim, generator=torch.Generator().manual_seed(1))
    parallelize_module(mlp, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    with torch.no_grad():
        out, expected = mlp(x), reference(x)
    return {
        "up_weight_local_shape": list(_local(mlp[0].weight).shape),
        "up_weight_full_shape": list(reference[0].weight.shape),
        "down_weight_local_shape": list(_local(mlp[2].weight).shape),
        "down_weight_full_shape": list(reference[2].weight.shape),
        "output_max_abs_diff": float((_local(out) - expected).abs().max()),
    }


def main(argv: list[str] | None = None) -> dict:
    """Worker entry under torchrun: ``--mode ddp|fsdp|tp --out FILE.json``; rank 0 writes FILE.

    Returns:
        ``{"mode", "world_size", "ranks": [one dict per rank]}`` (on every rank).
    """
    parser = argparse.ArgumentParser(description="pt2aws parallelism demonstration worker")
    parser.add_argument("--mode", choices=("ddp", "fsdp", "tp"), required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=8)
    args = parser.parse_args(argv)
    info = compute_init(num_threads=1)
    succeeded = False
    try:
        if args.mode == "tp":
            mine = _tensor_parallel_worker(args.dim, 2 * args.dim)
        else:
            mine = _memory_worker(args.mode, args.dim, args.layers)
        result = {"mode": args.mode, "world_size": info.world_size, "ranks": all_gather(mine, info)}
        if info.is_main:
            Path(args.out).write_text(json.dumps(result, indent=2))
        succeeded = True
        return result
    finally:
        compute_cleanup(info, succeeded=succeeded)


def _launch(modes: dict[str, list[str]], nproc: int, timeout_s: float) -> dict[str, dict]:
    """Start one torchrun per mode (in parallel), wait, and read each result file."""
    with tempfile.TemporaryDirectory(prefix="pt2aws-parallelism-") as tmp:
        # glibc keeps freed blocks for reuse, so RSS would stay at its high-water mark after
        # FSDP frees a gathered layer; with a fixed mmap threshold, blocks of 64 KiB and more
        # go back to the OS when freed and RSS follows the live tensors (no effect off glibc).
        # CUDA_VISIBLE_DEVICES="": CPU processes and gloo on a GPU machine too (the models and
        # inputs here live on the CPU; NCCL would refuse them).
        env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "CUDA_VISIBLE_DEVICES": ""}
        procs = {}
        for mode, extra in modes.items():
            out = Path(tmp) / f"{mode}.json"
            cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
            cmd += [f"--nproc_per_node={nproc}", "-m", "pt2aws.lessons.parallelism"]
            cmd += ["--mode", mode, "--out", str(out), *extra]
            procs[mode] = (
                out,
                subprocess.Popen(
                    cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
                ),
            )
        results = {}
        for mode, (out, proc) in procs.items():
            output, _ = proc.communicate(timeout=timeout_s)
            if proc.returncode != 0:
                raise RuntimeError(f"{mode} run exited {proc.returncode}:\n{output[-3000:]}")
            results[mode] = json.loads(out.read_text())
    return results


def compare_memory(
    dim: int = 1024, layers: int = 8, nproc: int = 2, timeout_s: float = 300
) -> list[dict]:
    """Per-rank memory of DDP and FSDP2 for the same MLP after one AdamW step, side by side.

    Args:
        dim: width of each square layer (default 1024: 8 layers are 8.4 M params, 33.6 MB fp32).
        layers: number of layers.
        nproc: processes (ranks).
        timeout_s: per run, seconds.

    Returns:
        One row per strategy: ``parallelism``, ``parameters_bytes``, ``gradients_bytes``,
        ``optimizer_state_bytes``, ``total_bytes`` (the three summed; rank 0, bytes),
        ``peak_rss_bytes`` and ``peak_rss_increase_bytes`` (rank 0's peak resident set size,
        and its growth over the process's size before the model was built: it also counts
        DDP's gradient buckets and FSDP's all-gather buffers, which the tensor sums leave out).

    Raises:
        RuntimeError: a run failed (the message holds its output).
    """
    extra = ["--dim", str(dim), "--layers", str(layers)]
    results = _launch({"ddp": extra, "fsdp": extra}, nproc, timeout_s)
    rows = []
    for mode in ("ddp", "fsdp"):
        rank0 = results[mode]["ranks"][0]
        tensors = ("parameters_bytes", "gradients_bytes", "optimizer_state_bytes")
        rows.append(
            {
                "parallelism": mode,
                "world_size": results[mode]["world_size"],
                **{k: rank0[k] for k in tensors},
                "total_bytes": sum(rank0[k] for k in tensors),
                "peak_rss_bytes": rank0["peak_rss_bytes"],
                "peak_rss_increase_bytes": rank0["peak_rss_increase_bytes"],
            }
        )
    return rows


def tensor_parallel_demo(dim: int = 16, nproc: int = 2, timeout_s: float = 300) -> dict:
    """Split a ``dim -> 2*dim -> dim`` MLP over ``nproc`` ranks with tensor parallelism.

    Returns:
        ``world_size`` and ``ranks``: per rank, the local and full shapes of both weights
        (``[out_features, in_features]``) and ``output_max_abs_diff`` against the unsplit MLP.
    """
    return _launch({"tp": ["--dim", str(dim)]}, nproc, timeout_s)["tp"]


if __name__ == "__main__":
    main()
    exit_worker(0)
