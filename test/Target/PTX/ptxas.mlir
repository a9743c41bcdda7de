// ptxas accepts the PTX of every example for sm_90a and sm_80, with no
// spills.
// REQUIRES: ptxas
// RUN: sage-translate %S/../../../examples/quant_matmul.mlir --arch=sm_90a -o %t.sm90.ptx
// RUN: %ptxas -arch=sm_90a -v %t.sm90.ptx -o %t.sm90.cubin 2>&1 | FileCheck %s
// RUN: sage-translate %S/../../../examples/quant_matmul.mlir --arch=sm_80 -o %t.sm80.ptx
// RUN: %ptxas -arch=sm_80 -v %t.sm80.ptx -o %t.sm80.cubin 2>&1 | FileCheck %s
// RUN: sage-translate %S/../../../examples/sagebwd_forward.mlir --arch=sm_90a -o %t.fwd.ptx
// RUN: %ptxas -arch=sm_90a -v %t.fwd.ptx -o %t.fwd.cubin 2>&1 | FileCheck %s

// CHECK-NOT: error
// CHECK: 0 bytes spill stores, 0 bytes spill loads

// Operands copied with cp.async (examples/int8_matmul.mlir) on both paths.
// RUN: sage-translate %S/../../../examples/int8_matmul.mlir --arch=sm_90a -o %t.i8.sm90.ptx
// RUN: FileCheck %s --check-prefix=ASYNC90 --input-file=%t.i8.sm90.ptx
// RUN: %ptxas -arch=sm_90a -v %t.i8.sm90.ptx -o %t.i8.sm90.cubin 2>&1 | FileCheck %s
// RUN: sage-translate %S/../../../examples/int8_matmul.mlir --arch=sm_80 -o %t.i8.sm80.ptx
// RUN: FileCheck %s --check-prefix=ASYNC80 --input-file=%t.i8.sm80.ptx
// RUN: %ptxas -arch=sm_80 -v %t.i8.sm80.ptx -o %t.i8.sm80.cubin 2>&1 | FileCheck %s
// ASYNC90: cp.async.cg.shared.global
// ASYNC90: cp.async.commit_group
// ASYNC90: cp.async.wait_group 0
// ASYNC90: wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8
// ASYNC80: cp.async.cg.shared.global
// ASYNC80: cp.async.wait_group 0
// ASYNC80: mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32
