"""``make run``: execute notebooks 00-03 in order with papermill into one run folder.

Each executed notebook lands in ``<run>/notebooks/``; the notebooks write their metrics and plots
into ``<run>/``; ``summary.md`` collects the key figures at the end.
"""

from __future__ import annotations

import io
import sys
import time
from pathlib import Path

from pt2aws.rundir import RunDir

NOTEBOOKS = (
    "00_instance_setup.ipynb",
    "01_finetune_multi_gpu.ipynb",
    "02_local_inference.ipynb",
    "03_deploy_sagemaker_graviton.ipynb",
)


def notebooks_dir() -> Path:
    """The repository's ``notebooks/`` folder (this package is installed in editable mode)."""
    return Path(__file__).resolve().parents[2] / "notebooks"


class _PrefixedStream(io.TextIOBase):
    """Writes to ``sink`` with ``prefix`` at the start of every line (also after ``\\r``, so a
    progress bar redrawn in place keeps its prefix)."""

    def __init__(self, sink, prefix: str):
        self.sink, self.prefix, self.at_line_start = sink, prefix, True

    def write(self, text: str) -> int:
        out = []
        for ch in text:
            if self.at_line_start:
                out.append(self.prefix)
                self.at_line_start = False
            out.append(ch)
            if ch in "\n\r":
                self.at_line_start = True
        self.sink.write("".join(out))
        self.sink.flush()
        return len(text)


def run_notebooks(
    run_dir: str | Path,
    *,
    profile: str = "local",
    kernel_name: str = "python3",
    notebooks: tuple[str, ...] = NOTEBOOKS,
    extra_parameters: dict | None = None,
    stream=None,
) -> dict[str, float]:
    """Execute ``notebooks`` in order into ``run_dir``; returns seconds per notebook.

    Every notebook gets the parameters ``PROFILE`` and ``RUN_DIR`` (plus ``extra_parameters``).
    What the cells print (the training progress bar, tables, "what you should see" figures) is
    streamed live to ``stream``, each line prefixed with the notebook's number. The kernel talks
    to papermill over IPC sockets (not TCP), so no unencrypted-transport warning is printed.
    Stops at the first failing notebook (papermill raises ``PapermillExecutionError``; the partly
    executed notebook is kept in ``<run>/notebooks/`` for inspection).

    Args:
        stream: where cell output goes live (default ``sys.stdout``); ``False``: nowhere.
    """
    import papermill as pm
    from traitlets.config import Config

    run = RunDir(Path(run_dir).resolve())
    run.notebooks_dir.mkdir(parents=True, exist_ok=True)
    ipc = Config()
    ipc.KernelManager.transport = "ipc"  # local sockets; TCP without keys makes ipykernel warn
    sink = sys.stdout if stream is None else stream
    timings: dict[str, float] = {}
    for i, name in enumerate(notebooks, 1):
        print(f"[{i}/{len(notebooks)}] {name} ...", flush=True)
        out = _PrefixedStream(sink, f"  {name[:2]} | ") if sink else None
        t0 = time.perf_counter()
        pm.execute_notebook(
            str(notebooks_dir() / name),
            str(run.notebooks_dir / name),
            parameters={"PROFILE": profile, "RUN_DIR": str(run.root), **(extra_parameters or {})},
            kernel_name=kernel_name,
            cwd=str(notebooks_dir()),
            progress_bar=False,
            stdout_file=out,
            stderr_file=out,
            config=ipc,
        )
        if out is not None and not out.at_line_start:
            sink.write("\n")
        timings[name] = time.perf_counter() - t0
        print(f"[{i}/{len(notebooks)}] {name} done in {timings[name]:.1f} s", flush=True)
    return timings


def main(argv: list[str] | None = None) -> int:
    """``python -m pt2aws.pipeline [--profile local] [--runs-dir runs]``; prints the summary path."""
    from pt2aws.errors import ArgumentParser
    from pt2aws.report import write_summary

    parser = ArgumentParser(prog="python -m pt2aws.pipeline", description=__doc__)
    parser.add_argument("--profile", default="local", choices=("smoke", "local", "full"))
    parser.add_argument("--runs-dir", default="runs")
    parser.add_argument(
        "--run-dir", default=None, help="explicit run folder (default: runs/<UTC timestamp>)"
    )
    args = parser.parse_args(argv)
    run_dir = Path(args.run_dir) if args.run_dir else RunDir.new(args.runs_dir).root
    print(f"run folder: {run_dir}", flush=True)
    t0 = time.perf_counter()
    timings = None
    try:
        timings = run_notebooks(run_dir, profile=args.profile)
    finally:
        summary = write_summary(run_dir, timings)
    print(f"all notebooks done in {time.perf_counter() - t0:.1f} s; summary: {summary}")
    print(summary.read_text())
    return 0


if __name__ == "__main__":
    from pt2aws.errors import run_cli

    raise SystemExit(run_cli(main, prog="python -m pt2aws.pipeline"))
