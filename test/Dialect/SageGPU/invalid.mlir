// Every sagegpu verifier diagnostic.
// RUN: sage-opt %s --split-input-file --verify-diagnostics

// expected-error @+1 {{blocked layout entries must be powers of two, got 3}}
func.func @f(%a: tensor<64x64xf32, #sagegpu.blocked<size = [1, 3], threads = [4, 8], warps = [4, 1]>>) { return }

// -----

// expected-error @+1 {{threads per warp must multiply to 32, got 16}}
func.func @f(%a: tensor<64x64xf32, #sagegpu.blocked<size = [1, 4], threads = [4, 4], warps = [4, 1]>>) { return }

// -----

// expected-error @+1 {{blocked layout needs two entries per list}}
func.func @f(%a: tensor<64x64xf32, #sagegpu.blocked<size = [1], threads = [4, 8], warps = [4, 1]>>) { return }

// -----

// expected-error @+1 {{slice dimension must be 0 or 1, got 2}}
func.func @f(%a: tensor<64x1xf32, #sagegpu.slice<dim = 2, parent = #sagegpu.mma<mma_sync, warps = [4, 1]>>>) { return }

// -----

// expected-error @+1 {{mma encoding warp counts must be powers of two, got 3}}
func.func @f(%a: tensor<64x64xf32, #sagegpu.mma<mma_sync, warps = [3, 1]>>) { return }

// -----

// expected-error @+1 {{mma_sync accumulators take no instruction N}}
func.func @f(%a: tensor<64x64xf32, #sagegpu.mma<mma_sync, warps = [4, 1], n = 64>>) { return }

// -----

// expected-error @+1 {{wgmma accumulators need warps = [4k, 1], got [2, 2]}}
func.func @f(%a: tensor<64x64xf32, #sagegpu.mma<wgmma, warps = [2, 2], n = 64>>) { return }

// -----

// expected-error @+1 {{wgmma instruction N must be a power of two from 8 to 256, got 0}}
func.func @f(%a: tensor<64x64xf32, #sagegpu.mma<wgmma, warps = [4, 1]>>) { return }

// -----

// expected-error @+1 {{the accumulator of wgmma_reg_a is #sagegpu.mma<wgmma, ...>}}
func.func @f(%a: tensor<64x64xf32, #sagegpu.mma<wgmma_reg_a, warps = [4, 1], n = 64>>) { return }

// -----

func.func @f(%a: tensor<64x64xf32>) {
  // expected-error @+1 {{converts rank-2 tiles with distributed encodings, not 'tensor<64x64xf32>'}}
  %0 = sagegpu.convert_layout %a : tensor<64x64xf32> -> tensor<64x64xf32, #sagegpu.mma<mma_sync, warps = [4, 1]>>
  return
}

// -----

func.func @f(%a: tensor<64x64xf32, #sagegpu.mma<mma_sync, warps = [4, 1]>>) {
  // expected-error @+1 {{requires the same shape for all operands and results}}
  %0 = sagegpu.convert_layout %a : tensor<64x64xf32, #sagegpu.mma<mma_sync, warps = [4, 1]>> -> tensor<64x32xf32, #sagegpu.mma<mma_sync, warps = [4, 1]>>
  return
}

// -----

// expected-error @+1 {{a slice along dimension 1 describes tiles of extent 1 there, got 64}}
func.func @f(%a: tensor<64x64xf32, #sagegpu.slice<dim = 1, parent = #sagegpu.mma<mma_sync, warps = [4, 1]>>>) { return }

// -----

// expected-error @+1 {{tiles with a layout encoding need power-of-two extents, got 48}}
func.func @f(%a: tensor<48x64xf32, #sagegpu.mma<mma_sync, warps = [4, 1]>>) { return }

// -----

// expected-error @+1 {{dot operand index must be 0 (A) or 1 (B), got 2}}
func.func @f(%a: tensor<64x64xi8, #sagegpu.dot_op<2, parent = #sagegpu.mma<mma_sync, warps = [4, 1]>, bits = 8>>) { return }

// -----

// expected-error @+1 {{dot operands hold 8- or 16-bit elements, got 32}}
func.func @f(%a: tensor<64x64xf32, #sagegpu.dot_op<0, parent = #sagegpu.mma<mma_sync, warps = [4, 1]>, bits = 32>>) { return }

// -----

// expected-error @+1 {{wgmma reads its B operand from shared memory, not registers}}
func.func @f(%a: tensor<64x64xi8, #sagegpu.dot_op<1, parent = #sagegpu.mma<wgmma, warps = [4, 1], n = 64>, bits = 8>>) { return }

// -----

// expected-error @+1 {{sigma16 permutes the contraction of 8-bit A operands only}}
func.func @f(%a: tensor<64x64xf16, #sagegpu.dot_op<0, parent = #sagegpu.mma<mma_sync, warps = [4, 1]>, bits = 16, sigma16 = true>>) { return }

// -----

// expected-error @+1 {{a 8-bit dot operand holds 8-bit elements, not 'f16'}}
func.func @f(%a: tensor<64x64xf16, #sagegpu.dot_op<0, parent = #sagegpu.mma<mma_sync, warps = [4, 1]>, bits = 8>>) { return }

// -----

// expected-error @+1 {{shared swizzle must be 0, 32, 64 or 128 bytes, got 16}}
func.func @f(%a: tensor<64x64xi8, #sagegpu.shared<swizzle = 16, bits = 8>>) { return }

// -----

// expected-error @+1 {{shared tiles hold 8-, 16- or 32-bit elements, got 4}}
func.func @f(%a: tensor<64x64xi8, #sagegpu.shared<swizzle = 0, bits = 4>>) { return }

// -----

// expected-error @+1 {{the contiguous dimension must be 0 or 1, got 2}}
func.func @f(%a: tensor<64x64xi8, #sagegpu.shared<swizzle = 0, bits = 8, inner = 2>>) { return }

// -----

// expected-error @+1 {{a 16-bit shared layout holds 16-bit elements, not 'i8'}}
func.func @f(%a: tensor<64x64xi8, #sagegpu.shared<swizzle = 0, bits = 16>>) { return }

// -----

// expected-error @+1 {{the inner dimension must span whole swizzle widths}}
func.func @f(%a: tensor<64x32xi8, #sagegpu.shared<swizzle = 128, bits = 8>>) { return }
