// sagegpu.convert_layout lowers by what the two linear layouts allow:
// register renaming, warp shuffles, or a round trip through shared memory.
// RUN: sage-opt %s --convert-sage-to-llvm --canonicalize --cse | FileCheck %s

#blocked = #sagegpu.blocked<size = [1, 4], threads = [4, 8], warps = [4, 1]>
#pairs = #sagegpu.blocked<size = [2, 2], threads = [8, 4], warps = [4, 1]>
#mma = #sagegpu.mma<mma_sync, warps = [4, 1]>
#wgmma = #sagegpu.mma<wgmma, warps = [4, 1], n = 64>

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

// Rows move between warps: shared memory, bracketed by barriers, with the
// scratch recorded for the launcher (64 rows x (64 x 4 + 4) bytes).
// CHECK-LABEL: func.func @shared
// CHECK-SAME: sage.shared_memory = 16640
// CHECK: nvvm.barrier0
// CHECK: llvm.store %{{.*}}, %{{.*}} : f32, !llvm.ptr<3>
// CHECK: nvvm.barrier0
// CHECK: llvm.load %{{.*}} : !llvm.ptr<3> -> i32
func.func @shared(%a: tensor<64x64xf32, #mma>) -> tensor<64x64xf32, #blocked> {
  %0 = sagegpu.convert_layout %a : tensor<64x64xf32, #mma> -> tensor<64x64xf32, #blocked>
  return %0 : tensor<64x64xf32, #blocked>
}
}
