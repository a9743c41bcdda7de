// The lowering reads layouts and refuses tiles whose encodings break the
// contract sagegpu-assign-layouts establishes, with a diagnostic.
// RUN: sage-opt %s --sagegpu-allocate-shared-memory --sagegpu-insert-barriers --convert-sage-to-llvm --split-input-file -verify-diagnostics

#shared = #sagegpu.shared<swizzle = 0, bits = 8>
#split = #sagegpu.mma<mma_sync, warps = [2, 2]>
module attributes {sage.num_warps = 4 : i32} {
func.func @not_the_accumulator(%a: !sagegpu.smem<64x64xi8, #shared>, %z: tensor<64x64xi32, #split>) -> tensor<64x64xi32, #split> {
  // expected-error @+1 {{result encoding #sagegpu.mma<mma_sync, warps = [2, 2]> is not the accumulator of mma_sync, #sagegpu.mma<mma_sync, warps = [4, 1]>}}
  %r = sagegpu.dot %a, %a, %z contract(1, 1) : !sagegpu.smem<64x64xi8, #shared>, !sagegpu.smem<64x64xi8, #shared> -> tensor<64x64xi32, #split>
  return %r : tensor<64x64xi32, #split>
}
}

// -----

#blocked = #sagegpu.blocked<size = [1, 4], threads = [4, 8], warps = [4, 1]>
#other = #sagegpu.blocked<size = [1, 1], threads = [1, 32], warps = [4, 1]>
module attributes {sage.num_warps = 4 : i32} {
func.func @reduce_not_a_slice(%x: tensor<64x32xf32, #blocked>) -> tensor<64x1xf32, #other> {
  // expected-error @+2 {{result layout is not the slice of the input's along the reduced axis}}
  // expected-error @+1 {{failed to legalize operation 'sage.reduce'}}
  %m = sage.reduce max %x axis 1 : tensor<64x32xf32, #blocked> -> tensor<64x1xf32, #other>
  return %m : tensor<64x1xf32, #other>
}
}
