"""Imported by Python at start-up when this folder is on ``PYTHONPATH`` (:func:`support.faults.job_env`):
arms :func:`support.faults.install` in each process that has ``PT2AWS_FAIL_AT_STEP``."""

import os
import sys
from pathlib import Path

if os.environ.get("PT2AWS_FAIL_AT_STEP"):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/, for support
    from support.faults import install

    install()
