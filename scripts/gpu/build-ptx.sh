#!/usr/bin/env bash
# Build machine side of the GPU check: compile the example kernels with the
# compiler library (sage-translate) into .carry/ptx, which travels to the GPU
# machine (name .carry in the device tool's `carry`).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=.carry/ptx
mkdir -p "$out"
for kernel in quant_matmul quantize_tile half_matmul; do
  build/bin/sage-translate "examples/$kernel.mlir" --arch=sm_90a -o "$out/$kernel.sm_90a.ptx"
  build/bin/sage-translate "examples/$kernel.mlir" --arch=sm_80 -o "$out/$kernel.sm_80.ptx"
done
build/bin/sage-translate examples/sagebwd_forward.mlir --arch=sm_90a --num-warps=8 \
  -o "$out/sagebwd_forward.sm_90a.ptx"
ls -l "$out"
