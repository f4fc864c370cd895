"""Process-group set-up and tear-down, rank helpers, sharding the batches and the FSDP2 wrap.

Modelled on nanochat's ``compute_init`` / ``compute_cleanup``: one call reads torchrun's
environment and starts the process group, one call ends it on every exit path. On one process
(``python -m pt2aws.train``) both are cheap no-ops apart from picking the device and threads.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

import torch

from pt2aws.env.machine import default_num_threads


@dataclass
class DistInfo:
    """Where this process sits in the job (torchrun's ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``)."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    @property
    def is_main(self) -> bool:
        """True on rank 0, the rank that logs, prints and saves."""
        return self.rank == 0


def compute_init(num_threads: int | None = None) -> DistInfo:
    """Read torchrun's environment, pick the device, and start the process group if needed.

    The device is set before ``init_process_group`` (NCCL binds each rank to its GPU); the
    backend is NCCL on GPU and gloo on CPU. On CPU the intra-op thread count is set to
    ``num_threads``, or the cores shared out among this node's processes.

    Args:
        num_threads: CPU threads for this process; ``None``: the cores shared out among this
            node's processes (:func:`pt2aws.env.machine.default_num_threads`).

    Returns:
        This process's :class:`DistInfo`.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
        torch.set_num_threads(num_threads or default_num_threads())
    if world_size > 1:
        _init_process_group("nccl" if device.type == "cuda" else "gloo", rank, world_size)
    return DistInfo(rank=rank, local_rank=local_rank, world_size=world_size, device=device)


def _init_process_group(backend: str, rank: int, world_size: int) -> None:
    import torch.distributed as dist

    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True" and restart != "0":
        # torchrun shares its rendezvous TCPStore with the workers and does not prefix the keys
        # per restart, so a restarted group can read the dead group's addresses and fail in
        # connectFullMesh (pytorch/pytorch#135712). A per-attempt prefix avoids it.
        store = dist.TCPStore(
            os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world_size, False
        )
        store = dist.PrefixStore(f"pt2aws/attempt_{restart}", store)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size)
    else:
        dist.init_process_group(backend=backend)


def compute_cleanup(info: DistInfo, *, succeeded: bool) -> None:
    """End the process group started by :func:`compute_init` (nothing to do on one process).

    After a successful run every rank meets at a barrier before the group is destroyed. The
    barrier is what keeps gloo from aborting the process at exit ("terminate called without an
    active exception", SIGABRT): gloo's worker threads release a finished collective's tensors
    after the caller has already moved on, and releasing a tensor that Python created needs the
    GIL. A rank with nothing left to do (rank 1 does not save the model) could otherwise reach
    interpreter shutdown while a worker still held the final gather's tensors; a thread that
    takes the GIL during shutdown is ended mid-destructor, which aborts. Waiting in the barrier
    releases the GIL while the interpreter is fully alive, so the workers finish first.

    After a failure the barrier is skipped (the other ranks may never reach it), and so is
    ``destroy_process_group`` (it can block on peers that died); torchrun ends the job.

    Args:
        info: from :func:`compute_init`.
        succeeded: whether this rank finished its work without an exception.
    """
    if info.world_size == 1 or not succeeded:
        return
    import torch.distributed as dist

    dist.barrier()
    dist.destroy_process_group()


def all_reduce_sum(values: list[float], info: DistInfo) -> list[float]:
    """Element-wise sum of ``values`` over all ranks (float64), identical on every rank."""
    if info.world_size == 1:
        return list(values)
    tensor = torch.tensor(values, dtype=torch.float64, device=info.device)
    torch.distributed.all_reduce(tensor)
    return tensor.tolist()


def all_gather(obj, info: DistInfo) -> list:
    """Every rank's ``obj`` (any picklable value), in rank order, on every rank."""
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
        world_size: number of ranks sharing the data.
        rank: this rank.
        seed: seeds the shuffle; with ``epoch``, the same (seed, epoch) gives the same batches.
        epoch: the epoch (0-based), so each epoch has its own order.
        bucketing: group similar lengths (less padding, fewer distinct shapes).
        window_batches: global batches per sorting window when bucketing.

    Returns:
        ``ceil(ceil(len(lengths) / world_size) / batch_size)`` batches.

    Raises:
        ValueError: fewer examples than ranks.
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


def shard_fsdp(model: torch.nn.Module) -> None:
    """FSDP2: shard each encoder layer, then the whole model, across the ranks (in place).

    Each encoder layer becomes one unit: its parameters are all-gathered just before its
    forward (and backward) and freed right after, so a rank holds full weights for one layer at
    a time; the rest (embeddings, classifier head) is the root unit. Parameters become
    ``DTensor`` shards of ``1 / world_size`` of each tensor.
    """
    from torch.distributed.fsdp import fully_shard

    for layer in getattr(getattr(model.base_model, "encoder", None), "layer", []):
        fully_shard(layer)
    fully_shard(model)


def replica_max_abs_diff(model: torch.nn.Module, info: DistInfo) -> float:
    """Largest difference between ranks of two fingerprints (sum, norm) per parameter tensor.

    DDP replicas must agree bit for bit, so this is 0.0 after a correct run.
    """
    fingerprint = [
        f(p.detach().double()).item() for p in model.parameters() for f in (torch.sum, torch.norm)
    ]
    prints = torch.tensor(all_gather(fingerprint, info), dtype=torch.float64)
    return float((prints - prints[0]).abs().max())


def exit_worker(code: int = 0) -> None:
    """End this process with ``code``; a torchrun worker of a multi-process job skips teardown.

    After :func:`compute_cleanup` has destroyed the process group, a normal interpreter exit
    still runs C++ static destructors; with gloo on CPU one of them can find a thread still
    joinable and call ``std::terminate`` ("terminate called without an active exception",
    SIGABRT), which torchrun reports as the whole job failing although every rank finished its
    work (seen on these 2-core machines in notebook 01's DDP demo and in the 2-process tests,
    a few runs in a hundred under load). So once output is flushed, a worker of a
    multi-process job ends with ``os._exit``; a single process exits normally.
    """
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and "TORCHELASTIC_RUN_ID" in os.environ:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    raise SystemExit(code)
