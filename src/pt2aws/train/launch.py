"""Launch ``pt2aws.train`` under ``torchrun`` as a subprocess (never inside a notebook kernel).

A notebook kernel must not fork CUDA workers; ``torchrun`` starts fresh processes, one per GPU
(one process on a CPU-only machine), and this module streams their output and returns the
metrics that rank 0 wrote.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


class TrainingFailedError(RuntimeError):
    """The torchrun subprocess exited non-zero; the message holds the tail of its output."""


def default_nproc_per_node() -> int:
    """Number of local GPUs, or 1 on a CPU-only machine."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 1


def torchrun_command(
    train_args: list[str],
    *,
    nproc_per_node: int | None = None,
    nnodes: int = 1,
    master_port: int | None = None,
) -> list[str]:
    """The argv that runs ``pt2aws.train`` with ``train_args`` under torchrun.

    Uses ``python -m torch.distributed.run`` (torchrun) of the current interpreter, so the
    notebook's environment is the one that trains.
    """
    nproc = nproc_per_node or default_nproc_per_node()
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={nproc}",
        f"--nnodes={nnodes}",
    ]
    if nnodes == 1:
        cmd.append("--standalone" if master_port is None else f"--master_port={master_port}")
    return cmd + ["-m", "pt2aws.train", *train_args]


def config_to_args(**overrides) -> list[str]:
    """``{"profile": "smoke", "max_steps": 5}`` -> ``["--profile", "smoke", "--max_steps", "5"]``.

    ``None`` values are skipped; booleans become ``true``/``false``.
    """
    args: list[str] = []
    for key, value in overrides.items():
        if value is None:
            continue
        args += [f"--{key}", str(value).lower() if isinstance(value, bool) else str(value)]
    return args


def launch_training(
    output_dir: str | Path,
    *,
    nproc_per_node: int | None = None,
    stream=None,
    env: dict | None = None,
    **train_overrides,
) -> dict:
    """Run training under torchrun, echo its output live, and return rank 0's ``metrics.json``.

    Args:
        output_dir: the training folder (``model/``, ``metrics.json``, ``train_log.jsonl``).
        nproc_per_node: processes on this node; default: one per GPU, or 1 on CPU.
        stream: where to echo the output (default ``sys.stdout``; a notebook shows it live).
        env: extra environment variables for the subprocess.
        **train_overrides: :class:`pt2aws.train.TrainConfig` fields, e.g. ``profile="smoke"``.

    Raises:
        TrainingFailedError: non-zero exit, with the last 40 lines of output.
    """
    stream = stream or sys.stdout
    cmd = torchrun_command(
        config_to_args(output_dir=str(output_dir), **train_overrides), nproc_per_node=nproc_per_node
    )
    print("$ " + " ".join(cmd), file=stream, flush=True)
    child_env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "TOKENIZERS_PARALLELISM": "false",
        **(env or {}),
    }
    tail: list[str] = []
    with subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=child_env
    ) as proc:
        for line in proc.stdout:
            tail = (tail + [line])[-40:]
            print(line, end="", file=stream, flush=True)
        code = proc.wait()
    if code != 0:
        raise TrainingFailedError(
            f"training exited with code {code}; last output:\n{''.join(tail)}"
        )
    return json.loads((Path(output_dir) / "metrics.json").read_text())
