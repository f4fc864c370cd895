"""Checkpoints and resuming: save, load, check, restore; and saving the final model.

The training loop calls three things here: :func:`resume` once before the first step (it
returns the :class:`TrainState` to continue from, empty for a fresh run), :func:`save_checkpoint`
every ``--save_steps`` and at the end, and :func:`save_model` for the final ``model/`` folder.

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
import json
import os
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import numpy as np
import torch

from pt2aws.config import TrainConfig
from pt2aws.train.distributed import DistInfo, all_gather
from pt2aws.train.recipe import Prepared

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
    """Load full (unsharded) model and optimizer states; FSDP re-shards them on every rank."""
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
    """Refuse to resume a run whose settings changed, other than :data:`RESUMABLE_CHANGES`.

    Raises:
        ValueError: a changed field or world size, each named with its old and new value.
    """
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


@dataclass
class TrainState:
    """Where training stands; a checkpoint holds it beside the weights and optimizer.

    Attributes:
        step: optimizer steps done.
        epoch: the epoch in progress (0-based).
        batch_in_epoch: this epoch's batches consumed so far (the next one to train on).
        history: one ``{"epoch", "step", "eval_*"}`` dict per finished epoch.
        loss_window: this rank's ``[sum of micro-batch mean losses, micro-batches]`` since the
            last logged step (the sum is a tensor while training, to avoid a host sync).
        resumed_from: the checkpoint step this run resumed from, or ``None``.
    """

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    history: list[dict] = field(default_factory=list)
    loss_window: list = field(default_factory=lambda: [0.0, 0])
    resumed_from: int | None = None


def resume(cfg: TrainConfig, info: DistInfo, prep: Prepared, scheduler) -> TrainState:
    """The one resume entry point: find, check and load a checkpoint on every rank.

    Rank 0 picks the file (``--resume auto``: the newest complete one, if any; or the path
    given) and tells the other ranks, so all load the same one even if a newer file appears
    meanwhile. Every rank then loads it (``checkpoint_dir`` must be on storage all ranks see),
    checks that the run's settings match, and restores weights, optimizer, scheduler, scaler
    and its own RNG streams.

    Args:
        cfg: this run's configuration.
        info: this rank.
        prep: the model and optimizer to load into.
        scheduler: the learning-rate scheduler to load into.

    Returns:
        The state to continue from; a fresh ``TrainState()`` when there is nothing to resume.

    Raises:
        ValueError: the checkpoint belongs to a run with other settings (see
            :func:`check_resumable`).
    """
    found = None
    if cfg.resume == "auto" and info.is_main:
        found = latest_checkpoint(cfg.checkpoint_dir)
    elif cfg.resume not in ("auto", "never"):
        found = Path(cfg.resume)
    found = all_gather(str(found) if found else None, info)[0]
    if not found:
        return TrainState()
    saved = load_checkpoint(found)
    check_resumable(saved, cfg, info.world_size, found)
    load_full_state(prep.module, prep.optimizer, saved, prep.parallelism == "fsdp")
    scheduler.load_state_dict(saved["scheduler"])
    prep.scaler.load_state_dict(saved["scaler"])
    restore_rng(saved["rng"][info.rank])
    if info.is_main:
        print(
            f"resumed from {found} (step {saved['step']}, epoch {saved['epoch'] + 1})", flush=True
        )
    return TrainState(
        step=saved["step"],
        epoch=saved["epoch"],
        batch_in_epoch=saved["batch_in_epoch"],
        history=saved["history"],
        loss_window=saved["window"][info.rank],
        resumed_from=saved["step"],
    )


def save_checkpoint(
    cfg: TrainConfig, info: DistInfo, prep: Prepared, scheduler, state: TrainState
) -> None:
    """Write ``step-NNNNNN.pt`` for ``state`` (rank 0 writes; call on every rank).

    Gathers the full model and optimizer states and every rank's RNG and loss window, saves
    them atomically (keeping ``cfg.save_total_limit`` files) and waits at a barrier, so no rank
    runs ahead of a checkpoint that is still being written.
    """
    model_state, optim_state = full_state_dicts(
        prep.module, prep.optimizer, prep.parallelism == "fsdp"
    )
    rng = all_gather(capture_rng(), info)
    windows = all_gather([float(state.loss_window[0]), state.loss_window[1]], info)
    if info.is_main:
        saved = {
            "step": state.step,
            "epoch": state.epoch,
            "batch_in_epoch": state.batch_in_epoch,
            "model": model_state,
            "optimizer": optim_state,
            "scheduler": scheduler.state_dict(),
            "scaler": prep.scaler.state_dict(),
            "rng": rng,
            "window": windows,
            "history": state.history,
            "world_size": info.world_size,
            "config": dataclasses.asdict(cfg),
        }
        save_atomic(saved, checkpoint_path(cfg.checkpoint_dir, state.step), cfg.save_total_limit)
    if info.world_size > 1:
        torch.distributed.barrier()


def open_train_log(path: str | Path, resumed_from: int | None) -> IO[str]:
    """Open ``train_log.jsonl`` for writing; on resume keep the lines up to the checkpoint's step.

    Steps logged after the checkpoint by the interrupted run are dropped: the resumed run logs
    them again, so every step appears once.
    """
    path = Path(path)
    kept = []
    if resumed_from is not None and path.is_file():
        kept = [
            line
            for line in path.read_text().splitlines()
            if json.loads(line)["step"] <= resumed_from
        ]
    log_file = open(path, "w")  # noqa: SIM115 - the caller closes it
    log_file.writelines(line + "\n" for line in kept)
    return log_file


def save_model(prep: Prepared, tokenizer, out_dir: str | Path, info: DistInfo) -> None:
    """Save the trained model and tokenizer to ``<out_dir>/model`` (call on every rank).

    Weights come from the plain module, never the compiled or DDP wrapper, so the keys carry no
    ``_orig_mod.`` / ``module.`` prefix. Under FSDP every rank joins the all-gather of the full
    state, and rank 0 saves it from an unsharded copy of the same class (same names as without
    FSDP).
    """
    model_dir = Path(out_dir) / "model"
    full_state = None
    if prep.parallelism == "fsdp":
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        full_state = get_model_state_dict(
            prep.module, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
        )
    if not info.is_main:
        return
    if full_state is not None:
        from transformers import AutoModelForSequenceClassification

        plain = AutoModelForSequenceClassification.from_config(prep.module.config)
        plain.load_state_dict(full_state, strict=True)
        plain.save_pretrained(model_dir)
    else:
        prep.module.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
