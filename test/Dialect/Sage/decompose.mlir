// sage-decompose spells out each composite op's documented formula.
// RUN: sage-opt %s --sage-decompose --split-input-file | FileCheck %s

// CHECK-LABEL: func.func @smooth
// CHECK-SAME: (%[[X:.*]]: tensor<64x32xf16>)
// CHECK-DAG: %[[N:.*]] = arith.constant dense<6.400000e+01> : tensor<1x32xf32>
// CHECK: %[[XF:.*]] = arith.extf %[[X]] : tensor<64x32xf16> to tensor<64x32xf32>
// CHECK: %[[SUM:.*]] = sage.reduce sum %[[XF]] axis 0 : tensor<64x32xf32> -> tensor<1x32xf32>
// CHECK: %[[MEAN:.*]] = arith.divf %[[SUM]], %[[N]] : tensor<1x32xf32>
// CHECK: %[[B:.*]] = sage.broadcast %[[MEAN]] : tensor<1x32xf32> -> tensor<64x32xf32>
// CHECK: %[[S:.*]] = arith.subf %[[XF]], %[[B]] : tensor<64x32xf32>
// CHECK: return %[[S]], %[[MEAN]]
func.func @smooth(%x: tensor<64x32xf16>) -> (tensor<64x32xf32>, tensor<1x32xf32>) {
  %s, %m = sage.smooth %x axis 0 : tensor<64x32xf16> -> tensor<64x32xf32>, tensor<1x32xf32>
  return %s, %m : tensor<64x32xf32>, tensor<1x32xf32>
}

// -----

// Per block: absmax over both axes, scale = absmax / 127 (correctly
// rounded without a divide: a * RN(1/127), then one FMA correction with the
// exact residual; an infinite absmax keeps its infinite scale), flushed to 0
// below the smallest normal float, inv = 1 / scale except for a zero scale,
// round half to even. A computed scale needs no clamp: |x * inv| < 127.5.
// CHECK-LABEL: func.func @quantize_per_block
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-DAG: %[[ONE:.*]] = arith.constant dense<1.000000e+00> : tensor<1x1xf32>
// CHECK-DAG: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : tensor<1x1xf32>
// CHECK-DAG: %[[Q:.*]] = arith.constant dense<1.270000e+02> : tensor<1x1xf32>
// CHECK-DAG: %[[C:.*]] = arith.constant dense<0.00787401571> : tensor<1x1xf32>
// CHECK-DAG: %[[INF:.*]] = arith.constant dense<0x7F800000> : tensor<1x1xf32>
// CHECK-DAG: %[[MIN:.*]] = arith.constant dense<1.17549435E-38> : tensor<1x1xf32>
// CHECK: %[[A0:.*]] = sage.reduce absmax %[[X]] axis 0 : tensor<4x8xf32> -> tensor<1x8xf32>
// CHECK: %[[A1:.*]] = sage.reduce absmax %[[A0]] axis 1 : tensor<1x8xf32> -> tensor<1x1xf32>
// CHECK: %[[Q0:.*]] = arith.mulf %[[A1]], %[[C]] : tensor<1x1xf32>
// CHECK: %[[NQ:.*]] = arith.negf %[[Q0]]
// CHECK: %[[RES:.*]] = math.fma %[[NQ]], %[[Q]], %[[A1]]
// CHECK: %[[QUO:.*]] = math.fma %[[RES]], %[[C]], %[[Q0]]
// CHECK: %[[ISINF:.*]] = arith.cmpf oeq, %[[A1]], %[[INF]]
// CHECK: %[[QS:.*]] = arith.select %[[ISINF]], %[[INF]], %[[QUO]]
// CHECK: %[[SUB:.*]] = arith.cmpf olt, %[[QS]], %[[MIN]]
// CHECK: %[[SCALE:.*]] = arith.select %[[SUB]], %[[ZERO]], %[[QS]]
// CHECK-NOT: arith.divf %[[A1]]
// CHECK: %[[RCP:.*]] = arith.divf %[[ONE]], %[[SCALE]]
// CHECK: %[[ISZ:.*]] = arith.cmpf oeq, %[[SCALE]], %[[ZERO]]
// CHECK: %[[INV:.*]] = arith.select %[[ISZ]], %[[ZERO]], %[[RCP]]
// CHECK: %[[INVB:.*]] = sage.broadcast %[[INV]] : tensor<1x1xf32> -> tensor<4x8xf32>
// CHECK: %[[Y:.*]] = arith.mulf %[[X]], %[[INVB]]
// CHECK: %[[R:.*]] = math.roundeven %[[Y]]
// CHECK-NOT: arith.maximumf
// CHECK-NOT: arith.minimumf
// CHECK: %[[QV:.*]] = arith.fptosi %[[R]] : tensor<4x8xf32> to tensor<4x8xi8>
// CHECK: return %[[QV]], %[[SCALE]]
func.func @quantize_per_block(%x: tensor<4x8xf32>) -> (tensor<4x8xi8>, tensor<1x1xf32>) {
  %q, %s = sage.quantize #sage.int8<per_block> %x : tensor<4x8xf32> -> tensor<4x8xi8>, tensor<1x1xf32>
  return %q, %s : tensor<4x8xi8>, tensor<1x1xf32>
}

// -----

// Per channel: one reduction, over the rows.
// CHECK-LABEL: func.func @quantize_per_channel
// CHECK: %[[A:.*]] = sage.reduce absmax %{{.*}} axis 0 : tensor<4x8xf32> -> tensor<1x8xf32>
// CHECK-NOT: sage.reduce
// CHECK: math.fma %{{.*}}, %{{.*}}, %[[A]] : tensor<1x8xf32>
// CHECK: sage.broadcast %{{.*}} : tensor<1x8xf32> -> tensor<4x8xf32>
func.func @quantize_per_channel(%x: tensor<4x8xf32>) -> (tensor<4x8xi8>, tensor<1x8xf32>) {
  %q, %s = sage.quantize #sage.int8<per_channel> %x : tensor<4x8xf32> -> tensor<4x8xi8>, tensor<1x8xf32>
  return %q, %s : tensor<4x8xi8>, tensor<1x8xf32>
}

// -----

// A given per-row scale: no reduction, no flush; rna rounds half away
// from zero, and the clamp to [-127, 127] stays (the scale is the caller's).
// CHECK-LABEL: func.func @quantize_given_scale_rna
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[S:.*]]: tensor<4x1xf32>)
// CHECK-NOT: sage.reduce
// CHECK-NOT: arith.cmpf olt
// CHECK: arith.divf %{{.*}}, %[[S]] : tensor<4x1xf32>
// CHECK: %[[R:.*]] = math.round %{{.*}} : tensor<4x8xf32>
// CHECK: %[[C0:.*]] = arith.maximumf %[[R]], %{{.*}} : tensor<4x8xf32>
// CHECK: %[[C1:.*]] = arith.minimumf %[[C0]], %{{.*}} : tensor<4x8xf32>
// CHECK: arith.fptosi %[[C1]]
// CHECK: return %{{.*}}, %[[S]]
func.func @quantize_given_scale_rna(%x: tensor<4x8xf32>, %sp: tensor<4x1xf32>) -> (tensor<4x8xi8>, tensor<4x1xf32>) {
  %q, %s = sage.quantize #sage.int8<per_token, rna> %x scale %sp : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xi8>, tensor<4x1xf32>
  return %q, %s : tensor<4x8xi8>, tensor<4x1xf32>
}

// -----

// A one-element granule needs no reduction: absmax is |x|.
// CHECK-LABEL: func.func @quantize_single_column
// CHECK-NOT: sage.reduce
// CHECK: math.absf %{{.*}} : tensor<4x1xf32>
func.func @quantize_single_column(%x: tensor<4x1xf32>) -> (tensor<4x1xi8>, tensor<4x1xf32>) {
  %q, %s = sage.quantize #sage.int8<per_token> %x : tensor<4x1xf32> -> tensor<4x1xi8>, tensor<4x1xf32>
  return %q, %s : tensor<4x1xi8>, tensor<4x1xf32>
}

// -----

// CHECK-LABEL: func.func @dequantize
// CHECK-SAME: (%[[Q:.*]]: tensor<4x8xi8>, %[[S:.*]]: tensor<4x1xf32>)
// CHECK: %[[F:.*]] = arith.sitofp %[[Q]] : tensor<4x8xi8> to tensor<4x8xf32>
// CHECK: %[[B:.*]] = sage.broadcast %[[S]] : tensor<4x1xf32> -> tensor<4x8xf32>
// CHECK: %[[R:.*]] = arith.mulf %[[F]], %[[B]]
// CHECK: return %[[R]]
func.func @dequantize(%q: tensor<4x8xi8>, %s: tensor<4x1xf32>) -> tensor<4x8xf32> {
  %x = sage.dequantize #sage.int8<per_token> %q, %s : tensor<4x8xi8>, tensor<4x1xf32> -> tensor<4x8xf32>
  return %x : tensor<4x8xf32>
}

// -----

// The unsigned scheme: scale absmax / 255 (a divide: 255 is not one of the
// FMA-exact divisors), negative inputs clamped to 0 (also with a computed
// scale), bytes converted as unsigned; given an unsaturated scale, no clamp
// (and the product is not rounded before the rounding: contract).
// CHECK-LABEL: func.func @quantize_unsigned
// CHECK-DAG: %[[QMAX:.*]] = arith.constant dense<2.550000e+02> : tensor<4x1xf32>
// CHECK-DAG: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : tensor<4x8xf32>
// CHECK: %[[A:.*]] = sage.reduce absmax %{{.*}} axis 1 : tensor<4x8xf32> -> tensor<4x1xf32>
// CHECK: arith.divf %[[A]], %[[QMAX]]
// CHECK: %[[R:.*]] = math.roundeven
// CHECK: %[[C:.*]] = arith.maximumf %[[R]], %[[ZERO]]
// CHECK-NOT: arith.minimumf
// CHECK: arith.fptoui %[[C]] : tensor<4x8xf32> to tensor<4x8xi8>
// CHECK-LABEL: func.func @quantize_unsigned_given
// An unsaturated quantize rounds the exact product: its multiply contracts.
// CHECK: arith.mulf %{{.*}}, %{{.*}} fastmath<contract> : tensor<4x8xf32>
// CHECK: %[[R2:.*]] = math.roundeven
// CHECK-NOT: arith.maximumf
// CHECK: arith.fptoui %[[R2]] : tensor<4x8xf32> to tensor<4x8xi8>
// CHECK-LABEL: func.func @dequantize_unsigned
// CHECK: arith.uitofp %{{.*}} : tensor<4x8xi8> to tensor<4x8xf32>
func.func @quantize_unsigned(%x: tensor<4x8xf32>) -> (tensor<4x8xi8>, tensor<4x1xf32>) {
  %q, %s = sage.quantize #sage.uint8<per_token> %x : tensor<4x8xf32> -> tensor<4x8xi8>, tensor<4x1xf32>
  return %q, %s : tensor<4x8xi8>, tensor<4x1xf32>
}
func.func @quantize_unsigned_given(%x: tensor<4x8xf32>, %sp: tensor<4x1xf32>) -> tensor<4x8xi8> {
  %q, %s = sage.quantize #sage.uint8<per_token> %x scale %sp unsaturated : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xi8>, tensor<4x1xf32>
  return %q : tensor<4x8xi8>
}
func.func @dequantize_unsigned(%q: tensor<4x8xi8>, %s: tensor<4x1xf32>) -> tensor<4x8xf32> {
  %x = sage.dequantize #sage.uint8<per_token> %q, %s : tensor<4x8xi8>, tensor<4x1xf32> -> tensor<4x8xf32>
  return %x : tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @softmax_update
// CHECK-SAME: (%[[S:.*]]: tensor<4x8xf32>, %[[M:.*]]: tensor<4x1xf32>, %[[L:.*]]: tensor<4x1xf32>)
// CHECK-DAG: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : tensor<4x1xf32>
// CHECK-DAG: %[[NINF:.*]] = arith.constant dense<0xFF800000> : tensor<4x1xf32>
// CHECK-DAG: %[[SC:.*]] = arith.constant dense<2.500000e-01> : tensor<4x8xf32>
// CHECK: %[[T:.*]] = arith.mulf %[[S]], %[[SC]]
// CHECK: %[[RM:.*]] = sage.reduce max %[[T]] axis 1 : tensor<4x8xf32> -> tensor<4x1xf32>
// CHECK: %[[NM:.*]] = arith.maximumf %[[M]], %[[RM]]
// CHECK: %[[MASKED:.*]] = arith.cmpf oeq, %[[NM]], %[[NINF]]
// CHECK: %[[BASE:.*]] = arith.select %[[MASKED]], %[[ZERO]], %[[NM]]
// CHECK: %[[D:.*]] = arith.subf %[[M]], %[[BASE]]
// CHECK: %[[ALPHA:.*]] = math.exp2 %[[D]]
// CHECK: %[[BB:.*]] = sage.broadcast %[[BASE]] : tensor<4x1xf32> -> tensor<4x8xf32>
// CHECK: %[[TD:.*]] = arith.subf %[[T]], %[[BB]]
// CHECK: %[[P:.*]] = math.exp2 %[[TD]]
// CHECK: %[[RS:.*]] = sage.reduce sum %[[P]] axis 1
// CHECK: %[[AL:.*]] = arith.mulf %[[ALPHA]], %[[L]]
// CHECK: %[[NL:.*]] = arith.addf %[[AL]], %[[RS]]
// CHECK: %[[PMD:.*]] = arith.subf %[[RM]], %[[BASE]]
// CHECK: %[[PM:.*]] = math.exp2 %[[PMD]]
// CHECK: return %[[P]], %[[NM]], %[[NL]], %[[ALPHA]], %[[PM]]
func.func @softmax_update(%s: tensor<4x8xf32>, %m: tensor<4x1xf32>, %l: tensor<4x1xf32>)
    -> (tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>, tensor<4x1xf32>, tensor<4x1xf32>) {
  %p, %m1, %l1, %a, %pm = sage.softmax_update %s, %m, %l scale 0.25 : tensor<4x8xf32>, tensor<4x1xf32>
  return %p, %m1, %l1, %a, %pm : tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>, tensor<4x1xf32>, tensor<4x1xf32>
}

// -----

// Scale 1 multiplies nothing; matmuls are primitives and stay.
// CHECK-LABEL: func.func @softmax_unscaled
// CHECK-NOT: arith.mulf %{{.*}}, %{{.*}} : tensor<4x8xf32>
// CHECK: sage.qmatmul
func.func @softmax_unscaled(%q: tensor<4x8xi8>, %s1: tensor<1x1xf32>, %m: tensor<4x1xf32>) -> tensor<4x4xf32> {
  %s = sage.qmatmul %q[%s1], %q[%s1] contract(1, 1) : tensor<4x8xi8>, tensor<1x1xf32>, tensor<4x8xi8>, tensor<1x1xf32> -> tensor<4x4xf32>
  %p, %m1, %l1, %a, %pm = sage.softmax_update %s, %m, %m : tensor<4x4xf32>, tensor<4x1xf32>
  return %p : tensor<4x4xf32>
}
