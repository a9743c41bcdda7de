// sagegpu-promote-operands needs each matmul's instruction and accumulator
// encoding.
// RUN: sage-opt %s --sagegpu-promote-operands --split-input-file -verify-diagnostics

module attributes {sage.num_warps = 4 : i32} {
func.func @no_encoding(%a: tensor<64x64xi8>, %s: tensor<1x1xf32>) -> tensor<64x64xf32> {
  // expected-error @+1 {{needs its instruction (sage-select-mma) and its accumulator encoding (sagegpu-assign-layouts)}}
  %r = sage.qmatmul %a[%s], %a[%s] contract(1, 1) using mma_sync : tensor<64x64xi8>, tensor<1x1xf32>, tensor<64x64xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  return %r : tensor<64x64xf32>
}
}

// -----

#blocked = #sagegpu.blocked<size = [1, 4], threads = [4, 8], warps = [4, 1]>
module attributes {sage.num_warps = 4 : i32} {
func.func @no_instruction(%a: tensor<64x64xi8, #blocked>, %s: tensor<1x1xf32, #blocked>) -> tensor<64x64xf32, #blocked> {
  // expected-error @+1 {{needs its instruction (sage-select-mma)}}
  %r = sage.qmatmul %a[%s], %a[%s] contract(1, 1) : tensor<64x64xi8, #blocked>, tensor<1x1xf32, #blocked>, tensor<64x64xi8, #blocked>, tensor<1x1xf32, #blocked> -> tensor<64x64xf32, #blocked>
  return %r : tensor<64x64xf32, #blocked>
}
}

