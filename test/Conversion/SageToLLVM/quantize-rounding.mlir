// The decomposed INT8 quantizer rounds without the F2I pipe: a clamp to
// [-127, 127], an add.rn.f32 of 1.5 * 2^23 and the low byte of the sum,
// taken by an integer `and` that keeps ptxas from converting the float.
// RUN: sage-opt %s --sage-decompose --sagegpu-assign-layouts --sagegpu-allocate-shared-memory --sagegpu-insert-barriers --convert-sage-to-llvm --canonicalize | FileCheck %s

module attributes {sage.num_warps = 4 : i32} {
// CHECK-LABEL: func.func @quantize
// CHECK-NOT: math.roundeven
// CHECK-DAG: %[[LO:.*]] = arith.constant -1.270000e+02 : f32
// CHECK-DAG: %[[HI:.*]] = arith.constant 1.270000e+02 : f32
// CHECK-DAG: %[[MAGIC:.*]] = arith.constant 0x4B400000 : f32
// CHECK-COUNT-4: %[[A:.*]] = arith.maximumf %{{.*}}, %[[LO]] : f32
// CHECK-NEXT: %[[B:.*]] = arith.minimumf %[[A]], %[[HI]] : f32
// CHECK-NEXT: %[[S:.*]] = llvm.call_intrinsic "llvm.nvvm.add.rn.f"(%[[B]], %[[MAGIC]]) : (f32, f32) -> f32
// CHECK-NEXT: %[[I:.*]] = llvm.bitcast %[[S]] : f32 to i32
// CHECK-NEXT: %[[L:.*]] = llvm.inline_asm asm_dialect = att "and.b32 $0, $1, 255;", "=r,r" %[[I]] : (i32) -> i32
// CHECK-NEXT: llvm.trunc %[[L]] : i32 to i8
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
