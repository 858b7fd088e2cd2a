#!/usr/bin/env bash
# The GPU half of the CuPy backend's checks, in one command, for a machine with an NVIDIA GPU
# and CuPy installed: any CUDA variant (pip install -e ".[gpu,test]" gives cupy-cuda12x,
# ".[gpu-cuda13,test]" cupy-cuda13x; an image that already has CuPy, NumPy, matplotlib, tqdm,
# pytest and hypothesis can run it from the checkout with PYTHONPATH=.); torch with CUDA is
# optional (the benchmark's reference):
#
#   bash benchmarks/gpu_check.sh [OUT_DIR]        # default OUT_DIR: gpu-report
#
# 1. the `cuda` cases of the device suites (tests/device/): every op, kernel, layer,
#    optimizer and training loop on CuPy against the CPU, float64 to 1e-10, float32 to 1e-4;
# 2. `tinygrad-rnn gradcheck --device cuda`: float64 central differences on the GPU;
# 3. `benchmarks/recurrent.py --device cuda` at the goal's size (H=1024, N=256) and at H=256:
#    ours on CuPy against torch's cuDNN layers when torch has CUDA.
# Each step's output is written to OUT_DIR; the script stops at the first failing step.
# Without CuPy or a GPU it stops at once, saying which is missing.
set -euo pipefail
out="${1:-gpu-report}"
py="${PYTHON:-python3}"   # the interpreter that has CuPy (PYTHON=... to choose another)
"$py" - <<'PY'
import sys
from tinygrad_rnn import backend
try:
    backend.module_for_device("cuda")
except RuntimeError as exc:
    sys.exit(f"gpu_check: {exc}")
PY
mkdir -p "$out"
"$py" -m pytest -q -p no:cacheprovider tests/device -k cuda 2>&1 | tee "$out/device_tests.txt"
"$py" -m tinygrad_rnn gradcheck --device cuda --examples 10 2>&1 | tee "$out/gradcheck.txt"
"$py" benchmarks/recurrent.py --device cuda --cells lstm gru rnn --hidden 256 1024 \
    --batch 256 --markdown --out "$out/recurrent_cuda.md"
echo "gpu_check: all steps passed; outputs in $out/"
