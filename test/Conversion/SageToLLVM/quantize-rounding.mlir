// The decomposed INT8 quantizer ends in one saturating cvt.rni per element.
// RUN: sage-opt %s --sage-decompose --sage-assign-layouts --convert-sage-to-llvm --canonicalize | FileCheck %s

module attributes {sage.num_warps = 4 : i32} {
// CHECK-LABEL: func.func @quantize
// CHECK-NOT: math.roundeven
// CHECK-COUNT-4: llvm.inline_asm asm_dialect = att "cvt.rni.sat.s8.f32 $0, $1;\0A\09max.s16 $0, $0, -127;", "=h,f" %{{.*}} : (f32) -> i16
// CHECK-NOT: arith.fptosi
func.func @quantize(%x: tensor<16x32xf32>) -> (tensor<16x32xi8>, tensor<1x1xf32>) {
  %q, %s = sage.quantize #sage.int8<per_block> %x : tensor<16x32xf32> -> tensor<16x32xi8>, tensor<1x1xf32>
  return %q, %s : tensor<16x32xi8>, tensor<1x1xf32>
}

// Rounding half away from zero keeps the generic sequence.
// CHECK-LABEL: func.func @rna
// CHECK: math.round
// CHECK: arith.fptosi
func.func @rna(%x: tensor<16x32xf32>) -> (tensor<16x32xi8>, tensor<1x1xf32>) {
  %q, %s = sage.quantize #sage.int8<per_block, rna> %x : tensor<16x32xf32> -> tensor<16x32xi8>, tensor<1x1xf32>
  return %q, %s : tensor<16x32xi8>, tensor<1x1xf32>
}
}
