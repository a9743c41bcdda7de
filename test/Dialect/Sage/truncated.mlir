// A file cut off in the middle of an op: sage-opt reports it and exits 1.
// RUN: not sage-opt %s 2>&1 | FileCheck %s
// CHECK: error:
// CHECK-NOT: Stack dump
// CHECK-NOT: Assertion
func.func @f(%x: tensor<4x8xf32>) {
  %0, %1 = sage.quantize #sage.int8<per_block> %x : tensor<4x8xf32> -> tensor<4x8xi8>,
