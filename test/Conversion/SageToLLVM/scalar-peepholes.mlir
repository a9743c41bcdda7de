// The scalar peepholes after the tile conversion. The decomposed INT8
// quantizer rounds without the F2I pipe: a clamp to [-127, 127] where the
// scale is given, an add.rn.f32 of 1.5 * 2^23 and the low byte of the sum,
// taken by an integer `and` that keeps ptxas from converting the float. A
// bf16 element of a vector widens to f32 from its 32-bit word. Words of
// bytes that round f16 values with scale 1 round f16 pairs.
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
func.func @quantize(%x: tensor<16x32xf32>, %s: tensor<16x1xf32>) -> tensor<16x32xi8> {
  %q, %t = sage.quantize #sage.int8<per_token> %x scale %s : tensor<16x32xf32>, tensor<16x1xf32> -> tensor<16x32xi8>, tensor<16x1xf32>
  return %q : tensor<16x32xi8>
}

// A computed (absmax) scale keeps |x * inv| below 127.5 (sage.quantize):
// the same rounding, without the clamp.
// CHECK-LABEL: func.func @computed
// CHECK-NOT: -1.270000e+02
// CHECK-NOT: arith.minimumf
// CHECK: llvm.call_intrinsic "llvm.nvvm.add.rn.f"
// CHECK-NOT: -1.270000e+02
// CHECK-NOT: arith.minimumf
// CHECK-NOT: arith.fptosi
// CHECK: return
func.func @computed(%x: tensor<16x32xf32>) -> (tensor<16x32xi8>, tensor<1x1xf32>) {
  %q, %s = sage.quantize #sage.int8<per_block> %x : tensor<16x32xf32> -> tensor<16x32xi8>, tensor<1x1xf32>
  return %q, %s : tensor<16x32xi8>, tensor<1x1xf32>
}

// An unsaturated quantize (a given scale that keeps |x * inv| <= 127)
// rounds without the clamp, and the exact product (sage.quantize): the
// scaling multiply and the magic-number add are one fma.rn.
// CHECK-LABEL: func.func @unsaturated
// CHECK-NOT: arith.maximumf
// CHECK-NOT: arith.minimumf
// CHECK-NOT: arith.mulf
// CHECK: llvm.call_intrinsic "llvm.nvvm.fma.rn.f"(%{{.*}}, %{{.*}}, %{{.*}}) : (f32, f32, f32) -> f32
// CHECK-NOT: llvm.nvvm.add.rn.f
// CHECK-NOT: arith.fptosi
func.func @unsaturated(%x: tensor<16x32xf32>, %s: tensor<16x1xf32>) -> tensor<16x32xi8> {
  %q, %t = sage.quantize #sage.int8<per_token> %x scale %s unsaturated : tensor<16x32xf32>, tensor<16x1xf32> -> tensor<16x32xi8>, tensor<16x1xf32>
  return %q : tensor<16x32xi8>
}

// Bytes only packed into wider vectors (here one 4-byte store per thread)
// skip the `and`: PRMT packing is compiled correctly.
// CHECK-LABEL: func.func @packed
// CHECK: llvm.call_intrinsic "llvm.nvvm.add.rn.f"
// CHECK-NOT: and.b32
// CHECK: st.global.b32
// CHECK-NOT: and.b32
// CHECK: return
func.func @packed(%x: tensor<16x32xf32>, %dst: !sage.ptr<i8> {sage.alignment = 16 : i64}) {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c16 = arith.constant 16 : i64
  %c32 = arith.constant 32 : i64
  %q, %s = sage.quantize #sage.int8<per_block> %x : tensor<16x32xf32> -> tensor<16x32xi8>, tensor<1x1xf32>
  sage.store %q, %dst[%c0, %c0] strides [%c32, %c1] bounds [%c16, %c32] : tensor<16x32xi8>, !sage.ptr<i8>
  return
}

// The unsigned scheme: the low byte of the same sum is the u8 (a clamp to
// [0, 255] where the scale is given and saturating, to 0 alone where it is
// computed).
// CHECK-LABEL: func.func @unsigned_given
// CHECK-DAG: %[[ULO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: %[[UHI:.*]] = arith.constant 2.550000e+02 : f32
// CHECK: %[[UA:.*]] = arith.maximumf %{{.*}}, %[[ULO]] : f32
// CHECK-NEXT: %[[UB:.*]] = arith.minimumf %[[UA]], %[[UHI]] : f32
// CHECK-NEXT: llvm.call_intrinsic "llvm.nvvm.add.rn.f"(%[[UB]], %{{.*}})
// CHECK-NOT: arith.fptoui
// CHECK-LABEL: func.func @unsigned_computed
// CHECK: arith.maximumf
// CHECK-NOT: arith.minimumf
// CHECK: llvm.call_intrinsic "llvm.nvvm.add.rn.f"
// CHECK-NOT: arith.fptoui
// CHECK: return
func.func @unsigned_given(%x: tensor<16x32xf32>, %s: tensor<16x1xf32>) -> tensor<16x32xi8> {
  %q, %t = sage.quantize #sage.uint8<per_token> %x scale %s : tensor<16x32xf32>, tensor<16x1xf32> -> tensor<16x32xi8>, tensor<16x1xf32>
  return %q : tensor<16x32xi8>
}
func.func @unsigned_computed(%x: tensor<16x32xf32>) -> tensor<16x32xi8> {
  %q, %t = sage.quantize #sage.uint8<per_token> %x : tensor<16x32xf32> -> tensor<16x32xi8>, tensor<16x1xf32>
  return %q : tensor<16x32xi8>
}

// Rounding half away from zero keeps the generic sequence.
// CHECK-LABEL: func.func @rna
// CHECK: math.round
// CHECK: arith.fptosi
func.func @rna(%x: tensor<16x32xf32>) -> (tensor<16x32xi8>, tensor<1x1xf32>) {
  %q, %s = sage.quantize #sage.int8<per_block, rna> %x : tensor<16x32xf32> -> tensor<16x32xi8>, tensor<1x1xf32>
  return %q, %s : tensor<16x32xi8>, tensor<1x1xf32>
}

// A vector load's bf16 halves widen from their 32-bit words: the even
// half shifted left by 16, the odd half masked (no cvt.f32.bf16, which
// costs ptxas a PRMT and an IMAD a half).
// CHECK-LABEL: func.func @widen_bf16_pairs
// CHECK-DAG: %[[MASK:.*]] = llvm.mlir.constant(-65536 : i32) : i32
// CHECK-DAG: %[[SIXTEEN:.*]] = llvm.mlir.constant(16 : i32) : i32
// CHECK: %[[WORDS:.*]] = llvm.bitcast %{{.*}} to vector<2xi32>
// CHECK: %[[W:.*]] = llvm.extractelement %[[WORDS]]
// CHECK: llvm.shl %[[W]], %[[SIXTEEN]] : i32
// CHECK: llvm.and %{{.*}}, %[[MASK]] : i32
// CHECK-NOT: arith.extf
// CHECK: return
func.func @widen_bf16_pairs(%src: !sage.ptr<bf16> {sage.alignment = 16 : i64},
                            %n: i64 {sage.divisibility = 16 : i64}) -> tensor<16x32xf32> {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %t = sage.load %src[%c0, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<bf16> -> tensor<16x32xbf16>
  %w = arith.extf %t : tensor<16x32xbf16> to tensor<16x32xf32>
  return %w : tensor<16x32xf32>
}

// A bf16 that is no element of a vector (an argument) keeps its extf.
// CHECK-LABEL: func.func @widen_bf16_alone
// CHECK-COUNT-4: arith.extf %{{.*}} : bf16 to f32
func.func @widen_bf16_alone(%h: tensor<16x32xbf16>) -> tensor<16x32xf32> {
  %w = arith.extf %h : tensor<16x32xbf16> to tensor<16x32xf32>
  return %w : tensor<16x32xf32>
}
// Bytes that round f16 values (an f32 rounded to f16, quantized with scale
// 1, unsaturated: the SageBwd forward's P~) and fill whole words round f16
// pairs: cvt.rn.f16x2.f32 of the two f32 (the two truncf), add.rn.f16x2 of
// 1.5 * 2^10 (0x66006600), and one prmt of bytes 0 and 2 of each pair.
// CHECK-LABEL: func.func @f16_pairs
// CHECK: %[[M:.*]] = llvm.mlir.constant(1711302144 : i32) : i32
// CHECK: %[[LO:.*]] = llvm.inline_asm {{.*}}cvt.rn.f16x2.f32 h, $2, $1;{{.*}}add.rn.f16x2 $0, h, $3;{{.*}} "=r,f,f,r" %arg0, %arg1, %[[M]]
// CHECK: %[[HI:.*]] = llvm.inline_asm {{.*}}cvt.rn.f16x2.f32 h, $2, $1;{{.*}} "=r,f,f,r" %arg2, %arg3, %[[M]]
// CHECK: %[[W:.*]] = llvm.inline_asm asm_dialect = att "prmt.b32 $0, $1, $2, 0x6420;", "=r,r,r" %[[LO]], %[[HI]]
// CHECK: llvm.insertelement %[[W]]
// CHECK-NOT: llvm.trunc
// CHECK: st.global.b32
func.func @f16_pairs(%x: tensor<16x32xf32>, %dst: !sage.ptr<i8> {sage.alignment = 16 : i64}) {
  %one = arith.constant dense<1.0> : tensor<16x1xf32>
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c16 = arith.constant 16 : i64
  %c32 = arith.constant 32 : i64
  %h = arith.truncf %x : tensor<16x32xf32> to tensor<16x32xf16>
  %q, %t = sage.quantize #sage.uint8<per_token> %h scale %one unsaturated : tensor<16x32xf16>, tensor<16x1xf32> -> tensor<16x32xi8>, tensor<16x1xf32>
  sage.store %q, %dst[%c0, %c0] strides [%c32, %c1] bounds [%c16, %c32] : tensor<16x32xi8>, !sage.ptr<i8>
  return
}

// Bytes that are also widened and summed (P~'s row sum): the sum takes
// them by dp4a from words packed as the store's are, so the widening dies
// and the bytes still round f16 pairs, with no `and`.
// CHECK-LABEL: func.func @f16_pairs_summed
// CHECK-NOT: and.b32
// CHECK: cvt.rn.f16x2.f32
// CHECK: nvvm.dot.accumulate.4way
// CHECK-NOT: and.b32
// CHECK: return
func.func @f16_pairs_summed(%x: tensor<16x256xf32>, %dst: !sage.ptr<i8> {sage.alignment = 16 : i64}) -> tensor<16x1xi32> {
  %one = arith.constant dense<1.0> : tensor<16x1xf32>
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c16 = arith.constant 16 : i64
  %c256 = arith.constant 256 : i64
  %h = arith.truncf %x : tensor<16x256xf32> to tensor<16x256xf16>
  %q, %t = sage.quantize #sage.uint8<per_token> %h scale %one unsaturated : tensor<16x256xf16>, tensor<16x1xf32> -> tensor<16x256xi8>, tensor<16x1xf32>
  sage.store %q, %dst[%c0, %c0] strides [%c256, %c1] bounds [%c16, %c256] : tensor<16x256xi8>, !sage.ptr<i8>
  %w = arith.extui %q : tensor<16x256xi8> to tensor<16x256xi32>
  %r = sage.reduce sum %w axis 1 : tensor<16x256xi32> -> tensor<16x1xi32>
  return %r : tensor<16x1xi32>
}

// Another scale would round its product in f16: the f32 magic-number path.
// CHECK-LABEL: func.func @f16_scaled
// CHECK: llvm.call_intrinsic "llvm.nvvm.fma.rn.f"
// CHECK-NOT: f16x2
// CHECK: return
func.func @f16_scaled(%x: tensor<16x32xf32>, %s: tensor<16x1xf32>, %dst: !sage.ptr<i8> {sage.alignment = 16 : i64}) {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c16 = arith.constant 16 : i64
  %c32 = arith.constant 32 : i64
  %h = arith.truncf %x : tensor<16x32xf32> to tensor<16x32xf16>
  %q, %t = sage.quantize #sage.uint8<per_token> %h scale %s unsaturated : tensor<16x32xf16>, tensor<16x1xf32> -> tensor<16x32xi8>, tensor<16x1xf32>
  sage.store %q, %dst[%c0, %c0] strides [%c32, %c1] bounds [%c16, %c32] : tensor<16x32xi8>, !sage.ptr<i8>
  return
}
}
