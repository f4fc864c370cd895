import pytest

from pt2aws import pipeline


def _processes_mentioning(text: str) -> list[str]:
    """Processes whose command line names ``text``, except this one and ``make run`` itself."""
    from pathlib import Path

    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if text in cmdline and "pt2aws.pipeline" not in cmdline:
                found.append(f"{entry.name}: {cmdline[:400]}")
    return found


#: ``python -m pt2aws.pipeline`` (``make run``) as it runs, through its own ``main`` (the SIGTERM
#: handler, papermill, the kernel), but only notebook 01 with its slow lessons off, so that a
#: training subprocess starts within seconds instead of after notebook 00 and the compile lesson.
SMALL_MAKE_RUN = """
import functools, sys
from pt2aws import pipeline
from pt2aws.errors import run_cli
pipeline.run_notebooks = functools.partial(
    pipeline.run_notebooks,
    notebooks=("01_finetune_multi_gpu.ipynb",),
    extra_parameters={"EXPLAIN_COMPILE": False, "COMPARE_PARALLELISM": False, **PARAMS},
)
raise SystemExit(run_cli(pipeline.main, prog="python -m pt2aws.pipeline"))
"""


def _make_run_until_training(run_dir, **params):
    """``make run`` (smoke, notebook 01 with ``params``) in a subprocess, returned once notebook
    01 runs a training process (an A/B run with ``RUN_AB=True``, else torchrun)."""
    import os
    import subprocess
    import sys
    import threading
    import time

    code = f"PARAMS = {params!r}\n{SMALL_MAKE_RUN}"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "--profile", "smoke", "--run-dir", str(run_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.extend(proc.stdout), daemon=True)
    reader.start()
    deadline = time.monotonic() + 240  # the kernel starts, then notebook 01 starts a subprocess
    while not _processes_mentioning(str(run_dir)) and time.monotonic() < deadline:
        assert proc.poll() is None, "".join(out[-30:])
        time.sleep(0.5)
    assert _processes_mentioning(str(run_dir)), "".join(out[-30:])  # A/B run or torchrun
    return proc, reader, out


def _nothing_left_of(run_dir, wait_s: int = 60) -> list[str]:
    import time

    for _ in range(wait_s):
        left = _processes_mentioning(str(run_dir))
        if not left:
            break
        time.sleep(1)
    return left


linux_only = pytest.mark.skipif(
    not __import__("sys").platform.startswith("linux"), reason="needs /proc and prctl"
)


def test_make_run_data_options_become_notebook_01_parameters(tmp_path, monkeypatch):
    source = tmp_path / "reviews.tsv"
    source.write_text("5\tgreat\n1\tawful\n")
    monkeypatch.chdir(tmp_path)
    args = pipeline.build_parser().parse_args(
        ["--data", "reviews.tsv", "--header", "false", "--text-column", "1"]
        + ["--label-column", "0", "--label-map", "1=negative,5=positive", "--encoding", ""]
        + ["--max-length", "128"]
    )
    assert pipeline.data_parameters(args) == {
        "DATASET": str(source.resolve()),  # absolute: the notebooks run in notebooks/
        "HEADER": "false",
        "TEXT_COLUMN": "1",
        "LABEL_COLUMN": "0",
        "LABEL_MAP": "1=negative,5=positive",
        "MAX_LENGTH": "128",
    }
    defaults = pipeline.build_parser().parse_args([])
    assert pipeline.data_parameters(defaults) == {}  # make run with no DATA: the profile's data
    hub = pipeline.build_parser().parse_args(["--data", "stanfordnlp/sst2"])
    assert pipeline.data_parameters(hub) == {"DATASET": "stanfordnlp/sst2"}
    missing = pipeline.build_parser().parse_args(["--data", "nope.csv"])
    with pytest.raises(FileNotFoundError, match="DATA=nope.csv: no such file"):
        pipeline.data_parameters(missing)
    from pt2aws.data import DataError

    bad_map = pipeline.build_parser().parse_args(["--label-map", "positive"])
    with pytest.raises(DataError, match="--label_map"):  # before any notebook runs
        pipeline.data_parameters(bad_map)


def test_make_run_max_length_is_a_valid_notebook_01_value():
    from pt2aws.config import TrainConfig

    args = pipeline.build_parser().parse_args(["--max-length", "128"])
    value = pipeline.data_parameters(args)["MAX_LENGTH"]
    assert TrainConfig(profile="local", max_length=value).max_length == 128
    assert TrainConfig(profile="local", max_length="auto").max_length == "auto"
    with pytest.raises(ValueError, match="--max_length 'long'"):
        TrainConfig(profile="local", max_length="long")


@linux_only
def test_sigterm_stops_make_run_with_its_training_subprocesses_and_writes_the_summary(tmp_path):
    """A killed `make run` (CI timeout, `kill`) must not leave training running, orphaned."""
    import signal

    run_dir = tmp_path / "run"
    # an A/B run that would take an hour: only the clean-up can end it within the test
    proc, reader, out = _make_run_until_training(run_dir, RUN_AB=True, AB_STEPS=100_000)
    assert _processes_mentioning(str(run_dir / "ab"))  # the A/B runs and their server
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=120)
    reader.join(timeout=10)
    text = "".join(out)
    assert proc.returncode == 130, text[-2000:]
    assert "stopped after" in text and "summary of what ran" in text
    assert (run_dir / "summary.md").is_file()
    assert not _nothing_left_of(run_dir)


@linux_only
def test_sigkill_of_make_run_still_ends_the_training_subprocesses(tmp_path):
    """No clean-up runs after SIGKILL: the kernel notices its parent is gone and exits, and the
    training processes it started get SIGTERM from the kernel's death (die_with_parent)."""
    import signal

    run_dir = tmp_path / "run"
    # a training run that would take an hour: only the death signal can end it within the test
    proc, reader, _ = _make_run_until_training(run_dir, RUN_AB=False, MAX_STEPS=100_000)
    assert "torch.distributed.run" in " ".join(_processes_mentioning(str(run_dir)))  # torchrun
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    reader.join(timeout=10)
    assert not _nothing_left_of(run_dir, wait_s=90)
