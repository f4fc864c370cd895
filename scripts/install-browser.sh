#!/usr/bin/env bash
# What `make test-browser` needs beyond `make setup`: Debian's Chromium (Playwright's own browser
# download cannot reach its host from these machines, so the test launches /usr/bin/chromium)
# and the pinned Playwright, pyproject.toml's `browser` extra.
#   bash scripts/install-browser.sh [python]        (default: the `python` on PATH)
set -euo pipefail
PY="${1:-python}"
cd "$(dirname "$0")/.."
if [ ! -x /usr/bin/chromium ]; then
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO="sudo"  # CI runs as root on Debian
    $SUDO apt-get update -q
    $SUDO apt-get install -y -q chromium
fi
"$PY" -m pip install -q -e ".[browser]"
