// An unsigned lhs on wgmma (u8 x s8) needs PTX ISA 8.4, the default; asked
// for 8.3, sagegpu-promote-operands refuses it (mma.sync takes it at any
// version).
// RUN: sage-opt %s --sage-select-mma --sagegpu-assign-layouts --sagegpu-promote-operands='ptx-version=83' -verify-diagnostics

module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
func.func @unsigned_wgmma(%p: tensor<64x64xi8>, %sp: tensor<64x1xf32>, %v: tensor<64x64xi8>, %sv: tensor<1x1xf32>) -> tensor<64x64xf32> {
  // expected-error @+1 {{with lhs_unsigned on wgmma needs PTX ISA version 8.4 or later (ptx-version=83)}}
  %o = sage.qmatmul %p[%sp], %v[%sv] contract(1, 1) lhs_unsigned using wgmma : tensor<64x64xi8>, tensor<64x1xf32>, tensor<64x64xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  return %o : tensor<64x64xf32>
}
}
