#!/usr/bin/env bash
# Run the three workloads on CUDA and check their numbers (benchmarks/gpu_check.py), then the CLI
# path once. Usage: benchmarks/gpu_check.sh [OUT_DIR]   (needs a GPU and tracekit[workloads])
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
OUT=${1:-/tmp/tk_gpu_check}
rm -rf "$OUT" && mkdir -p "$OUT"
"$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else "no CUDA GPU visible to torch")'
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
"$PY" benchmarks/gpu_check.py --device cuda --out "$OUT" 2>&1 | grep -v '^USDT' | tee "$OUT/gpu_check.log"
rc=${PIPESTATUS[0]}
# the exact issue invocation through the CLI, on the GPU
"$PY" -m tracekit.cli.main run phase-shape --d 2048 --dtype float32 --prefill-rows 256 --decode-rows 8 \
  --device cuda --out "$OUT/cli_phase_shape" --force 2>&1 | grep -v '^USDT' | tee -a "$OUT/gpu_check.log"
exit "$rc"
