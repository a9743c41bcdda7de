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

// Grouped (groups 4: columns agreeing on bit 2 form a group): the slots a
// thread holds combine, and only the lanes that spread the reduced column
// bits 3 and 4 shuffle (lane bit 0 spreads the kept bit 2: no offset 1).
// The grouped broadcast back reads the thread's own partial.
// CHECK-LABEL: func.func @groups
// CHECK-SAME: (%[[X0:[^:]*]]: f32, %{{[^:]*}}: f32, %{{[^:]*}}: f32, %[[X3:[^:]*]]: f32)
// CHECK-NOT: nvvm.shfl.sync  bfly %{{.*}}, %{{.*}}, %c1_i32
// CHECK: nvvm.shfl.sync  bfly %{{.*}}, %{{.*}}, %c2_i32, %c31_i32 : f32 -> f32
// CHECK: nvvm.shfl.sync  bfly %{{.*}}, %{{.*}}, %c4_i32, %c31_i32 : f32 -> f32
// CHECK: %[[G:.*]] = arith.maximumf
// CHECK-NOT: nvvm.shfl.sync
// CHECK: arith.mulf %[[X0]], %[[G]] : f32
// CHECK: arith.mulf %[[X3]], %[[G]] : f32
func.func @groups(%x: tensor<16x32xf32>) -> tensor<16x32xf32> {
  %r = sage.reduce max %x axis 1 groups 4 : tensor<16x32xf32> -> tensor<16x2xf32>
  %b = sage.broadcast %r groups 4 : tensor<16x2xf32> -> tensor<16x32xf32>
  %m = arith.mulf %x, %b : tensor<16x32xf32>
  return %m : tensor<16x32xf32>
}

// Grouped along rows (groups 6 keeps row bits 1 and 2): registers combine
// rows 16 and 32 apart, lanes 8 apart (row bit 0), and warp bit 1 (row bit
// 3) through shared memory, indexed by the result's row-major position
// (warp ids up to 2 x 128 floats); lane bit 4 and warp bit 0 hold kept bits.
// CHECK-LABEL: func.func @row_groups
// CHECK-SAME: sage.shared_memory = 1536 : i64
// CHECK-NOT: nvvm.shfl.sync  bfly %{{.*}}, %{{.*}}, %c16_i32
// CHECK: nvvm.shfl.sync  bfly %{{.*}}, %{{.*}}, %c8_i32
// CHECK: llvm.store %{{.*}}, %{{.*}} : f32, !llvm.ptr<3>
// CHECK: nvvm.barrier0
// CHECK: llvm.load %{{.*}} : !llvm.ptr<3> -> f32
// CHECK: return
func.func @row_groups(%x: tensor<64x32xf32>) -> tensor<4x32xf32> {
  %r = sage.reduce sum %x axis 0 groups 6 : tensor<64x32xf32> -> tensor<4x32xf32>
  return %r : tensor<4x32xf32>
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

// Integers combine three at a time, as (a max b) max c with the inner value
// used once (ptxas fuses it into VIMNMX3): slots 0-2, 3-5, ..., then those
// results three at a time; never two pairs' maxima combined.
// CHECK-LABEL: func.func @ternary_tree
// CHECK: %[[A:.*]] = arith.maxsi %arg0, %arg1 : i32
// CHECK-NEXT: %[[B:.*]] = arith.maxsi %[[A]], %arg2 : i32
// CHECK-NEXT: %[[C:.*]] = arith.maxsi %arg3, %arg4 : i32
// CHECK-NEXT: %[[D:.*]] = arith.maxsi %[[C]], %arg5 : i32
// CHECK: %[[E:.*]] = arith.maxsi %[[B]], %[[D]] : i32
// CHECK-NEXT: arith.maxsi %[[E]], %{{.*}} : i32
func.func @ternary_tree(%x: tensor<1x1024xi32>) -> tensor<1x1xi32> {
  %r = sage.reduce max %x axis 1 : tensor<1x1024xi32> -> tensor<1x1xi32>
  return %r : tensor<1x1xi32>
}

// f16 is widened to f32 for the shuffles and narrowed at the end.
// CHECK-LABEL: func.func @half
// CHECK: arith.extf %{{.*}} : f16 to f32
// CHECK: arith.truncf %{{.*}} : f32 to f16
func.func @half(%x: tensor<16x32xf16>) -> tensor<16x1xf16> {
  %r = sage.reduce sum %x axis 1 : tensor<16x32xf16> -> tensor<16x1xf16>
  return %r : tensor<16x1xf16>
}

// A sum of bytes widened to i32 takes four at a time: the slots packed into
// words in slot order, each summed by dp4a against 0x01010101 in one of two
// chains. Unsigned bytes (extui) are read unsigned, signed (extsi) signed.
// CHECK-LABEL: func.func @bytes
// CHECK-NOT: arith.extui
// CHECK: %[[ONES:.*]] = llvm.mlir.constant(dense<1> : vector<4xi8>) : vector<4xi8>
// CHECK: %[[W0:.*]] = llvm.insertelement %{{.*}}, %{{.*}}[%c3_i32 : i32] : vector<4xi8>
// CHECK: %[[C0:.*]] = nvvm.dot.accumulate.4way %[[W0]] <unsigned>, %[[ONES]] <unsigned>, %c0_i32 : vector<4xi8>, vector<4xi8>
// CHECK: %[[W1:.*]] = llvm.insertelement %{{.*}}, %{{.*}}[%c3_i32 : i32] : vector<4xi8>
// CHECK: %[[C1:.*]] = nvvm.dot.accumulate.4way %[[W1]] <unsigned>, %[[ONES]] <unsigned>, %c0_i32
// CHECK: nvvm.dot.accumulate.4way %{{.*}} <unsigned>, %[[ONES]] <unsigned>, %[[C0]]
// CHECK: nvvm.dot.accumulate.4way %{{.*}} <unsigned>, %[[ONES]] <unsigned>, %[[C1]]
// CHECK: arith.addi
// CHECK: nvvm.shfl.sync
// CHECK: return
func.func @bytes(%x: tensor<16x256xi8>) -> tensor<16x1xi32> {
  %w = arith.extui %x : tensor<16x256xi8> to tensor<16x256xi32>
  %r = sage.reduce sum %w axis 1 : tensor<16x256xi32> -> tensor<16x1xi32>
  return %r : tensor<16x1xi32>
}

// CHECK-LABEL: func.func @signed_bytes
// CHECK: nvvm.dot.accumulate.4way %{{.*}} <signed>, %{{.*}} <unsigned>
func.func @signed_bytes(%x: tensor<16x256xi8>) -> tensor<16x1xi32> {
  %w = arith.extsi %x : tensor<16x256xi8> to tensor<16x256xi32>
  %r = sage.reduce sum %w axis 1 : tensor<16x256xi32> -> tensor<16x1xi32>
  return %r : tensor<16x1xi32>
}

// Too few slots a thread for a word each chain (or a max): widened and added.
// CHECK-LABEL: func.func @few_bytes
// CHECK-NOT: nvvm.dot.accumulate.4way
// CHECK: arith.addi
// CHECK: return
func.func @few_bytes(%x: tensor<16x32xi8>) -> tensor<16x1xi32> {
  %w = arith.extui %x : tensor<16x32xi8> to tensor<16x32xi32>
  %r = sage.reduce sum %w axis 1 : tensor<16x32xi32> -> tensor<16x1xi32>
  return %r : tensor<16x1xi32>
}
}
