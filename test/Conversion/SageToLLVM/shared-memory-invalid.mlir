// The lowering needs what sagegpu-allocate-shared-memory places, and wgmma
// descriptors only describe the unswizzled K-major layout: both are
// reported, not miscompiled.
// RUN: sage-opt %s --convert-sage-to-llvm --split-input-file -verify-diagnostics

#blocked = #sagegpu.blocked<size = [1, 4], threads = [4, 8], warps = [4, 1]>
#shared = #sagegpu.shared<swizzle = 0, bits = 8>
module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
func.func @unplaced(%t: tensor<64x64xi8, #blocked>) {
  // expected-error @+2 {{has no offset (run sagegpu-allocate-shared-memory)}}
  // expected-error @+1 {{failed to legalize operation 'sagegpu.local_alloc'}}
  %s = sagegpu.local_alloc %t : tensor<64x64xi8, #blocked> -> !sagegpu.smem<64x64xi8, #shared>
  return
}
}

// -----

#blocked = #sagegpu.blocked<size = [1, 4], threads = [4, 8], warps = [4, 1]>
#mma = #sagegpu.mma<mma_sync, warps = [4, 1]>
module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
func.func @no_scratch(%a: tensor<64x64xf32, #mma>) -> tensor<64x64xf32, #blocked> {
  // expected-error @+1 {{needs shared scratch but has no offset (run sagegpu-allocate-shared-memory)}}
  %0 = sagegpu.convert_layout %a : tensor<64x64xf32, #mma> -> tensor<64x64xf32, #blocked>
  return %0 : tensor<64x64xf32, #blocked>
}
}

