// Shapes that do not tile into mma.sync blocks are reported, not miscompiled.
// RUN: sage-opt %s --sage-select-mma --sagegpu-assign-layouts --convert-sage-to-llvm --split-input-file -verify-diagnostics

module attributes {sage.num_warps = 4 : i32} {
func.func @small(%a: tensor<8x32xi8>, %s: tensor<1x1xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{mma_sync lowering needs M a multiple of 16, N of 32 and K of 32, got 8x8x32}}
  %r = sage.qmatmul %a[%s], %a[%s] contract(1, 1) : tensor<8x32xi8>, tensor<1x1xf32>, tensor<8x32xi8>, tensor<1x1xf32> -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}
}

// -----

// TMA writes the chunk-major layout only wgmma's shared-memory operands
// read: not mma.sync's, nor A of wgmma_reg_a (padded rows for fragments).
module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
func.func @wrong_mma(%a: !sage.ptr<i8>, %n: i64, %s: tensor<1x1xf32>,
                     %scratch: !sage.ptr<i8>) -> tensor<64x64xf32>
    attributes {sage.global_scratch = 128 : i64} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %ma = sage.make_tensor_map %a strides [%n, %c1] bounds [%n, %n] box [64, 128] inner 1 scratch %scratch[0] : !sage.ptr<i8>, !sage.ptr<i8>
  %at = sage.load %a[%c0, %c0] strides [%n, %c1] bounds [%n, %n] via tma map %ma : !sage.ptr<i8> -> tensor<64x128xi8>
  // expected-error @+1 {{copies an operand with TMA, which writes the layout only wgmma's shared-memory operands read}}
  %p = sage.qmatmul %at[%s], %at[%s] contract(1, 1) using mma_sync : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  return %p : tensor<64x64xf32>
}
}

// -----

module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
func.func @reg_a(%a: !sage.ptr<i8>, %n: i64, %s: tensor<1x1xf32>,
                     %scratch: !sage.ptr<i8>) -> tensor<64x64xf32>
    attributes {sage.global_scratch = 128 : i64} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %ma = sage.make_tensor_map %a strides [%n, %c1] bounds [%n, %n] box [64, 128] inner 1 scratch %scratch[0] : !sage.ptr<i8>, !sage.ptr<i8>
  %at = sage.load %a[%c0, %c0] strides [%n, %c1] bounds [%n, %n] via tma map %ma : !sage.ptr<i8> -> tensor<64x128xi8>
  // expected-error @+1 {{copies an operand with TMA, which writes the layout only wgmma's shared-memory operands read}}
  %p = sage.qmatmul %at[%s], %at[%s] contract(1, 1) using wgmma_reg_a : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  return %p : tensor<64x64xf32>
}
}
