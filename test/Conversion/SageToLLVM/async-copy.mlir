// A load marked `via cp_async` is not lowered to register loads: the matmul
// that consumes it copies the tile from global to shared memory in 16-byte
// cp.async pieces (zero-filled past the bounds), waits for them, and only
// then multiplies. Both instruction families stage the same way.
// RUN: sage-opt %s --sagegpu-assign-layouts --convert-sage-to-llvm --canonicalize --cse | FileCheck %s
// RUN: sage-opt %s --sagegpu-assign-layouts --convert-sage-to-llvm --canonicalize --cse | FileCheck %s --check-prefix=NOLOAD

module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
// CHECK-LABEL: func.func @qk
// CHECK-SAME: %[[A:.*]]: !llvm.ptr<1> {llvm.align = 16 : i64}
// NOLOAD-LABEL: func.func @qk
// NOLOAD-NOT: ld.global
// NOLOAD: return
func.func @qk(%a: !sage.ptr<i8> {sage.alignment = 16 : i64}, %n: i64 {sage.divisibility = 16 : i64},
              %s: tensor<1x1xf32>) -> tensor<64x64xf32> {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c128 = arith.constant 128 : i64
  %at = sage.load %a[%c0, %c0] strides [%c128, %c1] bounds [%n, %c128] via cp_async : !sage.ptr<i8> -> tensor<64x128xi8>
  %bt = sage.load %a[%c0, %c0] strides [%c128, %c1] bounds [%n, %c128] via cp_async : !sage.ptr<i8> -> tensor<64x128xi8>
  // 2 operands x 64 rows x 8 pieces over 128 threads: 8 copies per thread,
  // each with the bytes left inside the bounds as its source size.
  // CHECK: arith.minsi %{{.*}}, %{{.*}} : i64
  // CHECK: arith.maxsi
  // CHECK-COUNT-8: llvm.inline_asm has_side_effects asm_dialect = att "@$3 cp.async.cg.shared.global [$0], [$1], 16, $2;", "r,l,r,b"
  // CHECK: nvvm.cp.async.commit.group
  // CHECK-NEXT: nvvm.cp.async.wait.group 0
  // CHECK: nvvm.fence.proxy
  // CHECK: nvvm.barrier0
  // CHECK: nvvm.wgmma.mma_async
  %c = sage.qmatmul %at[%s], %bt[%s] contract(1, 1) using wgmma : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  return %c : tensor<64x64xf32>
}
}
