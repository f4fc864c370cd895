"""Launch: a torchrun subprocess from a validated :class:`TrainConfig` saved as a file.

A notebook kernel must not fork CUDA workers; ``torchrun`` starts fresh processes, one per GPU
(one process on a CPU-only machine). :func:`launch_training` writes the config with
:meth:`TrainConfig.to_json`, runs ``torchrun … -m pt2aws.train --config <file>``, streams the
output and returns the metrics rank 0 wrote. :func:`torchrun_command` and :func:`format_command`
give the exact command, which a user can paste into a terminal.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from pt2aws.config import TrainConfig, saved_config_path
from pt2aws.processes import die_with_parent
from pt2aws.train.progress import PREFIX as PROGRESS_PREFIX
from pt2aws.train.progress import PROGRESS_ENV, ProgressDisplay, strip_ansi


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

    Args:
        train_args: arguments for ``pt2aws.train``, e.g. ``["--config", "run/train_config.json"]``.
        nproc_per_node: processes on this node; default: one per GPU, or 1 on CPU.
        nnodes: number of nodes (more than 1 needs a rendezvous endpoint added by the caller).
        master_port: a fixed port on one node; default ``--standalone`` (torchrun picks one).

    Returns:
        The argv list; :func:`format_command` turns it into one pasteable line.
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


def format_command(cmd: list[str]) -> str:
    """``cmd`` as one shell line, quoted where needed (``shlex.join``)."""
    return shlex.join(cmd)


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
    cfg: TrainConfig,
    *,
    nproc_per_node: int | None = None,
    stream=None,
    env: dict | None = None,
) -> dict:
    """Run training for ``cfg`` under torchrun, echo its output live, return rank 0's metrics.

    The config goes to ``<cfg.output_dir>/train_config.json`` first (the run rewrites the same
    content there when it finishes), and torchrun gets ``--config`` with that file, so the
    subprocess trains exactly the validated ``cfg``. Its progress arrives as lines that become
    one bar updating in place (:class:`pt2aws.train.progress.ProgressDisplay`: a widget in a
    notebook) and one summary line at the end; its other output is echoed without terminal
    colour codes.

    Args:
        cfg: the run; ``cfg.output_dir`` receives ``model/``, ``metrics.json``,
            ``train_log.jsonl`` and ``train_config.json``.
        nproc_per_node: processes on this node; default: one per GPU, or 1 on CPU.
        stream: where to echo the command and output (default ``sys.stdout``; a notebook shows
            it live).
        env: extra environment variables for the subprocess.

    Returns:
        The ``metrics.json`` dict.

    Raises:
        TrainingFailedError: non-zero exit, with the last 40 lines of output.
    """
    stream = stream or sys.stdout
    config_file = cfg.to_json(saved_config_path(cfg.output_dir))
    cmd = torchrun_command(["--config", str(config_file)], nproc_per_node=nproc_per_node)
    print("$ " + format_command(cmd), file=stream, flush=True)
    child_env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "TOKENIZERS_PARALLELISM": "false",
        PROGRESS_ENV: "lines",  # progress as lines this process draws as one bar
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",  # no loading/saving bars from transformers
        **(env or {}),
    }
    tail: list[str] = []
    display = ProgressDisplay(stream)
    with subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=child_env,
        preexec_fn=die_with_parent(),  # killed kernel or make run: torchrun stops too
    ) as proc:
        try:
            for line in proc.stdout:
                if not line.startswith(PROGRESS_PREFIX):
                    tail = (tail + [strip_ansi(line)])[-40:]
                display.feed(line)
        finally:
            display.close()
        code = proc.wait()
    if code != 0:
        raise TrainingFailedError(
            f"training exited with code {code}; last output:\n{''.join(tail)}"
        )
    return json.loads((Path(cfg.output_dir) / "metrics.json").read_text())
