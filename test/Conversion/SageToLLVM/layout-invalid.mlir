// The lowering reads layouts and refuses tiles whose encodings break the
// contract sagegpu-assign-layouts establishes, with a diagnostic.
// RUN: sage-opt %s --convert-sage-to-llvm --split-input-file -verify-diagnostics

#blocked = #sagegpu.blocked<size = [1, 4], threads = [4, 8], warps = [4, 1]>
module attributes {sage.num_warps = 4 : i32} {
func.func @not_the_accumulator(%a: tensor<64x64xi8, #blocked>, %s: tensor<1x1xf32, #blocked>) -> tensor<64x64xf32, #blocked> {
  // expected-error @+1 {{result encoding #sagegpu.blocked<size = [1, 4], threads = [4, 8], warps = [4, 1]> is not the accumulator of mma_sync, #sagegpu.mma<mma_sync, warps = [4, 1]>}}
  %r = sage.qmatmul %a[%s], %a[%s] contract(1, 1) using mma_sync : tensor<64x64xi8, #blocked>, tensor<1x1xf32, #blocked>, tensor<64x64xi8, #blocked>, tensor<1x1xf32, #blocked> -> tensor<64x64xf32, #blocked>
  return %r : tensor<64x64xf32, #blocked>
}
}

// -----

module attributes {sage.num_warps = 4 : i32} {
func.func @no_encoding(%a: tensor<64x64xi8>, %s: tensor<1x1xf32>) -> tensor<64x64xf32> {
  // expected-error @+1 {{needs its accumulator encoding (run sagegpu-assign-layouts)}}
  %r = sage.qmatmul %a[%s], %a[%s] contract(1, 1) using mma_sync : tensor<64x64xi8>, tensor<1x1xf32>, tensor<64x64xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  return %r : tensor<64x64xf32>
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
