"""Fault injection for the restart tests (nothing in the package fails on purpose).

``PT2AWS_FAIL_AT_STEP=N``: the last rank (or ``PT2AWS_FAIL_RANK``) dies after step N on the first
attempt (``os._exit(1)`` under torchrun, else ``RuntimeError``). :func:`install` arms it in this
process; :data:`SITE` on ``PYTHONPATH`` arms it in every process of a torchrun job.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: A folder whose ``sitecustomize.py`` calls :func:`install` at interpreter start-up.
SITE = Path(__file__).with_name("fail_site")


def install(monkeypatch=None) -> None:
    """Wrap ``StepMonitor.after_step`` to fail as ``PT2AWS_FAIL_AT_STEP`` says (``monkeypatch``:
    undone after the test)."""
    from pt2aws.train.progress import StepMonitor

    after_step = StepMonitor.after_step

    def failing(self, *args) -> None:
        after_step(self, *args)
        step, info = self.state.step, self.info
        first_attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"
        rank = int(os.environ.get("PT2AWS_FAIL_RANK", info.world_size - 1))
        if (
            os.environ.get("PT2AWS_FAIL_AT_STEP") != str(step)
            or not first_attempt
            or info.rank != rank
        ):
            return
        message = f"PT2AWS_FAIL_AT_STEP={step}: rank {info.rank} fails on purpose"
        if "TORCHELASTIC_RUN_ID" in os.environ:
            sys.stderr.write(message + "\n")  # one write: never inside another rank's line
            sys.stderr.flush()
            os._exit(1)
        raise RuntimeError(message)

    if monkeypatch is None:
        StepMonitor.after_step = failing
    else:
        monkeypatch.setattr(StepMonitor, "after_step", failing)


def job_env(step: int) -> dict[str, str]:
    """The environment that makes a torchrun job fail after ``step`` (:data:`SITE` first)."""
    path = os.pathsep.join(filter(None, [str(SITE), os.environ.get("PYTHONPATH")]))
    return {"PT2AWS_FAIL_AT_STEP": str(step), "PYTHONPATH": path}
