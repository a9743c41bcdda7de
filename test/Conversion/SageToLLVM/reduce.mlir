// Reductions: in-thread, butterfly shuffles over the lanes of the reduced
// dimension, then across warps through shared memory.
// RUN: sage-opt %s --sagegpu-assign-layouts --sagegpu-allocate-shared-memory --sagegpu-insert-barriers --convert-sage-to-llvm --canonicalize --cse | FileCheck %s

// The scratch buffer is declared once, as dynamic shared memory.
// CHECK: llvm.mlir.global external @sage_scratch() {addr_space = 3 : i32, alignment = 128 : i64} : !llvm.array<0 x i8>
module attributes {sage.num_warps = 4 : i32} {
// Along dimension 1 (8 lanes apart by 1, one warp): three shuffle rounds,
// no shared memory.
// CHECK-LABEL: func.func @rows
// CHECK-NOT: sage.shared_memory
// CHECK: arith.maximumf
// CHECK: nvvm.shfl.sync  bfly %{{.*}}, %{{.*}}, %c1_i32, %c31_i32 : f32 -> f32
// CHECK: nvvm.shfl.sync  bfly %{{.*}}, %{{.*}}, %c2_i32, %c31_i32 : f32 -> f32
// CHECK: nvvm.shfl.sync  bfly %{{.*}}, %{{.*}}, %c4_i32, %c31_i32 : f32 -> f32
// CHECK-NOT: nvvm.barrier0
// CHECK: return
func.func @rows(%x: tensor<16x32xf32>) -> tensor<16x1xf32> {
  %r = sage.reduce max %x axis 1 : tensor<16x32xf32> -> tensor<16x1xf32>
  return %r : tensor<16x1xf32>
}

// Along dimension 0 (4 lanes, stride 8, and 4 warps): two shuffle rounds,
// then a shared-memory exchange of 4 warps x 32 floats.
// CHECK-LABEL: func.func @columns
// CHECK-SAME: sage.shared_memory = 512 : i64
// CHECK: math.absf
// CHECK: nvvm.shfl.sync  bfly %{{.*}}, %{{.*}}, %c8_i32
// CHECK: nvvm.shfl.sync  bfly %{{.*}}, %{{.*}}, %c16_i32
// CHECK: llvm.store %{{.*}}, %{{.*}} : f32, !llvm.ptr<3>
// CHECK: nvvm.barrier0
// CHECK: llvm.load %{{.*}} : !llvm.ptr<3> -> f32
// CHECK-NOT: nvvm.barrier0
// CHECK: return
func.func @columns(%x: tensor<16x32xf32>) -> tensor<1x32xf32> {
  %r = sage.reduce absmax %x axis 0 : tensor<16x32xf32> -> tensor<1x32xf32>
  return %r : tensor<1x32xf32>
}

// A dimension held whole by every thread needs no communication.
// CHECK-LABEL: func.func @pairs
// CHECK-NOT: nvvm.shfl.sync
// CHECK: arith.addf
// CHECK: return
func.func @pairs(%x: tensor<16x2xf32>) -> tensor<16x1xf32> {
  %r = sage.reduce sum %x axis 1 : tensor<16x2xf32> -> tensor<16x1xf32>
  return %r : tensor<16x1xf32>
}

// The slots a thread holds are combined pairwise (a tree of log2(n)
// dependent adds, not a chain of n - 1): slots 0+1, 2+3, ..., then the
// pairs' sums, never the running sum plus the next slot.
// CHECK-LABEL: func.func @tree
// CHECK: %[[A:.*]] = arith.addf %arg0, %arg1 : f32
// CHECK-NEXT: %[[B:.*]] = arith.addf %arg2, %arg3 : f32
// CHECK-NOT: arith.addf %[[A]], %arg
// CHECK: arith.addf %[[A]], %[[B]] : f32
func.func @tree(%x: tensor<1x1024xf32>) -> tensor<1x1xf32> {
  %r = sage.reduce sum %x axis 1 : tensor<1x1024xf32> -> tensor<1x1xf32>
  return %r : tensor<1x1xf32>
}

// f16 is widened to f32 for the shuffles and narrowed at the end.
// CHECK-LABEL: func.func @half
// CHECK: arith.extf %{{.*}} : f16 to f32
// CHECK: arith.truncf %{{.*}} : f32 to f16
func.func @half(%x: tensor<16x32xf16>) -> tensor<16x1xf16> {
  %r = sage.reduce sum %x axis 1 : tensor<16x32xf16> -> tensor<16x1xf16>
  return %r : tensor<16x1xf16>
}
}
