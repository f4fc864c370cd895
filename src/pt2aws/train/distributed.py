"""Process group set-up and tear-down (nanochat's ``compute_init``/``compute_cleanup``), rank
helpers, this rank's batches and the FSDP2 wrap; no-ops on one process."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from pt2aws.env.machine import default_num_threads


@dataclass
class DistInfo:
    """Where this process sits in the job (torchrun's ``RANK`` and ``WORLD_SIZE``)."""

    rank: int = 0
    world_size: int = 1
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    @property
    def is_main(self) -> bool:
        """Rank 0: the rank that logs, prints and saves."""
        return self.rank == 0


def compute_init(num_threads: int | None = None) -> DistInfo:
    """From torchrun's environment: the device (set before NCCL starts) or the CPU threads
    (``None``: this node's cores shared out), and the process group when there are ranks."""
    world_size, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
        torch.set_num_threads(num_threads or default_num_threads())
    if world_size > 1:
        backend = "nccl" if device.type == "cuda" else "gloo"
        restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True" and restart != "0":
            # torchrun's shared store keeps the dead group's keys (pytorch/pytorch#135712):
            # a restarted group gets a prefix of its own
            store = dist.TCPStore(
                os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world_size, False
            )
            store = dist.PrefixStore(f"pt2aws/attempt_{restart}", store)
            dist.init_process_group(backend, store=store, rank=rank, world_size=world_size)
        else:
            dist.init_process_group(backend=backend)
    return DistInfo(rank=rank, world_size=world_size, device=device)


def compute_cleanup(info: DistInfo) -> None:
    """After a successful run: a barrier (gloo's threads release their tensors before exit, else
    "terminate called without an active exception"), then ``destroy_process_group``."""
    if info.world_size > 1:
        dist.barrier()
        dist.destroy_process_group()


def all_reduce_sum(values: list[float], info: DistInfo) -> list[float]:
    """Element-wise sum of ``values`` over all ranks, identical on every rank."""
    return [sum(column) for column in zip(*all_gather(list(values), info))]


def all_gather(obj, info: DistInfo) -> list:
    """Every rank's ``obj`` (any picklable value), in rank order, on every rank."""
    if info.world_size == 1:
        return [obj]
    out = [None] * info.world_size
    dist.all_gather_object(out, obj)
    return out


def epoch_batches(lengths: list[int], batch_size: int, *, world_size: int = 1, rank: int = 0,
                  seed: int = 0, epoch: int = 0, bucketing: bool = False) -> list[list[int]]:  # fmt: skip
    """This rank's batches (example indices) for one epoch, as many and as large on every rank:
    ``DistributedSampler``'s, or with ``bucketing`` a seeded permutation sorted by ``lengths``
    within windows of 50 global batches, the batches shuffled, each dealt out over the ranks.
    ValueError: fewer examples than ranks."""
    from torch.utils.data import DistributedSampler

    n = len(lengths)
    if n < world_size:
        raise ValueError(f"{n} training examples cannot be split over {world_size} ranks")
    if not bucketing:
        sampler = DistributedSampler(lengths, num_replicas=world_size, rank=rank, seed=seed)
        sampler.set_epoch(epoch)
        mine = list(sampler)
        return [mine[i : i + batch_size] for i in range(0, len(mine), batch_size)]
    gen = torch.Generator().manual_seed(seed + epoch)
    perm = torch.randperm(n, generator=gen).tolist()
    perm += perm[: (-n) % world_size]
    global_size = batch_size * world_size
    window = global_size * 50
    batches = []
    for start in range(0, len(perm), window):
        chunk = sorted(perm[start : start + window], key=lambda i: lengths[i], reverse=True)
        batches += [chunk[i : i + global_size] for i in range(0, len(chunk), global_size)]
    order = torch.randperm(len(batches), generator=gen).tolist()
    return [batches[j][rank::world_size] for j in order]


def shard_fsdp(model: torch.nn.Module) -> None:
    """FSDP2 in place: each encoder layer a unit, the rest the root; parameters become DTensors."""
    from torch.distributed.fsdp import fully_shard

    for layer in getattr(getattr(model.base_model, "encoder", None), "layer", []):
        fully_shard(layer)
    fully_shard(model)


def replica_max_abs_diff(model: torch.nn.Module, info: DistInfo) -> float:
    """Largest difference between ranks of each parameter's (sum, norm): 0.0 for DDP replicas."""
    fingerprint = [
        f(p.detach().double()).item() for p in model.parameters() for f in (torch.sum, torch.norm)
    ]
    prints = torch.tensor(all_gather(fingerprint, info), dtype=torch.float64)
    return float((prints - prints[0]).abs().max())


def exit_worker(code: int = 0) -> None:
    """Exit with ``code``: ``os._exit`` in a multi-process torchrun job (a joinable gloo thread
    can abort interpreter teardown)."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and "TORCHELASTIC_RUN_ID" in os.environ:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    raise SystemExit(code)
