"""Notebook 01's "Try next" exercises, run as written: the parameters are read from the cell's text.

One papermill run per exercise on the smoke profile, with the sections that do not matter to it
off (the compile lesson, the A/B, the parallelism demo), 6 optimizer steps, and its ``RUN_DIR`` moved into
``tmp_path`` (the text's own ``RUN_DIR`` is checked: never the shared ``../runs/latest``).
"""

from __future__ import annotations

import ast
import json
import re

import nbformat
import pytest

from pt2aws.pipeline import notebooks_dir
from pt2aws.rundir import RunDir

NOTEBOOK = notebooks_dir() / "01_finetune_multi_gpu.ipynb"
pytestmark = pytest.mark.exercises  # make test-exercises (CI), not make test: 2-5 minutes

QUIET = {"EXPLAIN_COMPILE": False, "RUN_AB": False, "COMPARE_PARALLELISM": False, "MAX_STEPS": 6}


def exercises() -> dict[int, dict]:
    """``{number: {PARAMETER: value}}`` from the backticked ``NAME = value`` spans of each item."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    text = next(c.source for c in nb.cells if c.source.startswith("## Try next"))
    items = re.split(r"^(\d+)\. ", text.split("## References")[0], flags=re.M)[1:]
    found = {}
    for number, body in zip(items[::2], items[1::2], strict=True):
        spans = re.findall(r"`([A-Z_0-9]+) = ([^`]+)`", body)
        found[int(number)] = {name: ast.literal_eval(value) for name, value in spans}
    return found


def test_each_exercise_writes_its_own_run_folder():
    found = exercises()
    assert sorted(found) == [1, 2, 3, 4]
    run_dirs = [params.get("RUN_DIR") for params in found.values()]
    assert all(d and d.startswith("../runs/") and d != "../runs/latest" for d in run_dirs)
    assert len(set(run_dirs)) == len(run_dirs)
    import papermill as pm

    declared = set(pm.inspect_notebook(str(NOTEBOOK)))
    for params in found.values():
        assert set(params) <= declared


def printed_lines(cell) -> int:
    """Lines a cell's output shows: newlines of its streams (a bar redrawn with ``\\r`` is one
    line) plus the plain-text lines of what it displays (a table, a widget's text form)."""
    lines = 0
    for out in cell.get("outputs", []):
        if out.output_type == "stream":
            lines += out.text.count("\n") + (not out.text.endswith("\n"))
        elif "text/plain" in out.get("data", {}) and "image/png" not in out.data:
            lines += len(out.data["text/plain"].splitlines())
    return lines


def _run(number: int, tmp_path) -> tuple[dict, RunDir]:
    import papermill as pm

    params = {"PROFILE": "smoke", **exercises()[number], **QUIET, "RUN_DIR": str(tmp_path)}
    pm.execute_notebook(
        str(NOTEBOOK),
        str(tmp_path / "01.ipynb"),
        parameters=params,
        kernel_name="python3",
        cwd=str(notebooks_dir()),
        progress_bar=False,
    )
    executed = nbformat.read(tmp_path / "01.ipynb", as_version=4)
    longest = max(executed.cells, key=printed_lines)
    assert printed_lines(longest) <= 40, longest.source[:200]  # fits on a screen
    run = RunDir(tmp_path)
    return json.loads(run.train_metrics.read_text()), run


def test_exercise_1_trains_with_bf16_and_the_for_loop_adamw(tmp_path):
    metrics, _ = _run(1, tmp_path)
    assert metrics["flags"]["bf16"]["enabled"] and not metrics["flags"]["fused_adamw"]["enabled"]
    assert metrics["train_samples_per_second"] > 0


def test_exercise_2_shards_over_two_processes(tmp_path):
    metrics, _ = _run(2, tmp_path)
    assert (metrics["world_size"], metrics["parallelism"]) == (2, "fsdp")
    assert metrics["replica_max_abs_diff"] is None  # sharded: no full replicas to compare


def test_exercise_3_trains_on_the_shipped_star_ratings(tmp_path):
    metrics, _ = _run(3, tmp_path)
    stats = metrics["data"]
    assert metrics["label_names"] == ["negative", "positive"]
    assert stats["rows_read"] == 300 and stats["dropped_unmapped"] == 60
    assert (stats["format"], stats["encoding"]) == ("tsv", "cp1252")


def test_exercise_4_counts_the_graphs_compiled(tmp_path):
    metrics, _ = _run(4, tmp_path)
    assert metrics["flags"]["torch_compile"]["enabled"] and metrics["flags"]["length_bucketing"]
    # dynamic=None: a static graph, then one with a symbolic length, whatever the lengths
    assert 1 <= metrics["num_compiles"] <= 4
    assert metrics["pad_fraction"] < 0.5


@pytest.fixture(autouse=True)
def _no_shared_runs_written():
    latest = notebooks_dir().parent / "runs" / "latest" / "train" / "metrics.json"
    before = latest.stat().st_mtime if latest.exists() else None
    yield
    assert (latest.stat().st_mtime if latest.exists() else None) == before
