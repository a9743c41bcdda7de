#!/usr/bin/env bash
# The main job for now: compile the example kernels through the named
# sage-prepare pipeline and show the IR after every pass.
set -euo pipefail
cd "$(dirname "$0")/.."
OPT=build/bin/sage-opt
ARCH="${SAGE_ARCH:-sm_90a}"
for kernel in examples/*.mlir; do
  echo "=================================================================="
  echo "== $kernel: sage-opt --sage-prepare='arch=$ARCH'"
  echo "=================================================================="
  echo "-- stages:"
  "$OPT" "$kernel" --sage-prepare="arch=$ARCH" \
    --mlir-print-ir-after-all --mlir-disable-threading 2>&1 >/dev/null |
    grep 'IR Dump After' | sed 's|^// -----// IR Dump After |   |; s| //----- //$||'
  echo "-- result:"
  "$OPT" "$kernel" --sage-prepare="arch=$ARCH"
done
