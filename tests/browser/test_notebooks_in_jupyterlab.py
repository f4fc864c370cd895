"""Notebooks 00-03 as a learner runs them: JupyterLab on 127.0.0.1, Debian's Chromium driven by
Playwright, Run > Run All Cells on each notebook in order, smoke profile, one run folder.

For any notebook and any cells, each test asserts: every code cell executed (an execution
count); no error output (a traceback, an error on stderr, a widget that failed to display); every
progress bar at its maximum; no Markdown pipe table printed as text. It keeps a screenshot of the
whole notebook, the notebook as saved from the browser and a findings file in
``runs/browser-<stamp>/browser/`` (``runs/latest`` untouched). ``make test-browser`` installs Chromium and Playwright; ``make test``
leaves these tests out.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from importlib.metadata import version
from pathlib import Path

import pytest
from notebooks.conftest import SHARED_RUN_PARAMETERS  # tests/notebooks/conftest.py
from support.jupyterlab import jupyterlab, shutdown_kernels

from pt2aws.pipeline import NOTEBOOKS, notebooks_dir
from pt2aws.rundir import RunDir

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"  # Debian's; Playwright's own download cannot reach its host here
# the flags this machine needs (no sandbox as root; no background connections, they are refused)
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: Seconds Run All may take per notebook before the test names the cell still running.
TIMEOUT_S = float(os.environ.get("PT2AWS_BROWSER_TIMEOUT_S", "900"))

# a Markdown table's separator row, e.g. `|---|:---:|` or `--- | ---`
PIPE_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)+\|?\s*$", re.M)
STDERR_ERROR = re.compile(
    r"Traceback \(most recent call last\)|\b\w*(Error|Exception)\b:|^ERROR", re.M
)
NAN = re.compile(r"(?<![\w.])NaN(?![\w.])")  # a missing value shown to a learner (issue 24 item 8)
WIDGET_ERROR = re.compile(r"Error displaying widget|Error rendering|model not found|Loading widget")
WIDGET = "application/vnd.jupyter.widget-view+json"
RICH = (
    "text/html",
    "text/markdown",
    "image/png",
    "image/svg+xml",
    WIDGET,
)

# What the page's JupyterLab (window.jupyterapp: expose_app_in_browser) says about the open notebook.
STATE_JS = """() => {
  const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  if (!panel || !panel.sessionContext) return null;
  const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
  const cells = [];
  for (let i = 0; i < panel.content.model.cells.length; i++) {
    const c = panel.content.model.cells.get(i);
    if (c.type === 'code') cells.push([i, c.executionCount, c.executionState]);
  }
  return {kernel: kernel ? kernel.status : null, cells: cells,
          dialog: !!document.querySelector('.jp-Dialog')};
}"""
SOURCE_JS = (
    "i => window.jupyterapp.shell.currentWidget.content.model.cells.get(i).sharedModel.getSource()"
)
CELLS_JS = """() => {
  const nb = window.jupyterapp.shell.currentWidget.content;
  const cells = [];
  for (let i = 0; i < nb.model.cells.length; i++) {
    const c = nb.model.cells.get(i), node = nb.widgets[i].node;
    const bars = Array.from(node.querySelectorAll('.jp-OutputArea .progress-bar')).map(b => {
      const box = b.closest('.widget-hbox') || b.closest('.jp-OutputArea-output');
      const vertical = !!b.closest('.widget-vprogress');
      return {percent: parseFloat(vertical ? b.style.height : b.style.width),
              danger: b.classList.contains('progress-bar-danger'),
              text: box ? box.textContent.replace(/\\s+/g, ' ').trim() : ''};
    });
    const shown = Array.from(node.querySelectorAll('.jp-OutputArea-output')).map(o => o.textContent);
    cells.push({type: c.type, source: c.sharedModel.getSource(),
                count: c.type === 'code' ? c.executionCount : null,
                outputs: c.type === 'code' ? c.outputs.toJSON() : [], bars: bars, shown: shown});
  }
  return cells;
}"""


# the page's bottom edge under the notebook's last cell, scrolled to the top
BOTTOM_JS = """() => {
  const outer = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer');
  outer.scrollTop = 0;
  const cells = outer.querySelectorAll('.jp-Cell');
  return Math.ceil(cells[cells.length - 1].getBoundingClientRect().bottom + 40);
}"""
SHOT_MAX_PX = 30000


def first_line(source: str) -> str:
    lines = [line for line in source.splitlines() if line.strip()]
    return (lines[0][:80] if lines else "(empty)").strip()


def findings_of(cells: list[dict]) -> list[dict]:
    """What a learner should not see, per cell: ``{"kind", "cell", "what"}`` with kind one of
    ``not-executed``, ``error``, ``progress``, ``pipe-table``, ``nan``, ``widget-only``; ``cell`` names the cell by its
    index in the opened notebook (the injected-parameters cell counts) and its first line."""
    found = []

    def add(kind, i, cell, what):
        found.append(
            {"kind": kind, "cell": f"cell {i} `{first_line(cell['source'])}`", "what": what}
        )

    for i, cell in enumerate(cells):
        if cell["type"] != "code" or not cell["source"].strip():
            continue
        if cell["count"] is None:
            add("not-executed", i, cell, "no execution count after Run All")
        for out in cell["outputs"]:
            text = out.get("text", "") if out["output_type"] == "stream" else ""
            if out["output_type"] == "error":
                add("error", i, cell, f"{out['ename']}: {out['evalue']}"[:300])
            elif out.get("name") == "stderr" and STDERR_ERROR.search(text):
                add("error", i, cell, f"on stderr: {text.strip()[:300]}")
            data = out.get("data", {})
            if "text/plain" in data and not any(k in data for k in RICH):
                text = data["text/plain"]
            rule = PIPE_TABLE_RULE.search(text)
            if rule:
                header = text[: rule.start()].rstrip("\n").rsplit("\n", 1)[-1]
                add("pipe-table", i, cell, f"Markdown printed as text: {header[:120]}")
            shown = "\n".join([text, data.get("text/html", ""), data.get("text/plain", "")])
            if NAN.search(shown):
                add(
                    "nan",
                    i,
                    cell,
                    "NaN in the output: " + first_line(shown[NAN.search(shown).start() :]),
                )
        widgets = [k for k, o in enumerate(cell["outputs"]) if WIDGET in o.get("data", {})]
        if widgets and not any(
            o["output_type"] == "stream" for o in cell["outputs"][widgets[-1] :]
        ):  # JupyterLab saves no widget state: a reopened notebook shows only an error there
            add("widget-only", i, cell, "no plain line after the last widget")
        for bar in cell["bars"]:
            if not bar["percent"] >= 100 or bar["danger"]:  # NaN: never drawn
                add("progress", i, cell, f"bar at {bar['percent']:.0f}%: {bar['text'][:200]}")
        for shown in cell["shown"]:
            if WIDGET_ERROR.search(shown):
                add("error", i, cell, f"widget: {shown.strip()[:200]}")
    return found


def stderr_notes(cells: list[dict]) -> list[str]:
    """Everything else on stderr (warnings): not failed, written to the findings file."""
    return [
        f"cell {i} `{first_line(c['source'])}`: {out['text'].strip()[:300]}"
        for i, c in enumerate(cells)
        for out in c["outputs"]
        if out.get("name") == "stderr" and not STDERR_ERROR.search(out["text"])
    ]


def test_findings_name_each_kind():
    """The checks themselves, on cells as CELLS_JS returns them (no browser)."""
    code = {"type": "code", "source": "run()\nmore()", "count": 1, "bars": [], "shown": []}
    table = "| a | b |\n|---|---|\n| 1 | 2 |\n"
    cells = [
        {"type": "markdown", "source": "| a | b |\n|---|---|", "count": None, "outputs": []}
        | {"bars": [], "shown": []},
        code | {"outputs": [{"output_type": "stream", "name": "stdout", "text": table}]},
        code | {"outputs": [{"output_type": "display_data", "data": {"text/plain": table}}]},
        code | {"outputs": [{"output_type": "display_data", "data": {"text/plain": table,
                                                                     "text/html": "<table>"}}]},
        code | {"outputs": [{"output_type": "error", "ename": "ValueError", "evalue": "bad"}]},
        code | {"outputs": [{"output_type": "stream", "name": "stderr", "text": "OSError: no"}]},
        code | {"outputs": [{"output_type": "stream", "name": "stderr", "text": "UserWarning"}]},
        code | {"outputs": [], "count": None},
        code | {"outputs": [], "bars": [{"percent": 4.0, "danger": False, "text": "wait 9/9"}]},
        code | {"outputs": [], "bars": [{"percent": 100.0, "danger": False, "text": "done"}]},
        code | {"outputs": [], "bars": [{"percent": float("nan"), "danger": False, "text": ""}]},
        code | {"outputs": [], "shown": ["Error displaying widget: model not found"]},
        code | {"outputs": [{"output_type": "display_data",
                             "data": {"text/html": "<td>NaN</td>", "text/plain": "x  NaN"}}]},
        code | {"outputs": [{"output_type": "stream", "name": "stdout", "text": "NaNs: 0"}]},
        code | {"outputs": [{"output_type": "display_data", "data": {WIDGET: {}}}]},
        code | {"outputs": [{"output_type": "display_data", "data": {WIDGET: {}}},
                            {"output_type": "stream", "name": "stdout", "text": "done"}]},
    ]  # fmt: skip
    found = [(f["kind"], f["cell"].split("`")[0].strip()) for f in findings_of(cells)]
    assert found == [
        ("pipe-table", "cell 1"),
        ("pipe-table", "cell 2"),
        ("error", "cell 4"),
        ("error", "cell 5"),
        ("not-executed", "cell 7"),
        ("progress", "cell 8"),
        ("progress", "cell 10"),
        ("error", "cell 11"),
        ("nan", "cell 12"),
        ("widget-only", "cell 14"),
    ]
    assert findings_of(cells)[0]["what"] == "Markdown printed as text: | a | b |"
    assert stderr_notes(cells) == ["cell 6 `run()`: UserWarning"]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A run folder with the four notebooks prepared by papermill (parameters injected, not
    executed) in ``browser/lab/``, JupyterLab serving that folder, and headless Chromium."""
    import papermill as pm

    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="the browser test needs Playwright: run `make test-browser`"
    )
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no {CHROMIUM}: `make test-browser` installs it (Debian's chromium)")
    # its own folder; runs/latest (the notebooks' default RUN_DIR, a learner's last make run) stays
    run = RunDir(ROOT / "runs" / time.strftime("browser-%Y%m%d-%H%M%S", time.gmtime()))
    run.root.mkdir(parents=True)
    out = run.root / "browser"
    root = out / "lab"
    # kernel_check.py and data/ beside the copies: the notebooks' cwd is their folder
    shutil.copytree(
        notebooks_dir(), root, ignore=shutil.ignore_patterns("*.ipynb", ".*", "__*", "kernel-ipc-*")
    )  # kernel-ipc-*: the sockets of kernels papermill runs there
    for name in NOTEBOOKS:
        params = {
            "PROFILE": "smoke",
            "RUN_DIR": str(run.root),
            **SHARED_RUN_PARAMETERS.get(name, {}),
        }
        unknown = set(params) - set(pm.inspect_notebook(str(notebooks_dir() / name)))
        assert not unknown, f"{name} lacks parameters {unknown}"
        pm.execute_notebook(
            str(notebooks_dir() / name), str(root / name), parameters=params,
            prepare_only=True, kernel_name="python3", progress_bar=False, log_output=False,
        )  # fmt: skip
    home = tmp_path_factory.mktemp("jupyter")
    with jupyterlab(root, home, out / "jupyterlab.log") as (url, token):
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
            )
            versions = {
                "chromium": browser.version,
                "playwright": version("playwright"),
                "jupyterlab": version("jupyterlab"),
                "ipywidgets": version("ipywidgets"),
            }
            (out / "versions.json").write_text(json.dumps(versions, indent=1))
            try:
                yield {"url": url, "token": token, "browser": browser, "out": out}
            finally:
                browser.close()


def wait_until_idle(page, name: str, what: str, timeout_s: float, need_cells: bool) -> None:
    """Poll the notebook until its kernel is idle and no cell is queued or running (twice in a
    row, 2 s apart); accepts the kernel-picker dialog if JupyterLab shows one.

    Raises:
        AssertionError: the kernel died, or ``timeout_s`` passed (naming the cell still running).
    """
    deadline, calm, state = time.monotonic() + timeout_s, 0, None
    while time.monotonic() < deadline:
        state = page.evaluate(STATE_JS)
        if state and state["dialog"]:  # "Select Kernel": keep the notebook's (python3)
            page.locator(".jp-Dialog .jp-mod-accept").click()
        elif state and state["kernel"] in ("dead", "unknown") and need_cells:
            raise AssertionError(f"{name}: the kernel died ({what})")
        busy = (
            not state or state["kernel"] != "idle" or any(s != "idle" for _, _, s in state["cells"])
        )
        calm = 0 if busy else calm + 1
        if calm >= 2:
            return
        time.sleep(2)
    running = [i for i, _, s in (state or {}).get("cells", []) if s != "idle"]
    where = ""
    if running:  # the first is the one executing; the later ones wait in the queue
        source = page.evaluate(SOURCE_JS, running[0])
        where = f"; still running: cell {running[0]} `{first_line(source)}`"
    raise AssertionError(f"{name}: {what} did not finish within {timeout_s:.0f} s{where}")


def screenshot(page, path: Path) -> None:
    """The whole notebook in one picture: the window made as tall as the notebook (the cells
    below the first screen draw as it grows, so measured again), at most ``SHOT_MAX_PX``."""
    size = page.viewport_size
    for _ in range(5):
        height = page.evaluate(BOTTOM_JS)
        if height <= page.viewport_size["height"] or page.viewport_size["height"] >= SHOT_MAX_PX:
            break
        page.set_viewport_size({"width": size["width"], "height": min(SHOT_MAX_PX, height)})
        page.wait_for_timeout(1500)
    page.screenshot(path=str(path))
    page.set_viewport_size(size)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_run_all_cells_in_jupyterlab(lab, name):
    stem = Path(name).stem
    page = lab["browser"].new_page(viewport={"width": 1280, "height": 1000})
    console: list[str] = []
    page.on(
        "console", lambda m: console.append(f"{m.type}: {m.text}") if m.type == "error" else None
    )
    page.on("pageerror", lambda e: console.append(f"page error: {e}"))
    try:
        t0 = time.monotonic()
        # a workspace per notebook: only this notebook opens (no earlier tab reopened)
        page.goto(f"{lab['url']}lab/workspaces/{stem}/tree/{name}?token={lab['token']}")
        wait_until_idle(page, name, "starting the kernel", 180, need_cells=False)
        opened_s = time.monotonic() - t0
        page.locator(".lm-MenuBar-item", has_text=re.compile(r"^Run$")).click()
        page.locator('.lm-Menu-item:has(.lm-Menu-itemLabel:text-is("Run All Cells"))').click()
        page.wait_for_timeout(3000)  # the cells queue
        wait_until_idle(page, name, "Run All Cells", TIMEOUT_S, need_cells=True)
        run_s = time.monotonic() - t0 - opened_s
        page.wait_for_timeout(2000)  # the last widgets draw
        cells = page.evaluate(CELLS_JS)
        page.keyboard.press("Control+s")  # saved as a learner would (no widget state in it)
        screenshot(page, lab["out"] / f"{stem}.png")
    finally:
        page.close()
        shutdown_kernels(lab["url"], lab["token"])
    found = findings_of(cells)
    report = {
        "notebook": name,
        "open_s": round(opened_s, 1),
        "run_all_s": round(run_s, 1),
        "code_cells": sum(c["type"] == "code" for c in cells),
        "findings": found,
        "stderr": stderr_notes(cells),
        "browser_console_errors": console,
    }
    (lab["out"] / f"{stem}.json").write_text(json.dumps(report, indent=1))
    assert not found, f"{name}, as a learner sees it in JupyterLab:\n" + "\n".join(
        f"  {f['kind']}: {f['cell']}: {f['what']}" for f in found
    )
