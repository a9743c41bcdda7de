// One case per verifier diagnostic of the sage dialect.
// RUN: sage-opt %s -split-input-file -verify-diagnostics

//===----------------------------------------------------------------------===//
// Dialect attributes
//===----------------------------------------------------------------------===//

// expected-error @+1 {{'sage.kernel' applies to functions only}}
module attributes {sage.kernel} {}

// -----

// expected-error @+1 {{'sage.kernel' must be a unit attribute}}
func.func @k() attributes {sage.kernel = 1 : i32} { return }

// -----

// expected-error @+1 {{a sage kernel must not return values}}
func.func @k() -> i32 attributes {sage.kernel} {
  %0 = arith.constant 0 : i32
  return %0 : i32
}

// -----

// expected-error @+1 {{'sage.early_launch' applies to functions only}}
module attributes {sage.early_launch} {}

// -----

// expected-error @+1 {{'sage.early_launch' must be a unit attribute}}
func.func @k() attributes {sage.early_launch = 1 : i32} { return }

// -----

// expected-error @+1 {{'sage.shared_memory' applies to functions only}}
module attributes {sage.shared_memory = 16 : i64} {}

// -----

// expected-error @+1 {{'sage.shared_memory' must be a non-negative integer}}
func.func @k() attributes {sage.shared_memory = -1 : i64} { return }

// -----

// expected-error @+1 {{'sage.target' applies to modules only}}
func.func @k() attributes {sage.target = "sm_90a"} { return }

// -----

// expected-error @+1 {{'sage.target' must be one of "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"}}
module attributes {sage.target = "sm_70"} {}

// -----

// expected-error @+1 {{'sage.num_warps' applies to modules only}}
func.func @k() attributes {sage.num_warps = 4 : i32} { return }

// -----

// expected-error @+1 {{'sage.num_warps' must be an integer in {1, 2, 4, 8, 16}}}
module attributes {sage.num_warps = 3 : i32} {}

// -----

// expected-error @+1 {{'sage.maxnreg' applies to modules only}}
func.func @k() attributes {sage.maxnreg = 128 : i32} { return }

// -----

// expected-error @+1 {{'sage.maxnreg' must be an integer from 24 to 255}}
module attributes {sage.maxnreg = 256 : i32} {}

// -----

// expected-error @+1 {{'sage.maxnreg' must be an integer from 24 to 255}}
module attributes {sage.maxnreg = 16 : i32} {}

// -----

// expected-error @+1 {{'sage.num_ctas' must be an integer from 1 to 8}}
module attributes {sage.num_ctas = 16 : i32} {}

// -----

// expected-error @+1 {{'sage.num_ctas' applies to modules only}}
func.func @k() attributes {sage.num_ctas = 2 : i32} { return }

// -----

module attributes {sage.target = "sm_90a"} {
  func.func @k() {
    // expected-error @+1 {{'sage.cluster_barrier' op needs a module whose programs run in clusters ('sage.num_ctas' > 1)}}
    sage.cluster_barrier
    return
  }
}

// -----

module attributes {sage.target = "sm_80", sage.num_ctas = 2 : i32} {
  func.func @k() {
    // expected-error @+1 {{'sage.cluster_barrier' op needs sm_90 or later (thread-block clusters), the module targets sm_80}}
    sage.cluster_barrier
    return
  }
}

// -----

module attributes {sage.target = "sm_80"} {
  func.func @k() {
    // expected-error @+1 {{'sage.grid_dependency_wait' op needs sm_90 or later (programmatic dependent launch), the module targets sm_80}}
    sage.grid_dependency_wait
    return
  }
}

// -----

module attributes {sage.target = "sm_86"} {
  func.func @k() {
    // expected-error @+1 {{'sage.launch_dependents' op needs sm_90 or later (programmatic dependent launch), the module targets sm_86}}
    sage.launch_dependents
    return
  }
}

// -----

// expected-error @+1 {{'sage.tensor_maps' applies to modules only}}
func.func @k() attributes {sage.tensor_maps = "host"} { return }

// -----

// expected-error @+1 {{'sage.tensor_maps' must be "host" or "device"}}
module attributes {sage.tensor_maps = "gpu"} {}

// -----

// expected-error @+1 {{'sage.host_tensor_map' of argument 0 must be a dictionary of address (string), dims and strides}}
func.func @k(%m: !sage.tensor_map {sage.host_tensor_map = 3 : i64}) { return }

// -----

// One stride too many.
// expected-error @+1 {{'sage.host_tensor_map' of argument 0 must be a dictionary}}
func.func @k(%m: !sage.tensor_map {sage.host_tensor_map = {address = "a1", dims = ["a1", "2"], strides = ["a1", "a1"], box = array<i64: 64, 64>, element_type = 0 : i64, swizzle = 3 : i64}}) { return }

// -----

// expected-error @+1 {{'sage.host_tensor_map' of argument 0 needs a !sage.tensor_map argument}}
func.func @k(%m: i64 {sage.host_tensor_map = {address = "a1", dims = ["a1", "2"], strides = ["a1"], box = array<i64: 64, 64>, element_type = 0 : i64, swizzle = 3 : i64}}) { return }

// -----

// expected-error @+1 {{unknown sage attribute 'sage.warps'}}
module attributes {sage.warps = 4 : i32} {}

//===----------------------------------------------------------------------===//
// Types and tile constraints
//===----------------------------------------------------------------------===//

// -----

// expected-error @+1 {{pointee must be an integer or float type, got 'tensor<4xf32>'}}
func.func @f(%p: !sage.ptr<tensor<4xf32>>) { return }

// -----

func.func @f(%x: tensor<64xf32>) {
  // expected-error @+1 {{operand #0 must be 2-D static tile (no empty dimension) of any type}}
  %0 = sage.broadcast %x : tensor<64xf32> -> tensor<64x2xf32>
  return
}

// -----

func.func @f(%x: tensor<0x64xf32>) {
  // expected-error @+1 {{operand #0 must be 2-D static tile (no empty dimension) of any type}}
  %0 = sage.reduce sum %x axis 0 : tensor<0x64xf32> -> tensor<1x64xf32>
  return
}

//===----------------------------------------------------------------------===//
// Program structure
//===----------------------------------------------------------------------===//

// -----

func.func @f() {
  // expected-error @+1 {{'sage.program_id' op axis must be in [0, 2], got 3}}
  %0 = sage.program_id 3
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{'sage.num_programs' op axis must be in [0, 2], got 7}}
  %0 = sage.num_programs 7
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{attribute 'axis' failed to satisfy constraint: 32-bit signless integer attribute whose value is non-negative}}
  %0 = sage.program_id -1
  return
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

// -----

func.func @f(%p: !sage.ptr<f16>, %i: i64) {
  // expected-error @+1 {{'sage.load' op expects 2 to 5 offsets (up to 3 leading dimensions, then one per tile dimension), got 1}}
  %0 = sage.load %p[%i] strides [%i] bounds [%i] : !sage.ptr<f16> -> tensor<16x16xf16>
  return
}

// -----

// A tensor map has rank 5 at most: 3 leading dimensions.
func.func @f(%p: !sage.ptr<f16>, %i: i64, %t: tensor<16x16xf16>) {
  // expected-error @+1 {{'sage.store' op expects 2 to 5 offsets (up to 3 leading dimensions, then one per tile dimension), got 6}}
  sage.store %t, %p[%i, %i, %i, %i, %i, %i] strides [%i, %i, %i, %i, %i, %i] bounds [%i, %i, %i, %i, %i, %i] : tensor<16x16xf16>, !sage.ptr<f16>
  return
}

// -----

func.func @f(%p: !sage.ptr<f16>, %i: i64) {
  // expected-error @+1 {{'sage.load' op expects one stride and one bound per offset (2), got 3 strides and 2 bounds}}
  %0 = sage.load %p[%i, %i] strides [%i, %i, %i] bounds [%i, %i] : !sage.ptr<f16> -> tensor<16x16xf16>
  return
}

// -----

func.func @f(%p: !sage.ptr<f16>, %i: i64) {
  // expected-error @+1 {{'sage.load' op expects one stride and one bound per offset (3), got 3 strides and 0 bounds}}
  %0 = sage.load %p[%i, %i, %i] strides [%i, %i, %i] bounds [] : !sage.ptr<f16> -> tensor<16x16xf16>
  return
}

// -----

func.func @f(%p: !sage.ptr<f16>, %i: i64) {
  // expected-error @+1 {{'sage.load' op tile element type 'f32' does not match pointee type 'f16'}}
  %0 = sage.load %p[%i, %i] strides [%i, %i] bounds [%i, %i] : !sage.ptr<f16> -> tensor<16x16xf32>
  return
}

// -----

func.func @f(%p: !sage.ptr<f16>, %i: i64) {
  // expected-error @+1 {{'sage.load' op sigma16_rows permutes rows inside every 16: the tile needs a multiple of 16 rows, got 8}}
  %0 = sage.load %p[%i, %i] strides [%i, %i] bounds [%i, %i] sigma16_rows : !sage.ptr<f16> -> tensor<8x16xf16>
  return
}

// -----

func.func @f(%p: !sage.ptr<f16>, %i: i64, %t: tensor<16x16xbf16>) {
  // expected-error @+1 {{'sage.store' op tile element type 'bf16' does not match pointee type 'f16'}}
  sage.store %t, %p[%i, %i] strides [%i, %i] bounds [%i, %i] : tensor<16x16xbf16>, !sage.ptr<f16>
  return
}

// -----

func.func @f(%p: !sage.ptr<f16>, %i: i64, %t: tensor<16x16xf16>) {
  // expected-error @+1 {{'sage.store' op atomic_add needs an f32 tile, got 'f16'}}
  sage.store atomic_add %t, %p[%i, %i] strides [%i, %i] bounds [%i, %i] : tensor<16x16xf16>, !sage.ptr<f16>
  return
}

//===----------------------------------------------------------------------===//
// Tile construction, broadcasting, reductions
//===----------------------------------------------------------------------===//

// -----

func.func @f(%s: f16) {
  // expected-error @+1 {{'sage.splat' op scalar type 'f16' does not match tile element type 'f32'}}
  %0 = sage.splat %s : f16 -> tensor<4x4xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{'sage.iota' op axis must be in [0, 1], got 2}}
  %0 = sage.iota 2 : tensor<4x4xi32>
  return
}

// -----

func.func @f(%x: tensor<4x1xf32>) {
  // expected-error @+1 {{'sage.broadcast' op element type changes from 'f32' to 'f16'}}
  %0 = sage.broadcast %x : tensor<4x1xf32> -> tensor<4x8xf16>
  return
}

// -----

func.func @f(%x: tensor<4x2xf32>) {
  // expected-error @+1 {{'sage.broadcast' op dimension 1 of size 2 cannot broadcast to 8 (only size-1 dimensions expand)}}
  %0 = sage.broadcast %x : tensor<4x2xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'sage.reduce' op axis must be in [0, 1], got 2}}
  %0 = sage.reduce max %x axis 2 : tensor<4x8xf32> -> tensor<4x1xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xi1>) {
  // expected-error @+1 {{'sage.reduce' op cannot reduce i1 tiles}}
  %0 = sage.reduce max %x axis 1 : tensor<4x8xi1> -> tensor<4x1xi1>
  return
}

// -----

func.func @f(%x: tensor<4x8xf16>) {
  // expected-error @+1 {{'sage.reduce' op result element type 'f32' differs from input 'f16'}}
  %0 = sage.reduce sum %x axis 1 : tensor<4x8xf16> -> tensor<4x1xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'sage.reduce' op result shape must be 4x1 (reduced axis kept with size 1), got 1x8}}
  %0 = sage.reduce sum %x axis 1 : tensor<4x8xf32> -> tensor<1x8xf32>
  return
}

//===----------------------------------------------------------------------===//
// smooth
//===----------------------------------------------------------------------===//

// -----

func.func @f(%x: tensor<4x8xf16>) {
  // expected-error @+1 {{'sage.smooth' op axis must be in [0, 1], got 5}}
  %0, %1 = sage.smooth %x axis 5 : tensor<4x8xf16> -> tensor<4x8xf32>, tensor<1x8xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf16>) {
  // expected-error @+1 {{'sage.smooth' op smoothed tile must have the input's shape 4x8}}
  %0, %1 = sage.smooth %x axis 0 : tensor<4x8xf16> -> tensor<8x4xf32>, tensor<1x8xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf16>) {
  // expected-error @+1 {{'sage.smooth' op mean must have shape 1x8, got 4x1}}
  %0, %1 = sage.smooth %x axis 0 : tensor<4x8xf16> -> tensor<4x8xf32>, tensor<4x1xf32>
  return
}

//===----------------------------------------------------------------------===//
// quantize / dequantize
//===----------------------------------------------------------------------===//

// -----

func.func @f(%x: tensor<4x8xf64>) {
  // expected-error @+1 {{'sage.quantize' op uint8 scheme quantizes f16, bf16 or f32, not 'f64'}}
  %q, %s = sage.quantize #sage.uint8<per_block> %x : tensor<4x8xf64> -> tensor<4x8xi8>, tensor<1x1xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf64>) {
  // expected-error @+1 {{'sage.quantize' op int8 scheme quantizes f16, bf16 or f32, not 'f64'}}
  %0, %1 = sage.quantize #sage.int8<per_block> %x : tensor<4x8xf64> -> tensor<4x8xi8>, tensor<1x1xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'sage.quantize' op scheme #sage.int8<per_block> stores 'i8', but the quantized tile holds 'i32'}}
  %0, %1 = sage.quantize #sage.int8<per_block> %x : tensor<4x8xf32> -> tensor<4x8xi32>, tensor<1x1xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'sage.quantize' op quantized and float tiles differ in shape: 8x4 vs 4x8}}
  %0, %1 = sage.quantize #sage.int8<per_block> %x : tensor<4x8xf32> -> tensor<8x4xi8>, tensor<1x1xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'sage.quantize' op scheme #sage.int8<per_token> needs scales of shape 4x1, got 1x8}}
  %0, %1 = sage.quantize #sage.int8<per_token> %x : tensor<4x8xf32> -> tensor<4x8xi8>, tensor<1x8xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'sage.quantize' op scheme #sage.int8<per_channel, rna> needs scales of shape 1x8, got 1x1}}
  %0, %1 = sage.quantize #sage.int8<per_channel, rna> %x : tensor<4x8xf32> -> tensor<4x8xi8>, tensor<1x1xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>, %s: tensor<1x1xf32>) {
  // expected-error @+1 {{'sage.quantize' op given scale type 'tensor<1x1xf32>' differs from the scales result type 'tensor<4x1xf32>'}}
  %0, %1 = sage.quantize #sage.int8<per_token> %x scale %s : tensor<4x8xf32>, tensor<1x1xf32> -> tensor<4x8xi8>, tensor<4x1xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{invalid properties {scheme = 1 : i32} for op sage.quantize: Invalid attribute `scheme` in property conversion: 1 : i32}}
  %0, %1 = "sage.quantize"(%x) <{scheme = 1 : i32}> : (tensor<4x8xf32>) -> (tensor<4x8xi8>, tensor<1x1xf32>)
  return
}

// -----

func.func @f(%q: tensor<4x8xi32>, %s: tensor<1x1xf32>) {
  // expected-error @+1 {{'sage.dequantize' op scheme #sage.int8<per_block> stores 'i8', but the quantized tile holds 'i32'}}
  %0 = sage.dequantize #sage.int8<per_block> %q, %s : tensor<4x8xi32>, tensor<1x1xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%q: tensor<4x8xi8>, %s: tensor<4x1xf32>) {
  // expected-error @+1 {{'sage.dequantize' op scheme #sage.int8<per_block> needs scales of shape 1x1, got 4x1}}
  %0 = sage.dequantize #sage.int8<per_block> %q, %s : tensor<4x8xi8>, tensor<4x1xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%q: tensor<4x8xi8>, %s: tensor<1x1xf32>) {
  // expected-error @+1 {{'sage.dequantize' op quantized and float tiles differ in shape: 4x8 vs 8x8}}
  %0 = sage.dequantize #sage.int8<per_block> %q, %s : tensor<4x8xi8>, tensor<1x1xf32> -> tensor<8x8xf32>
  return
}

//===----------------------------------------------------------------------===//
// qmatmul / matmul
//===----------------------------------------------------------------------===//

// -----

func.func @f(%a: tensor<64x24xi8>, %s: tensor<1x1xf32>) {
  // expected-error @+1 {{'sage.qmatmul' op rhs_sigma16 permutes the contraction inside every 16: it needs a multiple of 16, got 24}}
  %0 = sage.qmatmul %a[%s], %a[%s] contract(1, 1) rhs_sigma16 : tensor<64x24xi8>, tensor<1x1xf32>, tensor<64x24xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  return
}

// -----

func.func @f(%a: tensor<32x64xi8>, %s: tensor<1x1xf32>) {
  // expected-error @+1 {{'sage.qmatmul' op rhs_sigma16 feeds lhs as a register A operand: lhs must be contracted over its columns (contract(1, _))}}
  %0 = sage.qmatmul %a[%s], %a[%s] contract(0, 0) rhs_sigma16 : tensor<32x64xi8>, tensor<1x1xf32>, tensor<32x64xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  return
}

// -----

func.func @f(%a: tensor<64x32xi8>, %s: tensor<1x1xf32>) {
  // expected-error @+1 {{'sage.qmatmul' op contracted dimensions must be 0 or 1, got (2, 1)}}
  %0 = sage.qmatmul %a[%s], %a[%s] contract(2, 1) : tensor<64x32xi8>, tensor<1x1xf32>, tensor<64x32xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  return
}

// -----

func.func @f(%a: tensor<64x32xi8>, %b: tensor<16x64xi8>, %s: tensor<1x1xf32>) {
  // expected-error @+1 {{'sage.qmatmul' op contracted sizes differ: lhs dimension 1 is 32, rhs dimension 1 is 64}}
  %0 = sage.qmatmul %a[%s], %b[%s] contract(1, 1) : tensor<64x32xi8>, tensor<1x1xf32>, tensor<16x64xi8>, tensor<1x1xf32> -> tensor<64x16xf32>
  return
}

// -----

func.func @f(%a: tensor<64x32xi8>, %b: tensor<16x32xi8>, %s: tensor<1x1xf32>) {
  // expected-error @+1 {{'sage.qmatmul' op result must be 64x16, got 16x64}}
  %0 = sage.qmatmul %a[%s], %b[%s] contract(1, 1) : tensor<64x32xi8>, tensor<1x1xf32>, tensor<16x32xi8>, tensor<1x1xf32> -> tensor<16x64xf32>
  return
}

// -----

func.func @f(%a: tensor<1x131073xi8>, %s: tensor<1x1xf32>) {
  // expected-error @+1 {{'sage.qmatmul' op contraction of 131073 elements may overflow the int32 accumulator (at most 131072)}}
  %0 = sage.qmatmul %a[%s], %a[%s] contract(1, 1) : tensor<1x131073xi8>, tensor<1x1xf32>, tensor<1x131073xi8>, tensor<1x1xf32> -> tensor<1x1xf32>
  return
}

// -----

func.func @f(%a: tensor<64x32xi8>, %s: tensor<1x1xf32>, %sa: tensor<64x1xf32>) {
  // A per-token scale on dV = P^T dO would vary along the contraction.
  // expected-error @+1 {{'sage.qmatmul' op lhs scale varies along the contracted dimension 0 (shape 64x1); only scales constant along the contraction factor out of the integer product}}
  %0 = sage.qmatmul %a[%sa], %a[%s] contract(0, 0) : tensor<64x32xi8>, tensor<64x1xf32>, tensor<64x32xi8>, tensor<1x1xf32> -> tensor<32x32xf32>
  return
}

// -----

func.func @f(%a: tensor<64x32xi8>, %s: tensor<1x1xf32>, %sa: tensor<8x1xf32>) {
  // expected-error @+1 {{'sage.qmatmul' op lhs scale must have size 1 or 64 along dimension 0, got 8}}
  %0 = sage.qmatmul %a[%sa], %a[%s] contract(1, 1) : tensor<64x32xi8>, tensor<8x1xf32>, tensor<64x32xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  return
}

// -----

func.func @f(%a: tensor<64x32xi8>, %s: tensor<1x1xf32>, %sb: tensor<1x32xf32>) {
  // expected-error @+1 {{'sage.qmatmul' op rhs scale varies along the contracted dimension 1 (shape 1x32)}}
  %0 = sage.qmatmul %a[%s], %a[%sb] contract(1, 1) : tensor<64x32xi8>, tensor<1x1xf32>, tensor<64x32xi8>, tensor<1x32xf32> -> tensor<64x64xf32>
  return
}

// -----

func.func @f(%a: tensor<64x32xi8>, %s: tensor<1x1xf32>, %sb: tensor<1x16xf32>) {
  // expected-error @+1 {{'sage.qmatmul' op rhs scale must have size 1 or 32 along dimension 1, got 16}}
  %0 = sage.qmatmul %a[%s], %a[%sb] contract(0, 0) : tensor<64x32xi8>, tensor<1x1xf32>, tensor<64x32xi8>, tensor<1x16xf32> -> tensor<32x32xf32>
  return
}

// -----

func.func @f(%a: tensor<64x32xi8>, %s: tensor<1x1xf32>, %c: tensor<64x64xf16>) {
  // expected-error @+1 {{operand #4 must be 2-D static tile (no empty dimension) of f32}}
  %0 = "sage.qmatmul"(%a, %s, %a, %s, %c) <{lhs_contract_dim = 1 : i32, rhs_contract_dim = 1 : i32}> : (tensor<64x32xi8>, tensor<1x1xf32>, tensor<64x32xi8>, tensor<1x1xf32>, tensor<64x64xf16>) -> tensor<64x64xf32>
  return
}

// -----

func.func @f(%a: tensor<64x32xi8>, %s: tensor<1x1xf32>, %c: tensor<32x32xf32>) {
  // expected-error @+1 {{'sage.qmatmul' op failed to verify that accumulator type matches result}}
  %0 = "sage.qmatmul"(%a, %s, %a, %s, %c) <{lhs_contract_dim = 1 : i32, rhs_contract_dim = 1 : i32}> : (tensor<64x32xi8>, tensor<1x1xf32>, tensor<64x32xi8>, tensor<1x1xf32>, tensor<32x32xf32>) -> tensor<64x64xf32>
  return
}

// -----

func.func @f(%a: tensor<64x32xf16>, %b: tensor<64x32xbf16>) {
  // expected-error @+1 {{'sage.matmul' op operands must share an element type, got 'f16' and 'bf16'}}
  %0 = sage.matmul %a, %b contract(1, 1) : tensor<64x32xf16>, tensor<64x32xbf16> -> tensor<64x64xf32>
  return
}

// -----

func.func @f(%a: tensor<64x32xf16>) {
  // expected-error @+1 {{'sage.matmul' op contracted sizes differ: lhs dimension 1 is 32, rhs dimension 0 is 64}}
  %0 = sage.matmul %a, %a contract(1, 0) : tensor<64x32xf16>, tensor<64x32xf16> -> tensor<64x32xf32>
  return
}

// -----

func.func @f(%a: tensor<64x32xf32>) {
  // expected-error @+1 {{operand #0 must be 2-D static tile (no empty dimension) of f16, bf16 or i8}}
  %0 = sage.matmul %a, %a contract(1, 1) : tensor<64x32xf32>, tensor<64x32xf32> -> tensor<64x64xf32>
  return
}

// -----

func.func @f(%a: tensor<64x32xi8>) {
  // expected-error @+1 {{'sage.matmul' op i8 operands accumulate in i32, got a 'f32' result}}
  %0 = sage.matmul %a, %a contract(1, 1) : tensor<64x32xi8>, tensor<64x32xi8> -> tensor<64x64xf32>
  return
}

// -----

func.func @f(%a: tensor<64x32xf16>) {
  // expected-error @+1 {{'sage.matmul' op 16-bit operands accumulate in f32, got a 'i32' result}}
  %0 = sage.matmul %a, %a contract(1, 1) : tensor<64x32xf16>, tensor<64x32xf16> -> tensor<64x64xi32>
  return
}

// -----

func.func @f(%a: tensor<1x262144xi8>) {
  // expected-error @+1 {{'sage.matmul' op contraction of 262144 elements may overflow the int32 accumulator (at most 131072)}}
  %0 = sage.matmul %a, %a contract(1, 1) : tensor<1x262144xi8>, tensor<1x262144xi8> -> tensor<1x1xi32>
  return
}

//===----------------------------------------------------------------------===//
// softmax_update
//===----------------------------------------------------------------------===//

// -----

func.func @f(%s: tensor<64x32xf32>, %m: tensor<32x1xf32>) {
  // expected-error @+1 {{'sage.softmax_update' op row statistics must be 64x1 for logits of 64 rows, got 32x1}}
  %p, %m1, %l1, %a, %pm = sage.softmax_update %s, %m, %m : tensor<64x32xf32>, tensor<32x1xf32>
  return
}

// -----

func.func @f(%s: tensor<64x32xf32>, %m: tensor<64x1xf32>, %l: tensor<1x64xf32>) {
  // expected-error @+1 {{'sage.softmax_update' op failed to verify that all of {row_max, row_sum, new_max, new_sum, alpha, p_max} have same type}}
  %p, %m1, %l1, %a, %pm = "sage.softmax_update"(%s, %m, %l) : (tensor<64x32xf32>, tensor<64x1xf32>, tensor<1x64xf32>) -> (tensor<64x32xf32>, tensor<64x1xf32>, tensor<64x1xf32>, tensor<64x1xf32>, tensor<64x1xf32>)
  return
}

//===----------------------------------------------------------------------===//
// kernel-argument hints
//===----------------------------------------------------------------------===//

// -----

// expected-error @+1 {{unknown sage argument attribute 'sage.align'}}
func.func @f(%p: !sage.ptr<f16> {sage.align = 16 : i64}) {
  return
}

// -----

// expected-error @+1 {{'sage.alignment' of argument 0 must be a positive power of two}}
func.func @f(%p: !sage.ptr<f16> {sage.alignment = 12 : i64}) {
  return
}

// -----

// expected-error @+1 {{'sage.divisibility' of argument 0 must be a positive power of two}}
func.func @f(%n: i64 {sage.divisibility = "16"}) {
  return
}

// -----

// expected-error @+1 {{'sage.alignment' of argument 1 needs a !sage.ptr argument}}
func.func @f(%p: !sage.ptr<f16>, %n: i64 {sage.alignment = 16 : i64}) {
  return
}

// -----

// expected-error @+1 {{'sage.divisibility' of argument 0 needs an integer argument}}
func.func @f(%p: !sage.ptr<f16> {sage.divisibility = 16 : i64}) {
  return
}

// -----

// expected-error @+1 {{'sage.global_scratch' must be a non-negative multiple of 128}}
func.func @f(%s: !sage.ptr<i8>) attributes {sage.global_scratch = 100 : i64} {
  return
}

// -----

// expected-error @+1 {{'sage.global_scratch' needs a last argument of type !sage.ptr<i8> (the scratch address)}}
func.func @f(%s: !sage.ptr<i8>, %p: !sage.ptr<f16>) attributes {sage.global_scratch = 128 : i64} {
  return
}

// -----

func.func @f(%p: !sage.ptr<i8>, %n: i64, %s: !sage.ptr<i8>) attributes {sage.global_scratch = 128 : i64} {
  %c1 = arith.constant 1 : i64
  // expected-error @+1 {{stride of the inner dimension 1 must be the constant 1}}
  %m = sage.make_tensor_map %p strides [%n, %n] bounds [%n, %n] box [64, 64] inner 1 swizzle 64 scratch %s[0] : !sage.ptr<i8>, !sage.ptr<i8>
  return
}

// -----

func.func @f(%p: !sage.ptr<f16>, %n: i64, %s: !sage.ptr<i8>) attributes {sage.global_scratch = 128 : i64} {
  %c1 = arith.constant 1 : i64
  // expected-error @+1 {{box 64x32 of 'f16' with swizzle 128 must span whole swizzle widths (32, 64 or 128 bytes) of the inner dimension and a multiple of 8 rows, 8 to 256}}
  %m = sage.make_tensor_map %p strides [%n, %c1] bounds [%n, %n] box [64, 32] inner 1 swizzle 128 scratch %s[0] : !sage.ptr<f16>, !sage.ptr<i8>
  return
}

// -----

func.func @f(%p: !sage.ptr<i8>, %n: i64, %s: !sage.ptr<i8>) attributes {sage.global_scratch = 128 : i64} {
  %c1 = arith.constant 1 : i64
  // expected-error @+1 {{box 4x64 of 'i8' with swizzle 64 must span whole swizzle widths (32, 64 or 128 bytes) of the inner dimension and a multiple of 8 rows, 8 to 256}}
  %m = sage.make_tensor_map %p strides [%n, %c1] bounds [%n, %n] box [4, 64] inner 1 swizzle 64 scratch %s[0] : !sage.ptr<i8>, !sage.ptr<i8>
  return
}

// -----

func.func @f(%p: !sage.ptr<i8>, %n: i64, %s: !sage.ptr<i8>) attributes {sage.global_scratch = 128 : i64} {
  %c1 = arith.constant 1 : i64
  // expected-error @+1 {{box 64x64 of 'i8' with swizzle 0 must span whole swizzle widths}}
  %m = sage.make_tensor_map %p strides [%n, %c1] bounds [%n, %n] box [64, 64] inner 1 swizzle 0 scratch %s[0] : !sage.ptr<i8>, !sage.ptr<i8>
  return
}

// -----

func.func @f(%p: !sage.ptr<i8>, %n: i64, %s: !sage.ptr<i8>) attributes {sage.global_scratch = 128 : i64} {
  %c1 = arith.constant 1 : i64
  // expected-error @+1 {{slot 1 lies outside the function's 'sage.global_scratch'}}
  %m = sage.make_tensor_map %p strides [%n, %c1] bounds [%n, %n] box [64, 64] inner 1 swizzle 64 scratch %s[1] : !sage.ptr<i8>, !sage.ptr<i8>
  return
}

// -----

func.func @f(%p: !sage.ptr<i8>, %n: i64, %s: !sage.ptr<i8>) attributes {sage.global_scratch = 128 : i64} {
  %c1 = arith.constant 1 : i64
  // expected-error @+1 {{describes a 2-D box of a view with up to 3 leading dimensions: expects a 2-D box and 2 to 5 strides and as many bounds, got 6 strides and 6 bounds}}
  %m = sage.make_tensor_map %p strides [%n, %n, %n, %n, %n, %c1] bounds [%n, %n, %n, %n, %n, %n] box [64, 64] inner 1 swizzle 64 scratch %s[0] : !sage.ptr<i8>, !sage.ptr<i8>
  return
}

// -----

func.func @f(%p: !sage.ptr<bf16>, %n: i64, %s: !sage.ptr<i8>) attributes {sage.global_scratch = 128 : i64} {
  %c1 = arith.constant 1 : i64
  // expected-error @+1 {{a typed map counts f32 elements, not 'bf16'}}
  %m = sage.make_tensor_map %p strides [%n, %c1] bounds [%n, %n] box [64, 64] inner 1 swizzle 128 typed scratch %s[0] : !sage.ptr<bf16>, !sage.ptr<i8>
  return
}

// -----

// The unit stride is the inner tile dimension's, after the leading ones.
func.func @f(%p: !sage.ptr<i8>, %n: i64, %s: !sage.ptr<i8>) attributes {sage.global_scratch = 128 : i64} {
  %c1 = arith.constant 1 : i64
  // expected-error @+1 {{stride of the inner dimension 1 must be the constant 1}}
  %m = sage.make_tensor_map %p strides [%n, %c1, %n] bounds [%n, %n, %n] box [64, 64] inner 1 swizzle 64 scratch %s[0] : !sage.ptr<i8>, !sage.ptr<i8>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'sage.quantize' op unsaturated needs a given scale (a computed absmax scale keeps the clamp)}}
  %0, %1 = sage.quantize #sage.int8<per_block> %x unsaturated : tensor<4x8xf32> -> tensor<4x8xi8>, tensor<1x1xf32>
  return
}

// -----

func.func @k() {
  // expected-error @+1 {{'sage.num_stages' applies to scf.for only}}
  %c = arith.constant {sage.num_stages = 2 : i32} 0 : i32
  return
}

// -----

func.func @k(%n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  // expected-error @+1 {{'sage.num_stages' must be a positive integer}}
  scf.for %i = %c0 to %n step %c1 : i32 {
  } {sage.num_stages = 0 : i32}
  return
}

// -----

func.func @ping_pong_alone(%n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  // expected-error @+1 {{'sage.ping_pong' needs 'sage.warp_specialize': the consumer warpgroups of a warp-specialised loop take turns}}
  scf.for %i = %c0 to %n step %c1 : i32 {
  } {sage.num_stages = 2 : i32, sage.ping_pong}
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'sage.reduce' op groups 7 must be some, not all, of the index bits below 8}}
  %0 = sage.reduce max %x axis 1 groups 7 : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'sage.reduce' op groups 8 must be some, not all, of the index bits below 8}}
  %0 = sage.reduce max %x axis 1 groups 8 : tensor<4x8xf32> -> tensor<4x2xf32>
  return
}

// -----

func.func @f(%x: tensor<4x6xf32>) {
  // expected-error @+1 {{'sage.reduce' op groups need a power-of-two extent of at least 2, got 6}}
  %0 = sage.reduce max %x axis 1 groups 2 : tensor<4x6xf32> -> tensor<4x2xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'sage.reduce' op result shape must be 4x4 (one entry per group along the axis), got 4x2}}
  %0 = sage.reduce max %x axis 1 groups 6 : tensor<4x8xf32> -> tensor<4x2xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'sage.broadcast' op groups need a dimension whose size is neither 1 nor the result's}}
  %0 = sage.broadcast %x groups 2 : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{'sage.broadcast' op groups 2 take 2 entries along dimension 1, got 4}}
  %0 = sage.broadcast %x groups 2 : tensor<4x4xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @f32_counter(%c: !sage.ptr<f32>, %n: i32) {
  // expected-error @+1 {{'sage.counter_add' op needs a counter of i32, got '!sage.ptr<f32>'}}
  %old = sage.counter_add %c, %n : !sage.ptr<f32>
  return
}

// -----

func.func @i64_counter(%c: !sage.ptr<i64>, %n: i32) {
  // expected-error @+1 {{'sage.counter_wait' op needs a counter of i32, got '!sage.ptr<i64>'}}
  sage.counter_wait %c, %n : !sage.ptr<i64>
  return
}
