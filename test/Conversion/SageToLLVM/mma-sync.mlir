// sagegpu.dot on mma.sync: operands stored K-major in shared memory
// (sagegpu-promote-operands), fragments loaded as 32-bit words from there,
// a barrier between the stores and the loads, results in the accumulator.
// RUN: sage-opt %s --sage-select-mma --sagegpu-assign-layouts --sagegpu-promote-operands --sagegpu-allocate-shared-memory --sagegpu-insert-barriers --convert-sage-to-llvm --canonicalize --cse | FileCheck %s
// RUN: sage-opt %s --sage-select-mma | FileCheck %s --check-prefix=SELECT

module attributes {sage.num_warps = 4 : i32} {
// SELECT-LABEL: func.func @s_equals_qkt
// SELECT: contract(1, 1) using mma_sync
// CHECK-LABEL: func.func @s_equals_qkt
// CHECK-SAME: sage.shared_memory
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : vector<4xi8>, !llvm.ptr<3>
// CHECK: nvvm.barrier0
// CHECK: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<3> -> i32
// CHECK: nvvm.mma.sync A[{{.*}}] B[{{.*}}] C[{{.*}}] {intOverflowBehavior = #nvvm.mma_int_overflow<wrapped>, layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<s8>, multiplicandBPtxType = #nvvm.mma_type<s8>, shape = #nvvm.shape<m = 16, n = 8, k = 32>} : (i32, i32, i32) -> !llvm.struct<(i32, i32, i32, i32)>
// CHECK: arith.sitofp %{{.*}} : i32 to f32
func.func @s_equals_qkt(%q: tensor<64x128xi8>, %sq: tensor<1x1xf32>, %k: tensor<64x128xi8>, %sk: tensor<1x1xf32>) -> tensor<64x64xf32> {
  %s = sage.qmatmul %q[%sq], %k[%sk] contract(1, 1) : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  return %s : tensor<64x64xf32>
}

// 64x64 output over 4 warps (each 16 rows x 8 blocks of 8), K = 128 in 4
// steps: 32 mma.sync per warp.
// CHECK-LABEL: func.func @count
// CHECK-COUNT-32: nvvm.mma.sync
// CHECK-NOT: nvvm.mma.sync
func.func @count(%q: tensor<64x128xi8>, %sq: tensor<1x1xf32>, %k: tensor<64x128xi8>, %sk: tensor<1x1xf32>) -> tensor<64x64xf32> {
  %s = sage.qmatmul %q[%sq], %k[%sk] contract(1, 1) : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  return %s : tensor<64x64xf32>
}

// dP = dO V^T in f16, accumulated in f32.
// CHECK-LABEL: func.func @dp
// CHECK: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<3> -> vector<2xf16>
// CHECK: nvvm.mma.sync {{.*}}shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (vector<2xf16>, vector<2xf16>, f32) -> !llvm.struct<(f32, f32, f32, f32)>
func.func @dp(%do: tensor<64x128xf16>, %v: tensor<64x128xf16>) -> tensor<64x64xf32> {
  %dp = sage.matmul %do, %v contract(1, 1) : tensor<64x128xf16>, tensor<64x128xf16> -> tensor<64x64xf32>
  return %dp : tensor<64x64xf32>
}

// A register A (the rhs_sigma16 PV): P from the accumulator is packed into
// A words in registers; only B is loaded from shared memory (16 words per
// 16-row block and K step, none for A).
// CHECK-LABEL: func.func @pv_sigma16
// CHECK: llvm.bitcast %{{.*}} : vector<4xi8> to i32
// CHECK: nvvm.mma.sync A[{{.*}}] B[{{.*}}] C[{{.*}}] {{.*}}shape = #nvvm.shape<m = 16, n = 8, k = 32>}
func.func @pv_sigma16(%x: tensor<64x64xf32>, %vt: tensor<64x64xi8>, %s: tensor<1x1xf32>) -> tensor<64x64xf32> {
  %y = sage.qmatmul %vt[%s], %vt[%s] contract(1, 1) : tensor<64x64xi8>, tensor<1x1xf32>, tensor<64x64xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  %p = arith.fptosi %y : tensor<64x64xf32> to tensor<64x64xi8>
  %o = sage.qmatmul %p[%s], %vt[%s] contract(1, 1) rhs_sigma16 : tensor<64x64xi8>, tensor<1x1xf32>, tensor<64x64xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  return %o : tensor<64x64xf32>
}

// An unsigned lhs: u8 x s8.
// CHECK-LABEL: func.func @unsigned_lhs
// CHECK: nvvm.mma.sync {{.*}}multiplicandAPtxType = #nvvm.mma_type<u8>, multiplicandBPtxType = #nvvm.mma_type<s8>
func.func @unsigned_lhs(%p: tensor<64x64xi8>, %vt: tensor<64x64xi8>, %s: tensor<1x1xf32>) -> tensor<64x64xf32> {
  %o = sage.qmatmul %p[%s], %vt[%s] contract(1, 1) lhs_unsigned : tensor<64x64xi8>, tensor<1x1xf32>, tensor<64x64xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  return %o : tensor<64x64xf32>
}

// bf16 operands are passed as i32 words.
// CHECK-LABEL: func.func @dp_bf16
// CHECK: nvvm.mma.sync {{.*}}multiplicandAPtxType = #nvvm.mma_type<bf16>{{.*}} : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
func.func @dp_bf16(%do: tensor<64x64xbf16>, %v: tensor<64x64xbf16>) -> tensor<64x64xf32> {
  %dp = sage.matmul %do, %v contract(1, 1) : tensor<64x64xbf16>, tensor<64x64xbf16> -> tensor<64x64xf32>
  return %dp : tensor<64x64xf32>
}
}
