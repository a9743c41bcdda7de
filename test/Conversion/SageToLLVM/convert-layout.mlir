// sagegpu.convert_layout lowers by what the two linear layouts allow:
// register renaming, warp shuffles, or a round trip through shared memory.
// RUN: sage-opt %s --sagegpu-allocate-shared-memory --sagegpu-insert-barriers --convert-sage-to-llvm --canonicalize --cse | FileCheck %s

#blocked = #sagegpu.blocked<size = [1, 4], threads = [4, 8], warps = [4, 1]>
#pairs = #sagegpu.blocked<size = [2, 2], threads = [8, 4], warps = [4, 1]>
#mma = #sagegpu.mma<mma_sync, warps = [4, 1]>
#wgmma = #sagegpu.mma<wgmma, warps = [4, 1], n = 64>
#a8 = #sagegpu.dot_op<0, parent = #wgmma, bits = 8>
#a8s = #sagegpu.dot_op<0, parent = #wgmma, bits = 8, sigma16 = true>

module attributes {sage.num_warps = 4 : i32} {
// The mma.sync and wgmma accumulators of a 64x64 tile on 4 warps hold the
// same elements in the same slots: nothing moves, nothing needs scratch.
// CHECK-LABEL: func.func @in_thread
// CHECK-NOT: sage.shared_memory
// CHECK-NOT: nvvm.shfl
// CHECK-NOT: llvm.store
// CHECK: return
func.func @in_thread(%a: tensor<64x64xf32, #mma>) -> tensor<64x64xf32, #wgmma> {
  %0 = sagegpu.convert_layout %a : tensor<64x64xf32, #mma> -> tensor<64x64xf32, #wgmma>
  return %0 : tensor<64x64xf32, #wgmma>
}

// Each warp holds the same 16 rows in both, spread differently over its
// lanes: shuffles within the warp, no shared memory.
// CHECK-LABEL: func.func @shuffle
// CHECK-NOT: sage.shared_memory
// CHECK-NOT: llvm.store
// CHECK: nvvm.shfl.sync idx
// CHECK-NOT: llvm.store
// CHECK: return
func.func @shuffle(%a: tensor<64x32xf32, #mma>) -> tensor<64x32xf32, #pairs> {
  %0 = sagegpu.convert_layout %a : tensor<64x32xf32, #mma> -> tensor<64x32xf32, #pairs>
  return %0 : tensor<64x32xf32, #pairs>
}

// Rows move between warps: shared memory, a barrier between the writes and
// the reads, the scratch recorded for the launcher (64 rows x (64 x 4 + 4)
// bytes).
// CHECK-LABEL: func.func @shared
// CHECK-SAME: sage.shared_memory = 16640
// CHECK-NOT: nvvm.barrier0
// CHECK: llvm.store %{{.*}}, %{{.*}} : f32, !llvm.ptr<3>
// CHECK: nvvm.barrier0
// CHECK: llvm.load %{{.*}} : !llvm.ptr<3> -> i32
func.func @shared(%a: tensor<64x64xf32, #mma>) -> tensor<64x64xf32, #blocked> {
  %0 = sagegpu.convert_layout %a : tensor<64x64xf32, #mma> -> tensor<64x64xf32, #blocked>
  return %0 : tensor<64x64xf32, #blocked>
}

// An INT8 P quantized in the wgmma accumulator's registers is the register A
// operand of the PV wgmma when V's tokens are stored sigma16-permuted: the
// conversion renames registers and moves nothing...
// CHECK-LABEL: func.func @p_to_a_sigma16
// CHECK-NOT: sage.shared_memory
// CHECK-NOT: nvvm.shfl
// CHECK-NOT: llvm.store
// CHECK: return
func.func @p_to_a_sigma16(%p: tensor<64x64xi8, #wgmma>) -> tensor<64x64xi8, #a8s> {
  %0 = sagegpu.convert_layout %p : tensor<64x64xi8, #wgmma> -> tensor<64x64xi8, #a8s>
  return %0 : tensor<64x64xi8, #a8s>
}

// ...while with V in token order each byte comes from a quad neighbour:
// warp shuffles (two rounds per slot, the source slot depending on the
// reader's lane bit 1), still no shared memory.
// CHECK-LABEL: func.func @p_to_a
// CHECK-NOT: sage.shared_memory
// CHECK-NOT: llvm.store
// CHECK: nvvm.shfl.sync idx
// CHECK: arith.select
// CHECK: return
func.func @p_to_a(%p: tensor<64x64xi8, #wgmma>) -> tensor<64x64xi8, #a8> {
  %0 = sagegpu.convert_layout %p : tensor<64x64xi8, #wgmma> -> tensor<64x64xi8, #a8>
  return %0 : tensor<64x64xi8, #a8>
}
}
