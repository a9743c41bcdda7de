#!/usr/bin/env bash
# The main job for now: compile the example kernels through the named
# sage-prepare pipeline (showing the sage-level IR), then all the way to PTX
# for sm_90a, validated by ptxas when the CUDA toolkit is present.
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
  ptx="$(mktemp --suffix=.ptx)"
  build/bin/sage-translate "$kernel" --arch="$ARCH" -o "$ptx"
  echo "-- PTX ($ARCH): $(head -1 "$ptx")"
  { grep -oE '(wgmma.mma_async|mma.sync|cp.async.cg)[a-z0-9.]*' "$ptx" || true; } | sort | uniq -c | sed 's/^/   /'
  PTXAS="$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)"
  if [ -x "$PTXAS" ]; then
    "$PTXAS" -arch="$ARCH" -v "$ptx" -o /dev/null 2>&1 | grep -E 'registers|spill' | sed 's/^/   /'
  fi
  rm -f "$ptx"
done
echo "=================================================================="
echo "== python/examples/quant_matmul.py in the interpreter (SAGE_INTERPRET=1)"
echo "=================================================================="
SAGE_INTERPRET=1 python3 python/examples/quant_matmul.py
echo "=================================================================="
echo "== python/examples/attention.py: SageBwd forward + backward"
echo "=================================================================="
python3 python/examples/attention.py
