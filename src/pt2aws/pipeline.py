"""``make run``: execute notebooks 00-03 with papermill into one run folder (executed notebooks
in ``<run>/notebooks/``, their outputs in ``<run>/``, ``summary.md`` from :mod:`pt2aws.report`)."""

from __future__ import annotations

import dataclasses
import io
import signal
import sys
import time
from pathlib import Path

from pt2aws.config import PROFILES, TrainConfig
from pt2aws.errors import ArgumentParser, MissingFileError, run_cli
from pt2aws.rundir import RunDir

NOTEBOOKS = ("00_instance_setup.ipynb", "01_finetune_multi_gpu.ipynb", "02_local_inference.ipynb",
             "03_deploy_sagemaker_graviton.ipynb")  # fmt: skip
#: ``make run`` options that become notebook 01's parameters: option -> (parameter, TrainConfig
#: field, whose help they show).
DATA_OPTIONS = {"data": ("DATASET", "dataset"), "model": ("MODEL", "model_name_or_path")} | {
    name: (name.upper(), name)
    for name in ("text_column", "label_column", "header", "encoding", "label_map", "max_length")
}


def notebooks_dir() -> Path:
    """The repository's ``notebooks/`` folder (the package is installed in editable mode)."""
    return Path(__file__).resolve().parents[2] / "notebooks"


class _PrefixedStream(io.TextIOBase):
    """Writes to ``sink`` with ``prefix`` at the start of every line (also after ``\\r``)."""

    def __init__(self, sink, prefix: str):
        self.sink, self.prefix, self.at_line_start = sink, prefix, True

    def write(self, text: str) -> int:
        lines = text.splitlines(keepends=True)  # a bar's "\r" ends a line too
        starts = [self.at_line_start] + [True] * (len(lines) - 1)
        self.sink.write("".join(self.prefix * s + line for s, line in zip(starts, lines)))
        self.sink.flush()
        self.at_line_start = lines[-1][-1] in "\n\r" if lines else self.at_line_start
        return len(text)


def run_notebooks(run_dir: str | Path, *, profile: str = "local",
                  notebooks: tuple[str, ...] = NOTEBOOKS, extra_parameters: dict | None = None,
                  per_notebook: dict[str, dict] | None = None, stream=None) -> dict[str, float]:  # fmt: skip
    """Execute ``notebooks`` in order into ``run_dir`` with ``PROFILE``, ``RUN_DIR``,
    ``extra_parameters`` and ``per_notebook[name]``; returns seconds per notebook. Cell output
    streams to ``stream`` (default stdout; ``False``: nowhere) prefixed with the notebook's number.
    Raises ``PapermillExecutionError`` at the first failing notebook (kept, partly executed)."""
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
        parameters = {"PROFILE": profile, "RUN_DIR": str(run.root), **(extra_parameters or {})}
        t0 = time.perf_counter()
        pm.execute_notebook(
            str(notebooks_dir() / name),
            str(run.notebooks_dir / name),
            parameters=parameters | (per_notebook or {}).get(name, {}),
            kernel_name="python3",
            cwd=str(notebooks_dir()),
            progress_bar=False,
            stdout_file=out,
            stderr_file=out,
            config=ipc,
            start_timeout=300,  # papermill's 60 s is too short for a kernel on a busy machine
        )
        if out is not None and not out.at_line_start:
            sink.write("\n")
        timings[name] = time.perf_counter() - t0
        print(f"[{i}/{len(notebooks)}] {name} done in {timings[name]:.1f} s", flush=True)
    return timings


def build_parser() -> ArgumentParser:
    """The ``python -m pt2aws.pipeline`` / ``make run`` options."""
    parser = ArgumentParser(prog="python -m pt2aws.pipeline", description=__doc__)
    parser.add_argument("--profile", default="local", choices=PROFILES)
    parser.add_argument("--runs-dir", default="runs")
    parser.add_argument("--run-dir", default=None, help="default: runs/<UTC timestamp>")
    data = parser.add_argument_group("your own data (notebook 01's parameters; empty: default)")
    helps = {f.name: f.metadata["help"] for f in dataclasses.fields(TrainConfig)}
    for option, (_, field) in DATA_OPTIONS.items():
        data.add_argument(f"--{option.replace('_', '-')}", default="", help=helps[field])
    return parser


def data_parameters(args) -> dict:
    """Notebook 01's parameters for the data options given; MissingFileError (a ``--data`` path
    that does not exist) or DataError (``--label-map``) before any notebook runs."""
    from pt2aws.data.labels import parse_label_map
    from pt2aws.data.readers import looks_like_path

    given = {name: getattr(args, opt) for opt, (name, _) in DATA_OPTIONS.items()}
    params = {name: value for name, value in given.items() if value}
    parse_label_map(params.get("LABEL_MAP"))  # fails before any notebook runs
    data = params.get("DATASET")
    if data and Path(data).expanduser().exists():
        params["DATASET"] = str(Path(data).expanduser().resolve())  # notebooks run in notebooks/
    elif data and looks_like_path(data):  # a hub id like "stanfordnlp/sst2" passes through
        raise MissingFileError(f"DATA={data}: no such file (looked from {Path.cwd()})")
    return params


def _terminate(signum, frame):
    raise KeyboardInterrupt(f"stopped by signal {signum}")


def main(argv: list[str] | None = None) -> int:
    """``python -m pt2aws.pipeline [--profile local] [--data FILE ...]``; prints the summary."""
    from pt2aws.report import write_summary

    args = build_parser().parse_args(argv)
    data = data_parameters(args)
    # a SIGTERM (CI timeout, `kill`) ends like Ctrl-C: papermill shuts the kernel down with the
    # training processes it started, and the summary of what ran is written
    previous = signal.signal(signal.SIGTERM, _terminate)
    run_dir = Path(args.run_dir) if args.run_dir else RunDir.new(args.runs_dir).root
    print(f"run folder: {run_dir}" + (f"\ndata: {data}" if data else ""), flush=True)
    t0, timings = time.perf_counter(), None
    try:
        timings = run_notebooks(run_dir, profile=args.profile, per_notebook={NOTEBOOKS[1]: data})
    except KeyboardInterrupt as stop:
        print(f"stopped after {time.perf_counter() - t0:.1f} s ({stop or 'Ctrl-C'})", flush=True)
        return 130  # 128 + SIGINT, as a shell reports an interrupted command
    finally:
        signal.signal(signal.SIGTERM, previous)
        summary = write_summary(run_dir, timings)
        print(f"summary of what ran: {summary}", flush=True)
    print(f"all notebooks done in {time.perf_counter() - t0:.1f} s")
    print(summary.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(run_cli(main, prog="python -m pt2aws.pipeline"))
