"""Checkpoints on ``torch.distributed.checkpoint`` (DCP), resuming to the uninterrupted losses:
``<checkpoint_dir>/step-000123/`` holds DCP's model and AdamW shards and rank 0's
``trainer_state.pt`` (data position, scheduler, scaler, loss windows, history, config, each rank's
RNG), written before DCP's ``.metadata``, which marks it complete. All ranks must see the folder."""

from __future__ import annotations

import dataclasses
import random
import shutil
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from pt2aws.config import TrainConfig
from pt2aws.train.distributed import DistInfo, all_gather
from pt2aws.train.recipe import Prepared

TRAINER_STATE = "trainer_state.pt"

#: Fields a resumed run may change; every other field must match the checkpoint's.
RESUMABLE_CHANGES = set(
    "output_dir checkpoint_dir resume save_steps save_total_limit logging_steps torch_compile "
    "torch_compile_mode num_threads benchmark_warmup_steps per_device_eval_batch_size".split()
)


@dataclass
class TrainState:
    """Optimizer steps done, the epoch (0-based) and its batches consumed, ``{"epoch", "step",
    "eval_*"}`` per finished epoch, ``[loss sum, micro-batches]`` since the last log."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    history: list[dict] = field(default_factory=list)
    loss_window: list = field(default_factory=lambda: [0.0, 0])
    resumed_from: int | None = None


def list_checkpoints(checkpoint_dir: str | Path) -> list[Path]:
    """Complete checkpoints in ``checkpoint_dir`` (DCP's ``.metadata`` written), oldest first."""
    return [p.parent for p in sorted(Path(checkpoint_dir).glob("step-*/.metadata"))]


def _dcp(action, state: dict, path) -> None:
    with warnings.catch_warnings():  # one process, no process group: as intended
        warnings.filterwarnings("ignore", "torch.distributed is disabled")
        action(state, checkpoint_id=path)


def save_checkpoint(
    cfg: TrainConfig, info: DistInfo, prep: Prepared, scheduler, state: TrainState
) -> None:
    """Write ``step-NNNNNN/`` for ``state`` (a collective: call on every rank); keep the newest
    ``cfg.save_total_limit`` (0: all)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    path = Path(cfg.checkpoint_dir) / f"step-{state.step:06d}"
    rng = {"python": random.getstate(), "numpy": np.random.get_state()}
    rng["torch"] = torch.get_rng_state()
    if torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state_all()
    window = [float(state.loss_window[0]), state.loss_window[1]]
    rng, windows = zip(*all_gather((rng, window), info))
    if info.is_main:
        path.mkdir(parents=True, exist_ok=True)
        config = cfg.to_dict() | {"world_size": info.world_size}
        saved = {"scheduler": scheduler.state_dict(), "scaler": prep.scaler.state_dict()}
        saved |= {"rng": rng, "windows": windows, "config": config}
        torch.save(dataclasses.asdict(state) | saved, path / TRAINER_STATE)
    model_state, optim_state = get_state_dict(prep.module, prep.optimizer)
    _dcp(dcp.save, {"model": model_state, "optim": optim_state}, path)
    if info.is_main and cfg.save_total_limit > 0:
        for old in list_checkpoints(cfg.checkpoint_dir)[: -cfg.save_total_limit]:
            shutil.rmtree(old, ignore_errors=True)


def resume(cfg: TrainConfig, info: DistInfo, prep: Prepared, scheduler) -> TrainState:
    """The state to continue from (``TrainState()``: none), all restored from the checkpoint rank
    0 picked (``--resume auto``: the newest); ValueError naming each field (but
    :data:`RESUMABLE_CHANGES`) or the world size that changed since it was saved."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    found = None
    if cfg.resume == "auto" and info.is_main:
        found = (list_checkpoints(cfg.checkpoint_dir) or [None])[-1]
    elif cfg.resume not in ("auto", "never"):
        found = Path(cfg.resume)
    found = all_gather(str(found) if found else None, info)[0]
    if not found:
        return TrainState()
    saved = torch.load(Path(found) / TRAINER_STATE, map_location="cpu", weights_only=False)
    now = cfg.to_dict() | {"world_size": info.world_size}
    fixed = {k: v for k, v in saved["config"].items() if k not in RESUMABLE_CHANGES}
    changed = [f"{k}: {v!r} -> {now.get(k)!r}" for k, v in sorted(fixed.items()) if now.get(k) != v]
    if changed:
        raise ValueError(
            f"cannot resume from {found}: the run changed ({', '.join(changed)}). Use the "
            "checkpoint's settings and world size, or --resume never to start afresh"
        )
    model_state, optim_state = get_state_dict(prep.module, prep.optimizer)
    _dcp(dcp.load, {"model": model_state, "optim": optim_state}, found)  # in place
    set_state_dict(
        prep.module, prep.optimizer, model_state_dict=model_state, optim_state_dict=optim_state
    )
    scheduler.load_state_dict(saved["scheduler"])
    prep.scaler.load_state_dict(saved["scaler"])
    rng = saved["rng"][info.rank]
    random.setstate(rng["python"])
    np.random.set_state(rng["numpy"])
    torch.set_rng_state(rng["torch"])
    if "cuda" in rng and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(rng["cuda"])
    if info.is_main:
        print(f"resumed from {found} (step {saved['step']}, epoch {saved['epoch'] + 1})")
    kept = {k: saved[k] for k in ("step", "epoch", "batch_in_epoch", "history")}
    return TrainState(**kept, loss_window=saved["windows"][info.rank], resumed_from=saved["step"])


def save_model(prep: Prepared, tokenizer, out_dir: str | Path, info: DistInfo) -> None:
    """``save_pretrained`` the plain module and tokenizer to ``<out_dir>/model`` (every rank
    calls it: under FSDP all join the gather of the full state)."""
    model_dir = Path(out_dir) / "model"
    module = prep.module
    if prep.parallelism == "fsdp":
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
        from transformers import AutoModelForSequenceClassification

        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        full = get_model_state_dict(module, options=options)
        if info.is_main:  # an unsharded copy of the same class: the names are as without FSDP
            module = AutoModelForSequenceClassification.from_config(prep.module.config)
            module.load_state_dict(full, strict=True)
    if info.is_main:
        module.save_pretrained(model_dir)
        tokenizer.save_pretrained(model_dir)
