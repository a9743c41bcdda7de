// The named pipeline in sage-opt and the compiler library (sage-translate)
// run the same passes: their PTX is identical.
// RUN: sage-translate %S/../../examples/quant_matmul.mlir --arch=sm_90a -o %t.library.ptx
// RUN: sage-opt %S/../../examples/quant_matmul.mlir --sage-to-nvvm='arch=sm_90a' | sage-translate --no-pipeline --arch=sm_90a -o %t.replayed.ptx
// RUN: diff %t.library.ptx %t.replayed.ptx
// The same with TMA copies (device-built tensor maps, global scratch), and
// with the PTX version that keeps them on cp.async.
// RUN: sage-translate %S/../../examples/int8_matmul.mlir --arch=sm_90a -o %t.tma.library.ptx
// RUN: sage-opt %S/../../examples/int8_matmul.mlir --sage-to-nvvm='arch=sm_90a ptx-version=83' | sage-translate --no-pipeline --arch=sm_90a -o %t.tma.replayed.ptx
// RUN: diff %t.tma.library.ptx %t.tma.replayed.ptx
// RUN: grep -q cp.async.bulk.tensor %t.tma.library.ptx
// RUN: sage-translate %S/../../examples/int8_matmul.mlir --arch=sm_90a --ptx-version=80 -o %t.ca.library.ptx
// RUN: sage-opt %S/../../examples/int8_matmul.mlir --sage-to-nvvm='arch=sm_90a ptx-version=80' | sage-translate --no-pipeline --arch=sm_90a --ptx-version=80 -o %t.ca.replayed.ptx
// RUN: diff %t.ca.library.ptx %t.ca.replayed.ptx
// RUN: grep -q cp.async.cg %t.ca.library.ptx
// RUN: sage-opt %S/../../examples/sagebwd_forward.mlir --sage-to-nvvm='arch=sm_80' | FileCheck %s

// CHECK: module attributes {sage.num_warps = 8 : i32, sage.target = "sm_80"}
// CHECK: llvm.mlir.global external @sage_scratch()
// CHECK: llvm.func @sagebwd_forward(%{{.*}}: !llvm.ptr<1>
// CHECK-SAME: nvvm.kernel
// CHECK-SAME: nvvm.maxntid = array<i32: 256, 1, 1>
// CHECK-SAME: sage.kernel
// CHECK-SAME: sage.shared_memory =
// CHECK: nvvm.mma.sync
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
// CHECK: llvm.call_intrinsic "llvm.nvvm.lg2.approx.f"
// CHECK-NOT: sage.
