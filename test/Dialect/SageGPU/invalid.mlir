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

// expected-error @+1 {{a slice along dimension 1 describes tiles of extent 4 there, got 8}}
func.func @f(%a: tensor<64x8xf32, #sagegpu.slice<dim = 1, parent = #sagegpu.mma<mma_sync, warps = [4, 1]>, groups = 6, extent = 64>>) { return }

// -----

// expected-error @+1 {{groups 6 must be bits of the parent's extent along the sliced dimension, a power of two, got extent 6}}
func.func @f(%a: tensor<64x4xf32, #sagegpu.slice<dim = 1, parent = #sagegpu.mma<mma_sync, warps = [4, 1]>, groups = 6, extent = 6>>) { return }

// -----

// expected-error @+1 {{a slice without groups takes no extent}}
func.func @f(%a: tensor<64x1xf32, #sagegpu.slice<dim = 1, parent = #sagegpu.mma<mma_sync, warps = [4, 1]>, groups = 0, extent = 64>>) { return }

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
func.func @f(%a: !sagegpu.smem<64x64xi8, #sagegpu.shared<swizzle = 16, bits = 8>>) { return }

// -----

// expected-error @+1 {{shared tiles hold 8-, 16- or 32-bit elements, got 4}}
func.func @f(%a: !sagegpu.smem<64x64xi8, #sagegpu.shared<swizzle = 0, bits = 4>>) { return }

// -----

// expected-error @+1 {{the contiguous dimension must be 0 or 1, got 2}}
func.func @f(%a: !sagegpu.smem<64x64xi8, #sagegpu.shared<swizzle = 0, bits = 8, inner = 2>>) { return }

// -----

// expected-error @+1 {{a 16-bit shared layout holds 16-bit elements, not 'i8'}}
func.func @f(%a: !sagegpu.smem<64x64xi8, #sagegpu.shared<swizzle = 0, bits = 16>>) { return }

// -----

// expected-error @+1 {{the inner dimension must span whole swizzle widths}}
func.func @f(%a: !sagegpu.smem<64x32xi8, #sagegpu.shared<swizzle = 128, bits = 8>>) { return }

// -----

// TMA lands boxes swizzled: an unswizzled tile cannot be its destination.
func.func @f(%map: !sage.tensor_map, %i: i64, %bar: !sagegpu.smem<1xi64>,
             %a: !sagegpu.smem<64x64xi8, #sagegpu.shared<swizzle = 0, bits = 8>>) {
  // expected-error @+1 {{copies into a swizzled #sagegpu.shared tile, not '!sagegpu.smem<64x64xi8, #sagegpu.shared<swizzle = 0, bits = 8>>'}}
  sagegpu.tma_load %map[%i, %i], %bar into %a : !sagegpu.smem<1xi64>, !sagegpu.smem<64x64xi8, #sagegpu.shared<swizzle = 0, bits = 8>>
  return
}

// -----

// A bulk copy moves contiguous bytes: its tile is unswizzled ...
func.func @f(%p: !sage.ptr<i8>, %i: i64, %bar: !sagegpu.smem<1xi64>,
             %a: !sagegpu.smem<64x128xi8, #sagegpu.shared<swizzle = 128, bits = 8>>) {
  // expected-error @+1 {{copies contiguous elements: its tile must be unswizzled, not '!sagegpu.smem<64x128xi8, #sagegpu.shared<swizzle = 128, bits = 8>>'}}
  sagegpu.bulk_load %p[%i], %bar into %a : !sage.ptr<i8>, !sagegpu.smem<1xi64>, !sagegpu.smem<64x128xi8, #sagegpu.shared<swizzle = 128, bits = 8>>
  return
}

// -----

// ... a row or a column (whole 16-byte pieces: the type sees to that) ...
func.func @f(%p: !sage.ptr<f32>, %i: i64, %bar: !sagegpu.smem<1xi64>,
             %a: !sagegpu.smem<4x16xf32, #sagegpu.shared<swizzle = 0, bits = 32>>) {
  // expected-error @+1 {{copies a row or a column (a 1-D tile or one dimension 1), not '!sagegpu.smem<4x16xf32, #sagegpu.shared<swizzle = 0, bits = 32>>'}}
  sagegpu.bulk_load %p[%i], %bar into %a : !sage.ptr<f32>, !sagegpu.smem<1xi64>, !sagegpu.smem<4x16xf32, #sagegpu.shared<swizzle = 0, bits = 32>>
  return
}

// -----

// ... of the pointer's element type.
func.func @f(%p: !sage.ptr<i8>, %i: i64, %bar: !sagegpu.smem<1xi64>,
             %a: !sagegpu.smem<1x16xf32, #sagegpu.shared<swizzle = 0, bits = 32>>) {
  // expected-error @+1 {{copies 'i8' elements into a tile of 'f32'}}
  sagegpu.bulk_load %p[%i], %bar into %a : !sage.ptr<i8>, !sagegpu.smem<1xi64>, !sagegpu.smem<1x16xf32, #sagegpu.shared<swizzle = 0, bits = 32>>
  return
}

// -----

// The map's box, inner dimension and swizzle are the destination's.
func.func @f(%p: !sage.ptr<i8>, %n: i64, %bar: !sagegpu.smem<1xi64>,
             %a: !sagegpu.smem<64x128xi8, #sagegpu.shared<swizzle = 64, bits = 8>>, %s: !sage.ptr<i8>)
    attributes {sage.global_scratch = 128 : i64} {
  %c1 = arith.constant 1 : i64
  %m = sage.make_tensor_map %p strides [%n, %c1] bounds [%n, %n] box [64, 128] inner 1 swizzle 128 scratch %s[0] : !sage.ptr<i8>, !sage.ptr<i8>
  // expected-error @+1 {{the map's box [64, 128] of 'i8' (inner 1, swizzle 128) does not land as '!sagegpu.smem<64x128xi8, #sagegpu.shared<swizzle = 64, bits = 8>>'}}
  sagegpu.tma_load %m[%n, %n], %bar into %a : !sagegpu.smem<1xi64>, !sagegpu.smem<64x128xi8, #sagegpu.shared<swizzle = 64, bits = 8>>
  return
}

// -----

// A copy names one index per leading dimension of its map.
func.func @f(%p: !sage.ptr<i8>, %n: i64, %bar: !sagegpu.smem<1xi64>,
             %a: !sagegpu.smem<64x128xi8, #sagegpu.shared<swizzle = 128, bits = 8>>, %s: !sage.ptr<i8>)
    attributes {sage.global_scratch = 128 : i64} {
  %c1 = arith.constant 1 : i64
  %m = sage.make_tensor_map %p strides [%n, %n, %c1] bounds [%n, %n, %n] box [64, 128] inner 1 swizzle 128 scratch %s[0] : !sage.ptr<i8>, !sage.ptr<i8>
  // expected-error @+1 {{names 2 leading indices, its map has 1 leading dimensions}}
  sagegpu.tma_load %m[%n, %n] leading [%n, %n], %bar into %a : !sagegpu.smem<1xi64>, !sagegpu.smem<64x128xi8, #sagegpu.shared<swizzle = 128, bits = 8>>
  return
}

// -----

func.func @f(%m: !sage.tensor_map, %n: i64,
             %a: !sagegpu.smem<64x128xi8, #sagegpu.shared<swizzle = 128, bits = 8>>) {
  // expected-error @+1 {{names 4 leading indices, at most 3 (a tensor map has rank 5 at most)}}
  sagegpu.tma_store %a into %m[%n, %n] leading [%n, %n, %n, %n] : !sagegpu.smem<64x128xi8, #sagegpu.shared<swizzle = 128, bits = 8>>
  return
}

// -----

// A bulk reduction adds f32, as sage.store atomic_add.
func.func @f(%m: !sage.tensor_map, %n: i64,
             %a: !sagegpu.smem<64x64xbf16, #sagegpu.shared<swizzle = 128, bits = 16>>) {
  // expected-error @+1 {{adds f32 tiles only (as sage.store atomic_add), not 'bf16'}}
  sagegpu.tma_store add %a into %m[%n, %n] : !sagegpu.smem<64x64xbf16, #sagegpu.shared<swizzle = 128, bits = 16>>
  return
}

// -----

// A bulk reduction adds through a typed map (elements of f32), a plain
// store through a byte map.
func.func @f(%p: !sage.ptr<f32>, %n: i64,
             %a: !sagegpu.smem<64x32xf32, #sagegpu.shared<swizzle = 128, bits = 32>>, %s: !sage.ptr<i8>)
    attributes {sage.global_scratch = 256 : i64} {
  %c1 = arith.constant 1 : i64
  %bytes = sage.make_tensor_map %p strides [%n, %c1] bounds [%n, %n] box [64, 32] inner 1 swizzle 128 scratch %s[0] : !sage.ptr<f32>, !sage.ptr<i8>
  // expected-error @+1 {{adds through a map that counts bytes: a bulk reduction needs a typed map}}
  sagegpu.tma_store add %a into %bytes[%n, %n] : !sagegpu.smem<64x32xf32, #sagegpu.shared<swizzle = 128, bits = 32>>
  return
}

// -----

func.func @f(%p: !sage.ptr<f32>, %n: i64,
             %a: !sagegpu.smem<64x32xf32, #sagegpu.shared<swizzle = 128, bits = 32>>, %s: !sage.ptr<i8>)
    attributes {sage.global_scratch = 256 : i64} {
  %c1 = arith.constant 1 : i64
  %typed = sage.make_tensor_map %p strides [%n, %c1] bounds [%n, %n] box [64, 32] inner 1 swizzle 128 typed scratch %s[1] : !sage.ptr<f32>, !sage.ptr<i8>
  // expected-error @+1 {{stores through a typed map: only a bulk reduction (add) uses one}}
  sagegpu.tma_store %a into %typed[%n, %n] : !sagegpu.smem<64x32xf32, #sagegpu.shared<swizzle = 128, bits = 32>>
  return
}

// -----

// expected-error @+1 {{a shared buffer without encoding holds mbarriers: rank 1 and i64}}
func.func @f(%a: !sagegpu.smem<2xi32>) { return }

// -----

// expected-error @+1 {{shared tiles take a #sagegpu.shared encoding, not #sagegpu.blocked}}
func.func @f(%a: !sagegpu.smem<64x64xi8, #sagegpu.blocked<size = [1, 4], threads = [4, 8], warps = [4, 1]>>) { return }

// -----

#blocked = #sagegpu.blocked<size = [1, 4], threads = [4, 8], warps = [4, 1]>
#shared = #sagegpu.shared<swizzle = 0, bits = 8>
func.func @f(%t: tensor<64x32xi8, #blocked>) {
  // expected-error @+1 {{moves a 'tensor<64x32xi8, #sagegpu.blocked<size = [1, 4], threads = [4, 8], warps = [4, 1]>>' tile to or from a shared tile of another shape or element type}}
  %s = sagegpu.local_alloc %t : tensor<64x32xi8, #blocked> -> !sagegpu.smem<64x64xi8, #shared>
  return
}

// -----

#shared = #sagegpu.shared<swizzle = 0, bits = 8>
func.func @f(%s: !sagegpu.smem<64x64xi8, #shared>) {
  // expected-error @+1 {{needs the register tile's distributed encoding}}
  %t = sagegpu.local_load %s : !sagegpu.smem<64x64xi8, #shared> -> tensor<64x64xi8>
  return
}

// -----

#shared = #sagegpu.shared<swizzle = 0, bits = 8>
func.func @f(%p: !sage.ptr<f16>, %s: !sagegpu.smem<64x64xi8, #shared>, %i: i64) {
  // expected-error @+1 {{copies 'f16' elements into a tile of 'i8'}}
  sagegpu.async_copy %p[%i, %i] strides [%i, %i] bounds [%i, %i] into %s : !sage.ptr<f16> -> !sagegpu.smem<64x64xi8, #shared>
  return
}

// -----

#shared = #sagegpu.shared<swizzle = 0, bits = 8>
#kmajor0 = #sagegpu.shared<swizzle = 0, bits = 8, inner = 0>
#mma = #sagegpu.mma<mma_sync, warps = [4, 1]>
func.func @f(%a: !sagegpu.smem<64x128xi8, #kmajor0>, %b: !sagegpu.smem<64x128xi8, #shared>, %z: tensor<64x64xi32, #mma>) {
  // expected-error @+1 {{reads shared operands K-major: the lhs encoding's contiguous dimension must be the contracted one}}
  %d = sagegpu.dot %a, %b, %z contract(1, 1) : !sagegpu.smem<64x128xi8, #kmajor0>, !sagegpu.smem<64x128xi8, #shared> -> tensor<64x64xi32, #mma>
  return
}

// -----

// An MN-major rhs only on wgmma, swizzled and 16-bit (the transposed form).
#mn8 = #sagegpu.shared<swizzle = 128, bits = 8>
#a8 = #sagegpu.shared<swizzle = 128, bits = 8>
#wgmma = #sagegpu.mma<wgmma, warps = [4, 1], n = 128>
func.func @f(%a: !sagegpu.smem<64x128xi8, #a8>, %b: !sagegpu.smem<128x128xi8, #mn8>, %z: tensor<64x128xi32, #wgmma>) {
  // expected-error @+1 {{reads shared operands K-major (or, on wgmma, a swizzled 16-bit rhs MN-major): the rhs encoding's contiguous dimension must be the contracted one}}
  %d = sagegpu.dot %a, %b, %z contract(1, 0) : !sagegpu.smem<64x128xi8, #a8>, !sagegpu.smem<128x128xi8, #mn8> -> tensor<64x128xi32, #wgmma>
  return
}

// -----

#mn16 = #sagegpu.shared<swizzle = 128, bits = 16>
#a16 = #sagegpu.shared<swizzle = 128, bits = 16>
#mma = #sagegpu.mma<mma_sync, warps = [4, 1]>
func.func @f(%h: !sagegpu.smem<64x128xf16, #a16>, %v: !sagegpu.smem<128x64xf16, #mn16>, %y: tensor<64x64xf32, #mma>) {
  // expected-error @+1 {{reads shared operands K-major (or, on wgmma, a swizzled 16-bit rhs MN-major)}}
  %e = sagegpu.dot %h, %v, %y contract(1, 0) : !sagegpu.smem<64x128xf16, #a16>, !sagegpu.smem<128x64xf16, #mn16> -> tensor<64x64xf32, #mma>
  return
}

// -----

#shared = #sagegpu.shared<swizzle = 0, bits = 8>
#mma = #sagegpu.mma<mma_sync, warps = [4, 1]>
func.func @f(%a: !sagegpu.smem<64x128xi8, #shared>, %b: !sagegpu.smem<64x64xi8, #shared>, %z: tensor<64x64xi32, #mma>) {
  // expected-error @+1 {{contracts 128 against 64 elements}}
  %d = sagegpu.dot %a, %b, %z contract(1, 1) : !sagegpu.smem<64x128xi8, #shared>, !sagegpu.smem<64x64xi8, #shared> -> tensor<64x64xi32, #mma>
  return
}

// -----

#shared = #sagegpu.shared<swizzle = 0, bits = 8>
#mma = #sagegpu.mma<mma_sync, warps = [4, 1]>
func.func @f(%a: !sagegpu.smem<64x128xi8, #shared>, %z: tensor<64x64xf32, #mma>) {
  // expected-error @+1 {{accumulates i8 in i32 and f16/bf16 in f32, not 'i8' in 'f32'}}
  %d = sagegpu.dot %a, %a, %z contract(1, 1) : !sagegpu.smem<64x128xi8, #shared>, !sagegpu.smem<64x128xi8, #shared> -> tensor<64x64xf32, #mma>
  return
}

// -----

#blocked = #sagegpu.blocked<size = [1, 4], threads = [4, 8], warps = [4, 1]>
#shared = #sagegpu.shared<swizzle = 0, bits = 8>
#mma = #sagegpu.mma<wgmma, warps = [4, 1], n = 64>
func.func @f(%a: tensor<64x128xi8, #blocked>, %b: !sagegpu.smem<64x128xi8, #shared>, %z: tensor<64x64xi32, #mma>) {
  // expected-error @+1 {{takes a register lhs only as an [M, K] tile in the #sagegpu.dot_op A encoding}}
  %d = sagegpu.dot %a, %b, %z contract(1, 1) : tensor<64x128xi8, #blocked>, !sagegpu.smem<64x128xi8, #shared> -> tensor<64x64xi32, #mma>
  return
}

// -----

#shared = #sagegpu.shared<swizzle = 0, bits = 8>
#mma = #sagegpu.mma<wgmma, warps = [4, 1], n = 64>
#dot_op = #sagegpu.dot_op<0, parent = #sagegpu.mma<wgmma, warps = [4, 1], n = 128>, bits = 8>
func.func @f(%a: tensor<64x128xi8, #dot_op>, %b: !sagegpu.smem<64x128xi8, #shared>, %z: tensor<64x64xi32, #mma>) {
  // expected-error @+1 {{register lhs fragments must be of the result's accumulator encoding, got #sagegpu.mma<wgmma, warps = [4, 1], n = 128>}}
  %d = sagegpu.dot %a, %b, %z contract(1, 1) : tensor<64x128xi8, #dot_op>, !sagegpu.smem<64x128xi8, #shared> -> tensor<64x64xi32, #mma>
  return
}

// -----

#shared = #sagegpu.shared<swizzle = 0, bits = 8>
#blocked = #sagegpu.blocked<size = [1, 4], threads = [4, 8], warps = [4, 1]>
func.func @f(%a: !sagegpu.smem<64x128xi8, #shared>, %z: tensor<64x64xi32, #blocked>) {
  // expected-error @+1 {{result must carry an #sagegpu.mma accumulator encoding}}
  %d = sagegpu.dot %a, %a, %z contract(1, 1) : !sagegpu.smem<64x128xi8, #shared>, !sagegpu.smem<64x128xi8, #shared> -> tensor<64x64xi32, #blocked>
  return
}

// -----

#blocked = #sagegpu.blocked<size = [1, 4], threads = [4, 8], warps = [4, 1]>
func.func @f(%a: tensor<64x1xf32, #blocked>) {
  // expected-error @+1 {{is not the transpose of}}
  %t = sagegpu.trans %a : tensor<64x1xf32, #blocked> -> tensor<64x1xf32, #blocked>
  return
}

// -----

#blocked = #sagegpu.blocked<size = [1, 4], threads = [4, 8], warps = [4, 1]>
func.func @f(%t: tensor<1x64xi64, #blocked>) {
  // expected-error @+1 {{cannot initialise mbarriers from registers}}
  %s = sagegpu.local_alloc %t : tensor<1x64xi64, #blocked> -> !sagegpu.smem<1xi64>
  return
}

// -----

#shared = #sagegpu.shared<swizzle = 0, bits = 8>
func.func @f(%p: !sage.ptr<i8>, %s: !sagegpu.smem<64x64xi8, #shared>, %i: i64) {
  // expected-error @+1 {{takes two offsets, strides and bounds (a 2-D view)}}
  sagegpu.async_copy %p[%i, %i, %i] strides [%i, %i, %i] bounds [%i, %i, %i] into %s : !sage.ptr<i8> -> !sagegpu.smem<64x64xi8, #shared>
  return
}

// -----

#shared = #sagegpu.shared<swizzle = 0, bits = 8>
#mma = #sagegpu.mma<mma_sync, warps = [4, 1]>
func.func @f(%a: !sagegpu.smem<64x128xi8, #shared>, %z: tensor<64x64xi32, #mma>) {
  // expected-error @+1 {{contracts dimension 0 or 1 of each operand}}
  %d = sagegpu.dot %a, %a, %z contract(2, 1) : !sagegpu.smem<64x128xi8, #shared>, !sagegpu.smem<64x128xi8, #shared> -> tensor<64x64xi32, #mma>
  return
}

// -----

#shared = #sagegpu.shared<swizzle = 0, bits = 8>
#half = #sagegpu.shared<swizzle = 0, bits = 16>
#mma = #sagegpu.mma<mma_sync, warps = [4, 1]>
func.func @f(%a: !sagegpu.smem<64x128xi8, #shared>, %b: !sagegpu.smem<64x128xf16, #half>, %z: tensor<64x64xi32, #mma>) {
  // expected-error @+1 {{multiplies 'i8' by 'f16'}}
  %d = sagegpu.dot %a, %b, %z contract(1, 1) : !sagegpu.smem<64x128xi8, #shared>, !sagegpu.smem<64x128xf16, #half> -> tensor<64x64xi32, #mma>
  return
}

// -----

#shared = #sagegpu.shared<swizzle = 0, bits = 8>
#wgmma = #sagegpu.mma<wgmma, warps = [4, 1], n = 64>
func.func @f(%a: !sagegpu.smem<64x128xi8, #shared>, %z: tensor<64x64xi32, #wgmma>) -> tensor<64x64xi32, #wgmma> {
  // expected-error @+1 {{result is in flight until a sagegpu.dot_wait (wgmma is asynchronous): only dot_wait may use it (or an scf.for that carries it into the next iteration's dot accumulators), not func.return}}
  %d = sagegpu.dot %a, %a, %z contract(1, 1) : !sagegpu.smem<64x128xi8, #shared>, !sagegpu.smem<64x128xi8, #shared> -> tensor<64x64xi32, #wgmma>
  return %d : tensor<64x64xi32, #wgmma>
}

// -----

#wgmma = #sagegpu.mma<wgmma, warps = [4, 1], n = 64>
func.func @f(%z: tensor<64x64xi32, #wgmma>) -> tensor<64x64xi32, #wgmma> {
  // expected-error @+1 {{operand 0 is not the result of a wgmma sagegpu.dot (mma.sync dots are synchronous)}}
  %w = sagegpu.dot_wait %z {pendings = 0 : i32} : tensor<64x64xi32, #wgmma>
  return %w : tensor<64x64xi32, #wgmma>
}

// -----

#shared = #sagegpu.shared<swizzle = 0, bits = 8>
#mma = #sagegpu.mma<mma_sync, warps = [4, 1]>
#wgmma = #sagegpu.mma<wgmma, warps = [4, 1], n = 64>
func.func @f(%a: !sagegpu.smem<64x128xi8, #shared>, %z: tensor<64x64xi32, #mma>, %y: tensor<64x64xi32, #wgmma>) {
  %d = sagegpu.dot %a, %a, %z contract(1, 1) : !sagegpu.smem<64x128xi8, #shared>, !sagegpu.smem<64x128xi8, #shared> -> tensor<64x64xi32, #mma>
  %e = sagegpu.dot %a, %a, %y contract(1, 1) : !sagegpu.smem<64x128xi8, #shared>, !sagegpu.smem<64x128xi8, #shared> -> tensor<64x64xi32, #wgmma>
  // expected-error @+1 {{operand 1 is not the result of a wgmma sagegpu.dot (mma.sync dots are synchronous)}}
  %w:2 = sagegpu.dot_wait %e, %d {pendings = 0 : i32} : tensor<64x64xi32, #wgmma>, tensor<64x64xi32, #mma>
  return
}

// -----

#shared = #sagegpu.shared<swizzle = 0, bits = 8>
#wgmma = #sagegpu.mma<wgmma, warps = [4, 1], n = 64>
func.func @f(%a: !sagegpu.smem<64x128xi8, #shared>, %z: tensor<64x64xi32, #wgmma>) {
  %d = sagegpu.dot %a, %a, %z contract(1, 1) : !sagegpu.smem<64x128xi8, #shared>, !sagegpu.smem<64x128xi8, #shared> -> tensor<64x64xi32, #wgmma>
  // expected-error @+1 {{attribute 'pendings' failed to satisfy constraint: 32-bit signless integer attribute whose value is non-negative}}
  %w = sagegpu.dot_wait %d {pendings = -1 : i32} : tensor<64x64xi32, #wgmma>
  return
}

// -----

#shared = #sagegpu.shared<swizzle = 0, bits = 8>
#wgmma = #sagegpu.mma<wgmma, warps = [4, 1], n = 64>
func.func @f(%a: !sagegpu.smem<64x128xi8, #shared>, %z: tensor<64x64xi32, #wgmma>) {
  %d = sagegpu.dot %a, %a, %z contract(1, 1) : !sagegpu.smem<64x128xi8, #shared>, !sagegpu.smem<64x128xi8, #shared> -> tensor<64x64xi32, #wgmma>
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{inferred type(s) 'tensor<64x64xi32, #sagegpu.mma<wgmma, warps = [4, 1], n = 64>>' are incompatible with return type(s) of operation 'tensor<64x64xf32, #sagegpu.mma<wgmma, warps = [4, 1], n = 64>>'}}
  %w = "sagegpu.dot_wait"(%d) {pendings = 0 : i32} : (tensor<64x64xi32, #wgmma>) -> tensor<64x64xf32, #wgmma>
  return
}

// -----

// A carried in-flight accumulator may only feed the next iteration's dots
// as their accumulator, and leave the loop only through a dot_wait.
#shared = #sagegpu.shared<swizzle = 0, bits = 8>
#wgmma = #sagegpu.mma<wgmma, warps = [4, 1], n = 64>
func.func @f(%a: !sagegpu.smem<64x128xi8, #shared>, %z: tensor<64x64xi32, #wgmma>, %n: index) -> tensor<64x64xi32, #wgmma> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<64x64xi32, #wgmma>) {
    // expected-error @+1 {{result is in flight until a sagegpu.dot_wait (wgmma is asynchronous): only dot_wait may use it (or an scf.for that carries it into the next iteration's dot accumulators), not scf.yield}}
    %d = sagegpu.dot %a, %a, %acc contract(1, 1) : !sagegpu.smem<64x128xi8, #shared>, !sagegpu.smem<64x128xi8, #shared> -> tensor<64x64xi32, #wgmma>
    scf.yield %d : tensor<64x64xi32, #wgmma>
  }
  return %r : tensor<64x64xi32, #wgmma>
}

// -----

// A ring's slot has the ring's tile shape, element type and encoding.
func.func @f(%r: !sagegpu.smem<2x64x64xi8, #sagegpu.shared<swizzle = 64, bits = 8>>, %i: i32) {
  // expected-error @+1 {{a slot of '!sagegpu.smem<2x64x64xi8, #sagegpu.shared<swizzle = 64, bits = 8>>' is '!sagegpu.smem<64x64xi8, #sagegpu.shared<swizzle = 64, bits = 8>>', not '!sagegpu.smem<64x64xi8, #sagegpu.shared<swizzle = 0, bits = 8>>'}}
  %s = sagegpu.ring_slot %r[%i] : !sagegpu.smem<2x64x64xi8, #sagegpu.shared<swizzle = 64, bits = 8>> -> !sagegpu.smem<64x64xi8, #sagegpu.shared<swizzle = 0, bits = 8>>
  return
}

// -----

// A ring of mbarriers gives one mbarrier.
func.func @f(%r: !sagegpu.smem<2xi64>, %i: i32) {
  // expected-error @+1 {{a slot of '!sagegpu.smem<2xi64>' is '!sagegpu.smem<1xi64>', not '!sagegpu.smem<2xi64>'}}
  %s = sagegpu.ring_slot %r[%i] : !sagegpu.smem<2xi64> -> !sagegpu.smem<2xi64>
  return
}

// -----

// A single tile is not a ring.
func.func @f(%r: !sagegpu.smem<64x64xi8, #sagegpu.shared<swizzle = 64, bits = 8>>, %i: i32) {
  // expected-error @+1 {{takes a ring of tiles (rank 3) or of mbarriers, not '!sagegpu.smem<64x64xi8, #sagegpu.shared<swizzle = 64, bits = 8>>'}}
  %s = sagegpu.ring_slot %r[%i] : !sagegpu.smem<64x64xi8, #sagegpu.shared<swizzle = 64, bits = 8>> -> !sagegpu.smem<64x64xi8, #sagegpu.shared<swizzle = 64, bits = 8>>
  return
}

// -----

// expected-error @+1 {{shared tiles have rank 2 (rank 3: a ring of them)}}
func.func @f(%a: !sagegpu.smem<2x2x64x64xi8, #sagegpu.shared<swizzle = 0, bits = 8>>) { return }

// -----

// The ring's encoding must fit each of its tiles.
// expected-error @+1 {{the inner dimension must span whole swizzle widths}}
func.func @f(%a: !sagegpu.smem<2x64x32xi8, #sagegpu.shared<swizzle = 128, bits = 8>>) { return }

// -----

// Tile ops take a slot of a ring, not the ring.
func.func @f(%r: !sagegpu.smem<2x64x64xi8, #sagegpu.shared<swizzle = 0, bits = 8>>) {
  // expected-error @+1 {{operand #0 must be shared-memory tile}}
  %t = sagegpu.local_load %r : !sagegpu.smem<2x64x64xi8, #sagegpu.shared<swizzle = 0, bits = 8>> -> tensor<64x64xi8>
  return
}

// -----

func.func @f() {
  "scf.execute_region"() ({
    // expected-error @+1 {{must be directly in a function body}}
    sagegpu.warp_specialize producer(registers = 40) {
    } consumers(registers = 232) {
    }
    scf.yield
  }) : () -> ()
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{must be the last op of its function before the return}}
  sagegpu.warp_specialize producer(registers = 40) {
  } consumers(registers = 232) {
  }
  %c = arith.constant 0 : i32
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{registers per thread must be a multiple of 8 (setmaxnreg), got 36}}
  sagegpu.warp_specialize producer(registers = 36) {
  } consumers(registers = 232) {
  }
  return
}

// -----

module attributes {sage.num_warps = 8 : i32} {
func.func @f() {
  // expected-error @+1 {{asks for 66560 registers: an SM has 65536 (128 producer threads and 256 consumer threads)}}
  sagegpu.warp_specialize producer(registers = 56) {
  } consumers(registers = 232) {
  }
  return
}
}

// -----

module attributes {sage.num_warps = 2 : i32} {
func.func @f() {
  // expected-error @+1 {{the consumers must be whole warpgroups: 2 warps}}
  sagegpu.warp_specialize producer(registers = 40) {
  } consumers(registers = 232) {
  }
  return
}
}

// -----

func.func @turn_outside_roles() {
  // expected-error @+1 {{'sagegpu.warpgroup_turn' op must be in the consumers region of a sagegpu.warp_specialize}}
  sagegpu.warpgroup_turn {warpgroups = 2 : i32}
  return
}

// -----

module attributes {sage.num_warps = 8 : i32} {
func.func @turn_of_a_missing_warpgroup() {
  sagegpu.warp_specialize producer(registers = 40) {
  } consumers(registers = 232) {
    // expected-error @+1 {{'sagegpu.warpgroup_turn' op only names warpgroup 2 of 2}}
    sagegpu.warpgroup_turn {pass, warpgroups = 2 : i32, only = 2 : i32}
  }
  return
}
}

// -----

module attributes {sage.num_warps = 8 : i32} {
func.func @turns_among_other_warpgroups() {
  sagegpu.warp_specialize producer(registers = 40) {
  } consumers(registers = 232) {
    // expected-error @+1 {{'sagegpu.warpgroup_turn' op takes turns among 3 warpgroups, but the consumers are 2}}
    sagegpu.warpgroup_turn {warpgroups = 3 : i32}
  }
  return
}
}

// -----

#half = #sagegpu.shared<swizzle = 0, bits = 16>
#mma = #sagegpu.mma<mma_sync, warps = [4, 1]>
func.func @f(%a: !sagegpu.smem<64x64xf16, #half>, %z: tensor<64x64xf32, #mma>) {
  // expected-error @+1 {{reads an unsigned lhs only of i8, not 'f16'}}
  %d = sagegpu.dot %a, %a, %z contract(1, 1) lhs_unsigned : !sagegpu.smem<64x64xf16, #half>, !sagegpu.smem<64x64xf16, #half> -> tensor<64x64xf32, #mma>
  return
}
