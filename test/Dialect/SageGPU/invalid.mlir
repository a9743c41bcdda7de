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
