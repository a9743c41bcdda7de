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
# The other wgmma form of each example's matmul (python/test/gpu/conftest.py
# force_mma does the same).
force() { sed -E "s/(sage\.q?matmul [^:]*contract\([0-9], [0-9]\))/\1 using $2/" "examples/$1.mlir"; }
force quant_matmul wgmma | build/bin/sage-translate - --arch=sm_90a -o "$out/quant_matmul.sm_90a.wgmma.ptx"
force half_matmul wgmma_reg_a | build/bin/sage-translate - --arch=sm_90a \
  -o "$out/half_matmul.sm_90a.wgmma_reg_a.ptx"
# The cp.async path on sm_90a (TMA needs PTX 8.3).
build/bin/sage-translate examples/int8_matmul.mlir --arch=sm_90a --ptx-version=80 \
  -o "$out/int8_matmul.sm_90a.ptx80.ptx"
build/bin/sage-translate examples/sagebwd_forward.mlir --arch=sm_90a \
  -o "$out/sagebwd_forward.sm_90a.ptx"
strip -o .carry/libsage_compiler.so build/lib/libsage_compiler.so
gzip -9 -f .carry/libsage_compiler.so
ls -l "$out" .carry
