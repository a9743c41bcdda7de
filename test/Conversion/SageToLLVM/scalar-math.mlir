// Math the NVPTX backend cannot select is rewritten (log2 -> lg2.approx,
// exp2 -> ex2.approx.ftz, exp and log in base 2) or rejected with a diagnostic; LLVM would abort
// the whole process on it.
// RUN: sage-opt %s --split-input-file --verify-diagnostics --sagegpu-assign-layouts --convert-sage-to-llvm | FileCheck %s

module attributes {sage.num_warps = 4 : i32} {
// CHECK-LABEL: func.func @natural
func.func @natural(%x: tensor<16x1xf32>) -> tensor<16x1xf32> {
  // exp(x) = exp2(x * log2(e)).
  // CHECK-DAG: %[[LOG2E:.*]] = arith.constant 1.44269502 : f32
  // CHECK-DAG: %[[LN2:.*]] = arith.constant 0.693147182 : f32
  // CHECK: %[[S:.*]] = arith.mulf %{{.*}}, %[[LOG2E]] : f32
  // exp2(x) = ex2.approx.ftz.
  // CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"(%[[S]]) : (f32) -> f32
  %e = math.exp %x : tensor<16x1xf32>
  // log(x) = log2(x) * ln(2).
  // CHECK: %[[L:.*]] = llvm.call_intrinsic "llvm.nvvm.lg2.approx.f"
  // CHECK: arith.mulf %[[L]], %[[LN2]] : f32
  %l = math.log %e : tensor<16x1xf32>
  return %l : tensor<16x1xf32>
}
}

// -----

module attributes {sage.num_warps = 4 : i32} {
func.func @unsupported(%x: tensor<16x1xf32>) -> tensor<16x1xf32> {
  // expected-error @+1 {{failed to legalize operation 'math.tanh'}}
  %t = math.tanh %x : tensor<16x1xf32>
  return %t : tensor<16x1xf32>
}
}
