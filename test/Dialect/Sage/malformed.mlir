// Malformed sage IR gives a diagnostic and a non-zero exit, never a crash.
// RUN: not sage-opt %s -split-input-file 2>&1 | FileCheck %s
// CHECK-NOT: Stack dump

// CHECK: error: expected ::mlir::sage::Granularity to be one of: per_block, per_token, per_channel
func.func @f(%x: tensor<4x8xf32>) {
  %0, %1 = sage.quantize #sage.int8<per_row> %x : tensor<4x8xf32> -> tensor<4x8xi8>, tensor<1x1xf32>
  return
}

// -----

// CHECK: error: expected one of [rne, rna] for rounding of scaled values to the storage type, got: floor
func.func @f(%x: tensor<4x8xf32>) {
  %0, %1 = sage.quantize #sage.int8<per_block, floor> %x : tensor<4x8xf32> -> tensor<4x8xi8>, tensor<1x1xf32>
  return
}

// -----

// CHECK: error: unbalanced '<' character in pretty dialect name
func.func @f(%x: tensor<4x8xf32>) {
  %0, %1 = sage.quantize #sage.int8<per_block %x : tensor<4x8xf32> -> tensor<4x8xi8>, tensor<1x1xf32>
  return
}

// -----

// CHECK: error: custom op 'sage.reduce' expected string or keyword containing one of the following enum values for attribute 'kind' [sum, max, min, absmax]
func.func @f(%x: tensor<4x8xf32>) {
  %0 = sage.reduce mean %x axis 0 : tensor<4x8xf32> -> tensor<1x8xf32>
  return
}

// -----

// CHECK: error: failed to parse Sage_PtrType parameter 'pointeeType'
func.func @f(%p: !sage.ptr<>) { return }

// -----

// CHECK: error: custom op 'sage.frobnicate' is unknown
func.func @f() {
  sage.frobnicate
  return
}

// -----

// CHECK: error: unknown attribute `int4` in dialect `sage`
func.func @f(%x: tensor<4x8xf32>) {
  %0, %1 = sage.quantize #sage.int4<per_block> %x : tensor<4x8xf32> -> tensor<4x8xi8>, tensor<1x1xf32>
  return
}
