#!/usr/bin/env bash
# GPU machine side: every GPU step of a session in one script. Unpacks the
# compiler library carried in .carry (scripts/gpu/build-ptx.sh), builds the
# thin Python binding against it, runs the GPU tests and the JIT benchmark,
# and writes logs and JSON summaries under $OUT (or ./gpu-out without the
# device tool).
#
#   bash scripts/gpu/run.sh [PYTEST_SELECTION...]   (default: every GPU test)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-$PWD/gpu-out}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 SAGE_PTX_DIR="$PWD/.carry/ptx" SAGE_GPU_RESULTS="$OUT/gpu-results.json"
export SAGE_CACHE_DIR=/tmp/sage-cache SAGE_BINDING_DIR=/tmp/sage-binding
if [ -f .carry/libsage_compiler.so.gz ]; then
  gunzip -c .carry/libsage_compiler.so.gz > /tmp/libsage_compiler.so
  export SAGE_COMPILER_LIBRARY=/tmp/libsage_compiler.so
fi
{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 --version
} | tee "$OUT/device.txt"
start=$(date +%s%N)
bash scripts/build-binding.sh "$SAGE_BINDING_DIR" || exit 1
echo "binding build: $(( ($(date +%s%N) - start) / 1000000 )) ms" | tee -a "$OUT/device.txt"

selection=("$@")
[ ${#selection[@]} -gt 0 ] || selection=(python/test/gpu python/test/test_compiler_library.py
                                         python/test/test_jit_binding.py)
python3 -m pytest "${selection[@]}" -v -rs -k "not same_ptx_as_sage_translate" \
  2>&1 | tee "$OUT/gpu-tests.log"
status=${PIPESTATUS[0]}
if [ -f bench/jit_overhead.py ] && [ $# -eq 0 ]; then
  python3 bench/jit_overhead.py "$OUT/jit_overhead.json" 2>&1 | tee "$OUT/jit_overhead.txt"
fi
exit "$status"
