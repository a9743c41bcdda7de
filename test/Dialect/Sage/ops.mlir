// Round trip of every sage op, attribute and type: print, re-parse, print
// again, and check the custom assembly.
// RUN: sage-opt %s | sage-opt | FileCheck %s
// RUN: sage-opt %s --mlir-print-op-generic | sage-opt | FileCheck %s

// CHECK: module attributes {sage.num_warps = 4 : i32, sage.target = "sm_90a"}
module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {

// CHECK-LABEL: func.func @program
// CHECK-SAME: attributes {sage.kernel}
func.func @program(%p: !sage.ptr<bf16>, %off: i64) attributes {sage.kernel} {
  // CHECK: sage.program_id 0
  %0 = sage.program_id 0
  // CHECK: sage.num_programs 2
  %1 = sage.num_programs 2
  // CHECK: sage.addptr %{{.*}}, %{{.*}} : !sage.ptr<bf16>
  %2 = sage.addptr %p, %off : !sage.ptr<bf16>
  return
}

// CHECK-LABEL: func.func @counters
func.func @counters(%c: !sage.ptr<i32>, %n: i32) -> i32 {
  // CHECK: %[[OLD:.*]] = sage.counter_add %{{.*}}, %{{.*}} : !sage.ptr<i32>
  %old = sage.counter_add %c, %n : !sage.ptr<i32>
  // CHECK: sage.counter_wait %{{.*}}, %[[OLD]] : !sage.ptr<i32>
  sage.counter_wait %c, %old : !sage.ptr<i32>
  return %old : i32
}

// CHECK-LABEL: func.func @memory
func.func @memory(%src: !sage.ptr<f16>, %dst: !sage.ptr<f32>, %n: i64) {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c64 = arith.constant 64 : i64
  // CHECK: sage.load %{{.*}}[%{{.*}}, %{{.*}}] strides[%{{.*}}, %{{.*}}] bounds[%{{.*}}, %{{.*}}] : !sage.ptr<f16> -> tensor<64x32xf16>
  %t = sage.load %src[%c0, %c0] strides [%c64, %c1] bounds [%n, %c64] : !sage.ptr<f16> -> tensor<64x32xf16>
  // CHECK: sage.load {{.*}} bounds[%{{.*}}, %{{.*}}] sigma16_rows : !sage.ptr<f16> -> tensor<64x32xf16>
  %t16 = sage.load %src[%c0, %c0] strides [%c64, %c1] bounds [%n, %c64] sigma16_rows : !sage.ptr<f16> -> tensor<64x32xf16>
  %f = arith.extf %t : tensor<64x32xf16> to tensor<64x32xf32>
  // CHECK: sage.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] strides[%{{.*}}, %{{.*}}] bounds[%{{.*}}, %{{.*}}] : tensor<64x32xf32>, !sage.ptr<f32>
  sage.store %f, %dst[%c0, %c0] strides [%c64, %c1] bounds [%n, %c64] : tensor<64x32xf32>, !sage.ptr<f32>
  // CHECK: sage.store atomic_add %{{.*}}, %{{.*}}[
  sage.store atomic_add %f, %dst[%c0, %c0] strides [%c64, %c1] bounds [%n, %c64] : tensor<64x32xf32>, !sage.ptr<f32>
  return
}

// CHECK-LABEL: func.func @tiles
func.func @tiles(%x: tensor<64x32xf32>, %s: f32) {
  // CHECK: sage.splat %{{.*}} : f32 -> tensor<64x1xf32>
  %0 = sage.splat %s : f32 -> tensor<64x1xf32>
  // CHECK: sage.iota 1 : tensor<1x32xi32>
  %1 = sage.iota 1 : tensor<1x32xi32>
  // CHECK: sage.broadcast %{{.*}} : tensor<64x1xf32> -> tensor<64x32xf32>
  %2 = sage.broadcast %0 : tensor<64x1xf32> -> tensor<64x32xf32>
  // CHECK: sage.reduce sum %{{.*}} axis 0 : tensor<64x32xf32> -> tensor<1x32xf32>
  %3 = sage.reduce sum %x axis 0 : tensor<64x32xf32> -> tensor<1x32xf32>
  // CHECK: sage.reduce max %{{.*}} axis 1 : tensor<64x32xf32> -> tensor<64x1xf32>
  %4 = sage.reduce max %x axis 1 : tensor<64x32xf32> -> tensor<64x1xf32>
  // CHECK: sage.reduce min
  %5 = sage.reduce min %x axis 1 : tensor<64x32xf32> -> tensor<64x1xf32>
  // CHECK: sage.reduce absmax
  %6 = sage.reduce absmax %x axis 1 : tensor<64x32xf32> -> tensor<64x1xf32>
  // CHECK: sage.reduce max %{{.*}} axis 1 groups 6 : tensor<64x32xf32> -> tensor<64x4xf32>
  %7 = sage.reduce max %x axis 1 groups 6 : tensor<64x32xf32> -> tensor<64x4xf32>
  // CHECK: sage.broadcast %{{.*}} groups 6 : tensor<64x4xf32> -> tensor<64x32xf32>
  %8 = sage.broadcast %7 groups 6 : tensor<64x4xf32> -> tensor<64x32xf32>
  return
}

// CHECK-LABEL: func.func @quant
func.func @quant(%k: tensor<64x128xbf16>, %p: tensor<64x64xf32>, %sp: tensor<64x1xf32>) {
  // CHECK: sage.smooth %{{.*}} axis 0 : tensor<64x128xbf16> -> tensor<64x128xf32>, tensor<1x128xf32>
  %ks, %mean = sage.smooth %k axis 0 : tensor<64x128xbf16> -> tensor<64x128xf32>, tensor<1x128xf32>
  // CHECK: sage.quantize #sage.int8<per_block> %{{.*}} : tensor<64x128xf32> -> tensor<64x128xi8>, tensor<1x1xf32>
  %q0, %s0 = sage.quantize #sage.int8<per_block> %ks : tensor<64x128xf32> -> tensor<64x128xi8>, tensor<1x1xf32>
  // The default rounding (rne) is not printed; rna is.
  // CHECK: sage.quantize #sage.int8<per_token> %{{.*}} : tensor<64x128xbf16> -> tensor<64x128xi8>, tensor<64x1xf32>
  %q1, %s1 = sage.quantize #sage.int8<per_token, rne> %k : tensor<64x128xbf16> -> tensor<64x128xi8>, tensor<64x1xf32>
  // CHECK: sage.quantize #sage.int8<per_channel, rna> %{{.*}} : tensor<64x128xbf16> -> tensor<64x128xi8>, tensor<1x128xf32>
  %q2, %s2 = sage.quantize #sage.int8<per_channel, rna> %k : tensor<64x128xbf16> -> tensor<64x128xi8>, tensor<1x128xf32>
  // CHECK: sage.quantize #sage.int8<per_token> %{{.*}} scale %{{.*}} : tensor<64x64xf32>, tensor<64x1xf32> -> tensor<64x64xi8>, tensor<64x1xf32>
  %q3, %s3 = sage.quantize #sage.int8<per_token> %p scale %sp : tensor<64x64xf32>, tensor<64x1xf32> -> tensor<64x64xi8>, tensor<64x1xf32>
  // CHECK: sage.quantize #sage.int8<per_token> %{{.*}} scale %{{.*}} unsaturated : tensor<64x64xf32>
  %q4, %s4 = sage.quantize #sage.int8<per_token> %p scale %sp unsaturated : tensor<64x64xf32>, tensor<64x1xf32> -> tensor<64x64xi8>, tensor<64x1xf32>
  // CHECK: sage.dequantize #sage.int8<per_block> %{{.*}}, %{{.*}} : tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x128xf32>
  %d = sage.dequantize #sage.int8<per_block> %q0, %s0 : tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x128xf32>
  // The unsigned scheme: i8 storage read as unsigned bytes.
  // CHECK: sage.quantize #sage.uint8<per_token> %{{.*}} scale %{{.*}} unsaturated : tensor<64x64xf32>
  %q5, %s5 = sage.quantize #sage.uint8<per_token, rne> %p scale %sp unsaturated : tensor<64x64xf32>, tensor<64x1xf32> -> tensor<64x64xi8>, tensor<64x1xf32>
  // CHECK: sage.dequantize #sage.uint8<per_token, rna> %{{.*}}, %{{.*}} : tensor<64x64xi8>, tensor<64x1xf32> -> tensor<64x64xf32>
  %d5 = sage.dequantize #sage.uint8<per_token, rna> %q5, %s5 : tensor<64x64xi8>, tensor<64x1xf32> -> tensor<64x64xf32>
  return
}

// The four contraction layouts of SageBwd: S = Q K^T, dV = P^T dO,
// dQ = dS K, and dK = dS^T Q.
// CHECK-LABEL: func.func @matmuls
func.func @matmuls(%q: tensor<64x128xi8>, %sq: tensor<1x1xf32>,
                   %k: tensor<32x128xi8>, %sk: tensor<1x1xf32>,
                   %p: tensor<64x32xi8>, %spr: tensor<64x1xf32>,
                   %do: tensor<64x128xi8>, %acc: tensor<32x128xf32>,
                   %a: tensor<64x128xf16>, %b: tensor<32x128xf16>) {
  // CHECK: sage.qmatmul %{{.*}}[%{{.*}}], %{{.*}}[%{{.*}}] contract(1, 1) : tensor<64x128xi8>, tensor<1x1xf32>, tensor<32x128xi8>, tensor<1x1xf32> -> tensor<64x32xf32>
  %s = sage.qmatmul %q[%sq], %k[%sk] contract(1, 1) : tensor<64x128xi8>, tensor<1x1xf32>, tensor<32x128xi8>, tensor<1x1xf32> -> tensor<64x32xf32>
  // CHECK: sage.qmatmul %{{.*}}[%{{.*}}], %{{.*}}[%{{.*}}] acc %{{.*}} contract(0, 0) : tensor<64x32xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<32x128xf32>
  %dv = sage.qmatmul %p[%sq], %do[%sq] acc %acc contract(0, 0) : tensor<64x32xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<32x128xf32>
  // A per-row scale on the non-contracted dimension (P~ V in the forward).
  // CHECK: contract(1, 0) : tensor<64x32xi8>, tensor<64x1xf32>, tensor<32x128xi8>, tensor<1x1xf32> -> tensor<64x128xf32>
  %o = sage.qmatmul %p[%spr], %k[%sk] contract(1, 0) : tensor<64x32xi8>, tensor<64x1xf32>, tensor<32x128xi8>, tensor<1x1xf32> -> tensor<64x128xf32>
  // An unsigned lhs (a #sage.uint8 P^).
  // CHECK: sage.qmatmul %{{.*}}[%{{.*}}], %{{.*}}[%{{.*}}] contract(1, 0) lhs_unsigned : tensor<64x32xi8>
  %ou = sage.qmatmul %p[%spr], %k[%sk] contract(1, 0) lhs_unsigned : tensor<64x32xi8>, tensor<64x1xf32>, tensor<32x128xi8>, tensor<1x1xf32> -> tensor<64x128xf32>
  // A rhs in sigma16 order (V^T as the pre-pass writes it).
  // CHECK: contract(1, 0) rhs_sigma16 : tensor<64x32xi8>
  %o16 = sage.qmatmul %p[%spr], %k[%sk] contract(1, 0) rhs_sigma16 : tensor<64x32xi8>, tensor<64x1xf32>, tensor<32x128xi8>, tensor<1x1xf32> -> tensor<64x128xf32>
  // CHECK: sage.matmul %{{.*}}, %{{.*}} contract(1, 1) : tensor<64x128xf16>, tensor<32x128xf16> -> tensor<64x32xf32>
  %dp = sage.matmul %a, %b contract(1, 1) : tensor<64x128xf16>, tensor<32x128xf16> -> tensor<64x32xf32>
  // CHECK: sage.matmul %{{.*}}, %{{.*}} acc %{{.*}} contract(0, 0) : tensor<64x128xf16>, tensor<64x128xf16> -> tensor<128x128xf32>
  %z = arith.constant dense<0.0> : tensor<128x128xf32>
  %t = sage.matmul %a, %a acc %z contract(0, 0) : tensor<64x128xf16>, tensor<64x128xf16> -> tensor<128x128xf32>
  // An INT8 GEMM's step: i8 x i8 accumulating in i32, no scales.
  // CHECK: sage.matmul %{{.*}}, %{{.*}} acc %{{.*}} contract(1, 1) : tensor<64x128xi8>, tensor<32x128xi8> -> tensor<64x32xi32>
  %zi = arith.constant dense<0> : tensor<64x32xi32>
  %ti = sage.matmul %q, %k acc %zi contract(1, 1) : tensor<64x128xi8>, tensor<32x128xi8> -> tensor<64x32xi32>
  return
}

// CHECK-LABEL: func.func @softmax
func.func @softmax(%s: tensor<64x32xf32>, %m: tensor<64x1xf32>, %l: tensor<64x1xf32>) {
  // CHECK: sage.softmax_update %{{.*}}, %{{.*}}, %{{.*}} : tensor<64x32xf32>, tensor<64x1xf32>
  %p, %m1, %l1, %a, %pm = sage.softmax_update %s, %m, %l : tensor<64x32xf32>, tensor<64x1xf32>
  // CHECK: sage.softmax_update %{{.*}}, %{{.*}}, %{{.*}} scale 1.275000e-01 : tensor<64x32xf32>, tensor<64x1xf32>
  %p2, %m2, %l2, %a2, %pm2 = sage.softmax_update %s, %m1, %l1 scale 0.1275 : tensor<64x32xf32>, tensor<64x1xf32>
  return
}

}
