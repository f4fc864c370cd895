"""Fine-tune a sequence classifier: one process on CPU, or N GPUs/nodes under ``torchrun``.

Run it as::

    python -m pt2aws.train --profile smoke --output_dir runs/x/train            # 1 process
    torchrun --nproc_per_node 8 -m pt2aws.train --profile full --output_dir …   # 8 GPUs, DDP
    torchrun --nnodes 2 --nproc_per_node 8 --rdzv-backend c10d --rdzv-endpoint HOST:29400 \\
        -m pt2aws.train --profile full --resume auto --save_steps 200 …         # 2 nodes

Every performance choice is a flag resolved against the hardware and printed once with its reason:

* ``--bf16``: autocast to bfloat16. ``auto`` turns it on for GPUs with bf16 (Ampere and newer);
  on a GPU without bf16 it falls back to fp16 autocast with a ``GradScaler``; off on CPU, where
  it was slower for these small models in our measurements. ``off`` means plain fp32.
* ``--torch_compile`` (``--torch_compile_mode``): ``torch.compile`` the model. ``auto``: on for
  CUDA, off on CPU (compiling costs 25-55 s per process on 2 cores, no gain for small models).
  Order: DDP wraps the *compiled* module (nanoGPT's order, so ``no_sync`` and DDP's gradient
  hooks stay eager and work unchanged); FSDP2 shards first and compiles the sharded module
  (``fully_shard`` hooks are traceable; compiling first would hide the submodules from it).
* ``--fused_adamw``: ``torch.optim.AdamW(fused=True)``, one kernel for the whole update, where the
  installed torch supports the device; otherwise the for-loop implementation ``foreach=False``
  (the benchmark's baseline relies on exactly that).
* ``--tf32``: TF32 tensor-core matmuls for fp32 work on Ampere+ GPUs (``auto``); no-op on CPU.
* ``--attn_implementation sdpa``: PyTorch's fused scaled-dot-product attention where the model
  supports it (falls back to ``eager`` with the reason printed).
* ``--length_bucketing``: batches of similar length (sorted inside windows of 50 global batches,
  then shuffled), padded to a multiple of 8: less padding and few distinct shapes to compile.
* ``--parallelism ddp|fsdp``: ``DistributedDataParallel`` (default) or FSDP2 ``fully_shard``
  (each encoder layer, then the whole model) for models that do not fit one device.

Gradient accumulation skips the gradient all-reduce (``no_sync`` / FSDP2
``set_requires_gradient_sync(False)``) on all but the last micro-step; every micro-batch's loss is
weighted by its share of the step's examples, so ``4 x 2`` equals ``8 x 1`` exactly. Every rank
runs the same number of steps (the data is split like ``DistributedSampler``, padded to equal
counts), so an uneven split cannot hang; evaluation shards the data without padding and gathers
predictions, so each example counts exactly once.

Checkpoints (see :mod:`pt2aws.checkpoint`) every ``--save_steps`` and at the end; ``--resume
auto`` continues from the newest complete one to the same losses as an uninterrupted run, also
after ``torchrun --max-restarts`` restarted the job. Test hook: the environment variable
``PT2AWS_FAIL_AT_STEP=N`` makes the last rank (or ``PT2AWS_FAIL_RANK``) die right after optimizer
step N on the first attempt only (``TORCHELASTIC_RESTART_COUNT`` unset or 0): ``os._exit(1)``
under torchrun, a ``RuntimeError`` in-process.

Outputs in ``--output_dir``: ``model/`` (``save_pretrained`` of the unwrapped, uncompiled model and
its tokenizer, with the label names), ``metrics.json``, ``train_log.jsonl`` (one line per
logging step), ``train_config.json`` (the resolved configuration) and ``checkpoints/``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import torch


@dataclass
class DistInfo:
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_distributed() -> DistInfo:
    """Read torchrun's environment, pick the device, and start the process group if needed.

    The device is set before ``init_process_group`` (nccl needs it); the backend is nccl on GPU
    and gloo on CPU.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    if world_size > 1:
        import torch.distributed as dist

        backend = "nccl" if device.type == "cuda" else "gloo"
        restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True" and restart != "0":
            # torchrun shares its rendezvous TCPStore with the workers and does not prefix the
            # keys per restart, so a restarted group can read the dead group's addresses and
            # fail in connectFullMesh (pytorch/pytorch#135712). A per-attempt prefix avoids it.
            store = dist.TCPStore(
                os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world_size, False
            )
            store = dist.PrefixStore(f"pt2aws/attempt_{restart}", store)
            dist.init_process_group(backend, store=store, rank=rank, world_size=world_size)
        else:
            dist.init_process_group(backend=backend)
    return DistInfo(rank=rank, local_rank=local_rank, world_size=world_size, device=device)


def all_reduce_sum(values: list[float], info: DistInfo) -> list[float]:
    if info.world_size == 1:
        return list(values)
    tensor = torch.tensor(values, dtype=torch.float64, device=info.device)
    torch.distributed.all_reduce(tensor)
    return tensor.tolist()


def all_gather(obj, info: DistInfo) -> list:
    if info.world_size == 1:
        return [obj]
    out = [None] * info.world_size
    torch.distributed.all_gather_object(out, obj)
    return out


def epoch_batches(
    lengths: list[int],
    batch_size: int,
    *,
    world_size: int = 1,
    rank: int = 0,
    seed: int = 0,
    epoch: int = 0,
    bucketing: bool = False,
    window_batches: int = 50,
) -> list[list[int]]:
    """This rank's training batches (lists of example indices) for one epoch.

    Every rank gets the same number of batches, with equal sizes batch by batch: indices are
    padded by repeating the first ones to a multiple of ``world_size``, as
    ``DistributedSampler`` does. Without bucketing, that sampler (``set_epoch(epoch)``) deals
    the indices. With bucketing, a seeded permutation is cut into windows of
    ``window_batches`` global batches, each window is sorted by length and cut into global
    batches, the batch order is shuffled, and rank ``r`` takes every ``world_size``-th example of
    each global batch (so ranks see similar lengths and wait less for each other).

    Args:
        lengths: tokens per example (after truncation).
        batch_size: examples per rank per batch.

    Returns:
        ``ceil(ceil(len(lengths) / world_size) / batch_size)`` batches.
    """
    from torch.utils.data import DistributedSampler

    n = len(lengths)
    if n < world_size:
        raise ValueError(f"{n} training examples cannot be split over {world_size} ranks")
    if not bucketing:
        sampler = DistributedSampler(
            lengths, num_replicas=world_size, rank=rank, shuffle=True, seed=seed
        )
        sampler.set_epoch(epoch)
        mine = list(sampler)
        return [mine[i : i + batch_size] for i in range(0, len(mine), batch_size)]
    gen = torch.Generator().manual_seed(seed + epoch)
    perm = torch.randperm(n, generator=gen).tolist()
    perm += perm[: (-n) % world_size]
    global_size, window = batch_size * world_size, batch_size * world_size * window_batches
    batches = []
    for start in range(0, len(perm), window):
        chunk = sorted(perm[start : start + window], key=lambda i: lengths[i], reverse=True)
        batches += [chunk[i : i + global_size] for i in range(0, len(chunk), global_size)]
    order = torch.randperm(len(batches), generator=gen).tolist()
    return [batches[j][rank::world_size] for j in order]
