// Shapes that do not tile into mma.sync blocks are reported, not miscompiled.
// RUN: sage-opt %s --sage-select-mma --sagegpu-assign-layouts --sagegpu-promote-operands --sagegpu-allocate-shared-memory --sagegpu-insert-barriers --convert-sage-to-llvm --split-input-file -verify-diagnostics

module attributes {sage.num_warps = 4 : i32} {
func.func @small(%a: tensor<8x32xi8>, %s: tensor<1x1xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{mma_sync lowering needs M a multiple of 16, N of 32 and K of 32, got 8x8x32}}
  %r = sage.qmatmul %a[%s], %a[%s] contract(1, 1) : tensor<8x32xi8>, tensor<1x1xf32>, tensor<8x32xi8>, tensor<1x1xf32> -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}
}
