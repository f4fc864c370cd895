"""DDP, FSDP2 and tensor parallelism on 2 CPU processes (notebook 01, section 6; gloo): what each
rank holds after one AdamW step of one MLP under DDP and FSDP2, its peak resident memory, and a
2-layer MLP split column- then row-wise (Megatron-LM) against the whole."""

from __future__ import annotations

import copy
import gc
import json
import os
import re
import sys
import tempfile
from pathlib import Path

import torch
from torch import nn

from pt2aws.processes import stream_child
from pt2aws.train.distributed import all_gather, compute_cleanup, compute_init, exit_worker

#: Rank 0's lines that :func:`run` passes on as they come.
PREFIX = "pt2aws-parallelism: "


def make_mlp() -> nn.Sequential:
    """8 ``Linear(1024, 1024)`` + ReLU blocks (8.4 M parameters)."""
    return nn.Sequential(*(nn.Sequential(nn.Linear(1024, 1024), nn.ReLU()) for _ in range(8)))


def _bytes(tensors) -> int:
    """Bytes this rank holds (a DTensor's local shard)."""
    local = [t.to_local() if hasattr(t, "to_local") else t for t in tensors if t is not None]
    return sum(t.numel() * t.element_size() for t in local)


def _rss(field: str) -> int:
    """This process's ``VmRSS`` (now) or ``VmHWM`` (peak) in bytes."""
    status = Path("/proc/self/status").read_text()
    return int(re.search(rf"{field}:\s+(\d+) kB", status).group(1)) * 1024


def _memory(mode: str) -> dict:
    """Build and wrap (``ddp`` or ``fsdp``), one AdamW step: what this rank holds after it."""
    from torch.distributed.fsdp import fully_shard
    from torch.nn.parallel import DistributedDataParallel as DDP

    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # the peak RSS starts again from now
    start = _rss("VmRSS")
    torch.manual_seed(0)
    if mode == "fsdp":
        with torch.device("meta"):  # FSDP2's idiom: no rank ever holds the whole model
            model = make_mlp()
        for block in model:
            fully_shard(block)  # one unit per layer: all-gathered for its forward, then freed
        fully_shard(model)
        model.to_empty(device="cpu")  # this rank's shards only, then initialised
        for block in model:  # Linear, ReLU
            block[0].reset_parameters()
        step_model = model
    else:
        model = make_mlp()
        step_model = DDP(model)  # a full replica per rank, plus gradient buckets for all-reduce
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(16, 1024, generator=torch.Generator().manual_seed(1))
    step_model(x).pow(2).mean().backward()
    optimizer.step()
    state = [t for s in optimizer.state.values() for t in s.values() if torch.is_tensor(t)]
    peak = _rss("VmHWM")
    return {
        "parameters_bytes": _bytes(model.parameters()),
        "gradients_bytes": _bytes(p.grad for p in model.parameters()),
        "optimizer_state_bytes": _bytes(state),
        "peak_rss_bytes": peak, "peak_rss_increase_bytes": peak - start,
    }  # fmt: skip


def _tensor_parallel(dim: int = 16) -> dict:
    """First layer split column-wise, second row-wise: shapes, and the largest gap to the whole."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import parallel as tp

    mesh = init_device_mesh("cpu", (int(os.environ["WORLD_SIZE"]),))
    torch.manual_seed(0)  # the same weights on every rank before splitting
    mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
    whole = copy.deepcopy(mlp)
    x = torch.randn(4, dim, generator=torch.Generator().manual_seed(1))
    tp.parallelize_module(mlp, mesh, {"0": tp.ColwiseParallel(), "2": tp.RowwiseParallel()})
    with torch.no_grad():
        out, expected = mlp(x), whole(x)  # out: a plain tensor (RowwiseParallel's default)
    up, down = (mlp[i].weight.to_local() for i in (0, 2))
    return {
        "up_weight_local_shape": list(up.shape),
        "up_weight_full_shape": list(whole[0].weight.shape),
        "down_weight_local_shape": list(down.shape),
        "down_weight_full_shape": list(whole[2].weight.shape),
        "output_max_abs_diff": float((out - expected).abs().max()),
    }


def main(out: str) -> dict:
    """A worker under torchrun; rank 0 writes ``{"world_size", "ddp", "fsdp", "tp"}`` (one dict
    per rank each) to ``out``: 8 x ``Linear(1024, 1024)`` for DDP and FSDP, width 16 for TP."""
    info = compute_init(num_threads=1)
    warm = nn.Linear(64, 64)  # kernels and thread pools load on a first step: not the model's
    warm(torch.randn(8, 64)).sum().backward()
    torch.optim.AdamW(warm.parameters()).step()
    result = {"world_size": info.world_size}
    for mode in ("ddp", "fsdp", "tp"):
        mine = _tensor_parallel() if mode == "tp" else _memory(mode)
        result[mode] = all_gather(mine, info)
        if info.is_main:
            print(f"{PREFIX}{mode} measured on {info.world_size} processes", flush=True)
    if info.is_main:
        Path(out).write_text(json.dumps(result, indent=2))
    compute_cleanup(info)
    return result


def run(timeout_s: float = 300, stream=None) -> dict:
    """Run the lesson on 2 CPU processes: :func:`main`'s result; a line per strategy measured to
    ``stream``. Raises RuntimeError: the run failed or timed out (with its output)."""
    with tempfile.TemporaryDirectory(prefix="pt2aws-parallelism-") as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
        cmd += ["-m", "pt2aws.lessons.parallelism", str(out)]
        # blocks of 64 KiB and more go back to the OS when freed (glibc): RSS follows the live
        # tensors; CUDA_VISIBLE_DEVICES="": CPU tensors and gloo on a GPU machine too
        env = {"MALLOC_MMAP_THRESHOLD_": "65536", "CUDA_VISIBLE_DEVICES": ""}

        def on_line(line: str) -> None:
            if line.startswith(PREFIX) and stream is not None:
                print(line[len(PREFIX) :].rstrip(), file=stream, flush=True)

        stream_child(cmd, on_line, what="the parallelism lesson", env=env, timeout_s=timeout_s)
        return json.loads(out.read_text())


def memory_table(result: dict) -> list[dict]:
    """Rank 0's bytes per strategy: parameters, gradients, AdamW state, ``total_bytes``, the peak
    RSS and its growth (which also counts DDP's buckets and FSDP's all-gather buffers)."""
    parts = ("parameters_bytes", "gradients_bytes", "optimizer_state_bytes")
    ranks0 = {mode: result[mode][0] for mode in ("ddp", "fsdp")}
    return [
        {"parallelism": mode, "world_size": result["world_size"], **rank0}
        | {"total_bytes": sum(rank0[k] for k in parts)}
        for mode, rank0 in ranks0.items()
    ]


if __name__ == "__main__":
    main(sys.argv[1])
    exit_worker(0)
