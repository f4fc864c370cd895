"""Atomic training checkpoints, RNG capture and restore, and the lookup ``--resume auto`` uses.

A checkpoint is one file, ``<checkpoint_dir>/step-000123.pt``, written by rank 0: it is saved as
``.step-000123.pt.tmp`` and renamed into place (``os.replace`` is atomic on POSIX), so a crash
while saving never leaves a half-written file under a name :func:`latest_checkpoint` would pick.
It holds full (unsharded) model and optimizer states, the scheduler, the GradScaler, the RNG
state of every rank (python, numpy, torch CPU, CUDA) and the data-order position, so a resumed
run repeats exactly the batches, dropout masks and updates the uninterrupted run would have made.

Every rank reads the file when resuming, so ``checkpoint_dir`` must be on storage that all ranks
see (one node, or a shared file system such as FSx/EFS across nodes).
"""

from __future__ import annotations

import dataclasses
import os
import random
import re
from pathlib import Path

import numpy as np
import torch

from pt2aws.config import TrainConfig

_NAME = re.compile(r"^step-(\d+)\.pt$")


def checkpoint_path(checkpoint_dir: str | Path, step: int) -> Path:
    """``<checkpoint_dir>/step-000123.pt`` for optimizer step ``step``."""
    return Path(checkpoint_dir) / f"step-{step:06d}.pt"


def list_checkpoints(checkpoint_dir: str | Path) -> list[Path]:
    """Complete checkpoints in ``checkpoint_dir``, oldest first (temp files are ignored)."""
    folder = Path(checkpoint_dir)
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := _NAME.match(p.name))]
    return [p for _, p in sorted(found)]


def latest_checkpoint(checkpoint_dir: str | Path) -> Path | None:
    """The newest complete checkpoint in ``checkpoint_dir``, or ``None`` when there is none."""
    found = list_checkpoints(checkpoint_dir)
    return found[-1] if found else None


def save_atomic(state: dict, path: str | Path, keep_last: int = 0) -> Path:
    """``torch.save`` ``state`` to a temp file beside ``path``, fsync it, then rename it into place.

    Args:
        state: anything ``torch.save`` can pickle.
        path: final file name (``step-NNNNNN.pt`` for :func:`latest_checkpoint` to see it).
        keep_last: delete older ``step-*.pt`` files beyond this many (0 keeps all).

    Returns:
        ``path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    if keep_last > 0:
        for old in list_checkpoints(path.parent)[:-keep_last]:
            old.unlink(missing_ok=True)
    return path


def load_checkpoint(path: str | Path) -> dict:
    """Load a checkpoint written by :func:`save_atomic` onto the CPU.

    ``weights_only=False``: the file holds python and numpy RNG states; load only checkpoints
    you wrote yourself.
    """
    return torch.load(path, map_location="cpu", weights_only=False)


def capture_rng() -> dict:
    """This process's RNG states: python ``random``, numpy, torch CPU and (if present) CUDA."""
    state = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict) -> None:
    """Inverse of :func:`capture_rng` (the CUDA state only where a GPU is present)."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


#: Fields a resumed run may change; every other field must match the checkpoint's.
RESUMABLE_CHANGES = {
    "output_dir",
    "checkpoint_dir",
    "resume",
    "save_steps",
    "save_total_limit",
    "logging_steps",
    "torch_compile",
    "torch_compile_mode",
    "num_threads",
    "benchmark_warmup_steps",
    "per_device_eval_batch_size",
}


def full_state_dicts(model, optimizer, fsdp: bool) -> tuple[dict, dict]:
    """Unsharded CPU model and optimizer state dicts (complete on rank 0; FSDP: empty elsewhere)."""
    if not fsdp:
        return model.state_dict(), optimizer.state_dict()
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

    return get_state_dict(
        model, optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
    )


def load_full_state(model, optimizer, state: dict, fsdp: bool) -> None:
    if not fsdp:
        model.load_state_dict(state["model"], strict=True)
        optimizer.load_state_dict(state["optimizer"])
        return
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

    set_state_dict(
        model,
        optimizer,
        model_state_dict=state["model"],
        optim_state_dict=state["optimizer"],
        options=StateDictOptions(full_state_dict=True, strict=True),
    )


def check_resumable(saved: dict, cfg: TrainConfig, world_size: int, path) -> None:
    now = dataclasses.asdict(cfg)
    changed = sorted(
        k for k, v in saved["config"].items() if k not in RESUMABLE_CHANGES and now.get(k) != v
    )
    if changed or saved["world_size"] != world_size:
        detail = ", ".join(f"{k}: {saved['config'][k]!r} -> {now.get(k)!r}" for k in changed)
        if saved["world_size"] != world_size:
            detail += f" world_size: {saved['world_size']} -> {world_size}"
        raise ValueError(
            f"cannot resume from {path}: the run changed ({detail.strip(', ')}). Use the "
            "checkpoint's settings and world size, or --resume never to start afresh"
        )
