"""Training as a torchrun subprocess of a saved :class:`TrainConfig` (a notebook kernel must not
fork CUDA workers): the command printed, the output streamed live with one bar."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from pt2aws.config import TrainConfig, saved_config_path
from pt2aws.processes import stream_child
from pt2aws.train.progress import PROGRESS_ENV, ProgressDisplay


def default_nproc_per_node() -> int:
    """Number of local GPUs, or 1 on a CPU-only machine."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 1


def config_to_args(**overrides) -> list[str]:
    """``profile="smoke", max_steps=5`` -> ``["--profile", "smoke", "--max_steps", "5"]``
    (``None`` skipped, booleans as ``true``/``false``)."""
    args: list[str] = []
    for key, value in overrides.items():
        if value is not None:
            args += [f"--{key}", str(value).lower() if isinstance(value, bool) else str(value)]
    return args


def launch_training(
    cfg: TrainConfig, *, nproc_per_node=None, max_restarts=0, stream=None, env=None
) -> dict:
    """Train ``cfg`` under torchrun (``--config <output_dir>/train_config.json``, ``env`` added;
    ``max_restarts``: restarts after a failure, each resuming from a checkpoint), with this
    interpreter, echoing to ``stream`` with one bar; ``metrics.json``; ChildFailedError with its
    tail."""
    stream = stream or sys.stdout
    config_file = cfg.to_json(saved_config_path(cfg.output_dir))
    nproc = nproc_per_node or default_nproc_per_node()
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}"]
    cmd += ["--nnodes=1", "--standalone", f"--max-restarts={max_restarts}"]
    cmd += ["-m", "pt2aws.train", "--config", str(config_file)]
    print("$ " + shlex.join(cmd), file=stream, flush=True)
    child_env = {"TOKENIZERS_PARALLELISM": "false", PROGRESS_ENV: "lines"}
    child_env |= {"HF_HUB_DISABLE_PROGRESS_BARS": "1", **(env or {})}
    display = ProgressDisplay(stream)
    try:
        stream_child(cmd, display.feed, what="training", env=child_env)
    finally:
        display.close()
    return json.loads((Path(cfg.output_dir) / "metrics.json").read_text())
