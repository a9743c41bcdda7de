#!/usr/bin/env bash
# GPU machine side: every GPU step of a session in one script. Reads the PTX
# from .carry/ptx (scripts/gpu/build-ptx.sh), runs the GPU tests and writes
# the log and a JSON summary under $OUT (or ./gpu-out without the tool).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-$PWD/gpu-out}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 SAGE_PTX_DIR="$PWD/.carry/ptx" SAGE_GPU_RESULTS="$OUT/gpu-results.json"
if [ -f .carry/libsage_compiler.so.gz ]; then
  gunzip -c .carry/libsage_compiler.so.gz > /tmp/libsage_compiler.so
  export SAGE_COMPILER_LIBRARY=/tmp/libsage_compiler.so
fi
{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 --version
} | tee "$OUT/device.txt"
python3 -m pytest python/test/gpu python/test/test_compiler_library.py -v -rs \
  -k "not same_ptx_as_sage_translate" 2>&1 | tee "$OUT/gpu-tests.log"
exit "${PIPESTATUS[0]}"
