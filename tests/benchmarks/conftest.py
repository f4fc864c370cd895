"""Tests of the benchmark peers (``benchmarks/peers``): the scripts import them as ``peers``,
with ``benchmarks/`` first on ``sys.path``; these tests do the same."""

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))
