#!/usr/bin/env bash
# Build machine side of the GPU check: pack the self-contained compiler
# library (stripped, gzipped) and, as a fallback, the examples' PTX into
# .carry, which travels to the GPU machine (name .carry in the device tool's
# `carry`). There the GPU tests compile the examples in-process with the
# library.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=.carry/ptx
mkdir -p "$out"
for kernel in quant_matmul quantize_tile half_matmul int8_matmul; do
  build/bin/sage-translate "examples/$kernel.mlir" --arch=sm_90a -o "$out/$kernel.sm_90a.ptx"
  build/bin/sage-translate "examples/$kernel.mlir" --arch=sm_80 -o "$out/$kernel.sm_80.ptx"
done
build/bin/sage-translate examples/sagebwd_forward.mlir --arch=sm_90a \
  -o "$out/sagebwd_forward.sm_90a.ptx"
strip -o .carry/libsage_compiler.so build/lib/libsage_compiler.so
gzip -9 -f .carry/libsage_compiler.so
ls -l "$out" .carry
