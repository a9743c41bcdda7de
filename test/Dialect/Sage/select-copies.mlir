// sage-select-copies marks loads that feed a matmul operand for an
// asynchronous global-to-shared copy when 16-byte alignment is proven.
// RUN: sage-opt %s --split-input-file --sage-select-copies | FileCheck %s

module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
// CHECK-LABEL: func.func @eligible
func.func @eligible(%a: !sage.ptr<i8> {sage.alignment = 16 : i64},
                    %b: !sage.ptr<i8> {sage.alignment = 16 : i64},
                    %n: i64 {sage.divisibility = 16 : i64}, %s: tensor<1x1xf32>) -> tensor<64x64xf32> {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c128 = arith.constant 128 : i64
  // An offset pointer stays aligned when its offset is a multiple of 16.
  %off = arith.muli %n, %c128 : i64
  %bh = sage.addptr %b, %off : !sage.ptr<i8>
  // Rows may start anywhere: only the contracted offset must be aligned.
  %row = sage.program_id 0
  %r = arith.extsi %row : i32 to i64
  // CHECK: sage.load {{.*}} via cp_async
  %at = sage.load %a[%r, %c0] strides [%c128, %c1] bounds [%n, %c128] : !sage.ptr<i8> -> tensor<64x128xi8>
  // CHECK: sage.load {{.*}} via cp_async
  %bt = sage.load %bh[%c0, %c0] strides [%n, %c1] bounds [%n, %c128] : !sage.ptr<i8> -> tensor<64x128xi8>
  %c = sage.qmatmul %at[%s], %bt[%s] contract(1, 1) : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  return %c : tensor<64x64xf32>
}

// CHECK-LABEL: func.func @not_eligible
func.func @not_eligible(%a: !sage.ptr<f16> {sage.alignment = 16 : i64},
                        %u: !sage.ptr<f16>, %n: i64, %k: i64,
                        %d: !sage.ptr<f32>) -> tensor<64x64xf32> {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c3 = arith.constant 3 : i64
  %c64 = arith.constant 64 : i64
  // Unit stride along the rows, not along the contraction (a transposed
  // operand): registers.
  // CHECK: sage.load %{{.*}} bounds[%{{.*}}, %{{.*}}] : !sage.ptr<f16>
  %t0 = sage.load %a[%c0, %c0] strides [%c1, %c64] bounds [%n, %c64] : !sage.ptr<f16> -> tensor<64x64xf16>
  // No alignment promise on the pointer.
  // CHECK: sage.load %{{.*}} bounds[%{{.*}}, %{{.*}}] : !sage.ptr<f16>
  %t1 = sage.load %u[%c0, %c0] strides [%c64, %c1] bounds [%n, %c64] : !sage.ptr<f16> -> tensor<64x64xf16>
  %p0 = sage.matmul %t0, %t1 contract(1, 1) : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
  // A row stride of unknown divisibility, and an odd contracted offset.
  // CHECK: sage.load %{{.*}} bounds[%{{.*}}, %{{.*}}] : !sage.ptr<f16>
  %t2 = sage.load %a[%c0, %c0] strides [%k, %c1] bounds [%n, %c64] : !sage.ptr<f16> -> tensor<64x64xf16>
  // CHECK: sage.load %{{.*}} bounds[%{{.*}}, %{{.*}}] : !sage.ptr<f16>
  %t3 = sage.load %a[%c0, %c3] strides [%c64, %c1] bounds [%n, %c64] : !sage.ptr<f16> -> tensor<64x64xf16>
  %p1 = sage.matmul %t2, %t3 contract(1, 1) : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
  // A second use keeps the tile in registers.
  // CHECK: sage.load %{{.*}} bounds[%{{.*}}, %{{.*}}] : !sage.ptr<f16>
  %t4 = sage.load %a[%c0, %c0] strides [%c64, %c1] bounds [%n, %c64] : !sage.ptr<f16> -> tensor<64x64xf16>
  %p2 = sage.matmul %t4, %t4 contract(1, 1) : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
  // A store between the load and the matmul could change the tile.
  // CHECK: sage.load %{{.*}} bounds[%{{.*}}, %{{.*}}] : !sage.ptr<f16>
  %t5 = sage.load %a[%c0, %c0] strides [%c64, %c1] bounds [%n, %c64] : !sage.ptr<f16> -> tensor<64x64xf16>
  sage.store %p2, %d[%c0, %c0] strides [%c64, %c1] bounds [%n, %c64] : tensor<64x64xf32>, !sage.ptr<f32>
  %p3 = sage.matmul %t5, %t1 contract(1, 1) : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
  %r0 = arith.addf %p0, %p1 : tensor<64x64xf32>
  %r1 = arith.addf %r0, %p3 : tensor<64x64xf32>
  return %r1 : tensor<64x64xf32>
}

// A load outside the loop of its matmul is not re-copied every iteration.
// CHECK-LABEL: func.func @hoisted
func.func @hoisted(%a: !sage.ptr<i8> {sage.alignment = 16 : i64}, %n: i64, %s: tensor<1x1xf32>) -> tensor<64x64xf32> {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c64 = arith.constant 64 : i64
  %c128 = arith.constant 128 : i64
  // CHECK: sage.load %{{.*}} bounds[%{{.*}}, %{{.*}}] : !sage.ptr<i8>
  %q = sage.load %a[%c0, %c0] strides [%c128, %c1] bounds [%n, %c128] : !sage.ptr<i8> -> tensor<64x128xi8>
  %z = arith.constant dense<0.0> : tensor<64x64xf32>
  %r = scf.for %j = %c0 to %n step %c64 iter_args(%acc = %z) -> (tensor<64x64xf32>) : i64 {
    // CHECK: sage.load {{.*}} via cp_async
    %k = sage.load %a[%j, %c0] strides [%c128, %c1] bounds [%n, %c128] : !sage.ptr<i8> -> tensor<64x128xi8>
    %p = sage.qmatmul %q[%s], %k[%s] acc %acc contract(1, 1) : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
    scf.yield %p : tensor<64x64xf32>
  }
  return %r : tensor<64x64xf32>
}
}

// -----

// Without a target (sage-attach-target runs first in sage-to-nvvm) nothing
// is chosen.
module {
// CHECK-LABEL: func.func @no_target
func.func @no_target(%a: !sage.ptr<i8> {sage.alignment = 16 : i64}, %n: i64, %s: tensor<1x1xf32>) -> tensor<64x64xf32> {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c128 = arith.constant 128 : i64
  // CHECK-NOT: via cp_async
  %q = sage.load %a[%c0, %c0] strides [%c128, %c1] bounds [%n, %c128] : !sage.ptr<i8> -> tensor<64x128xi8>
  %p = sage.qmatmul %q[%s], %q[%s] contract(1, 1) : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  return %p : tensor<64x64xf32>
}
}

// -----

// On sm_90a, a kernel's loads that feed wgmma operands go through the copy
// engine: each gets a tensor map in its own slot of the global scratch that
// a new last argument points at, built where the view is known (here before
// the loop, whose iterations only move the offsets).
// RUN: sage-opt %s --split-input-file --sage-select-copies | FileCheck %s --check-prefix=TMA
// RUN: sage-opt %s --split-input-file --sage-select-copies=ptx-version=80 | FileCheck %s --check-prefix=PTX80
module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
// CHECK-LABEL: func.func @kernel
// TMA-LABEL: func.func @kernel
// TMA-SAME: %[[N:.*]]: i64 {sage.divisibility = 16 : i64}, %[[S:.*]]: tensor<1x1xf32>, %[[SCRATCH:.*]]: !sage.ptr<i8>)
// TMA-SAME: sage.global_scratch = 256
// TMA: %[[M1:.*]] = sage.make_tensor_map %{{.*}} strides[%{{.*}}, %{{.*}}] bounds[%{{.*}}, %{{.*}}] box [64, 128] inner 1 scratch %[[SCRATCH]][1]
// TMA: scf.for
// TMA: %[[M0:.*]] = sage.make_tensor_map %{{.*}} box [64, 128] inner 1 scratch %[[SCRATCH]][0]
// TMA: sage.load {{.*}} via tma map %[[M0]]
// TMA: sage.load {{.*}} via tma map %[[M1]]
// TMA: sage.qmatmul
// A bound along the contraction that may end inside a 16-byte chunk, and a
// matmul lowered with mma.sync: cp.async.
// TMA: sage.load {{.*}} via cp_async :
// TMA: sage.load {{.*}} via cp_async :
// PTX80-LABEL: func.func @kernel
// PTX80-NOT: make_tensor_map
// PTX80-COUNT-4: via cp_async
func.func @kernel(%a: !sage.ptr<i8> {sage.alignment = 16 : i64},
                  %b: !sage.ptr<i8> {sage.alignment = 16 : i64},
                  %k: i64, %n: i64 {sage.divisibility = 16 : i64},
                  %s: tensor<1x1xf32>) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c64 = arith.constant 64 : i64
  %c128 = arith.constant 128 : i64
  %z = arith.constant dense<0.0> : tensor<64x64xf32>
  %r = scf.for %j = %c0 to %n step %c64 iter_args(%acc = %z) -> (tensor<64x64xf32>) : i64 {
    // This view depends on the loop: its map is built inside.
    %off = arith.muli %j, %n : i64
    %aj = sage.addptr %a, %off : !sage.ptr<i8>
    %at = sage.load %aj[%c0, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    %bt = sage.load %b[%j, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    %p = sage.qmatmul %at[%s], %bt[%s] acc %acc contract(1, 1) using wgmma : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
    %ct = sage.load %a[%j, %c0] strides [%n, %c1] bounds [%n, %k] : !sage.ptr<i8> -> tensor<64x128xi8>
    %dt = sage.load %b[%j, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    %q = sage.qmatmul %ct[%s], %dt[%s] acc %p contract(1, 1) using mma_sync : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
    scf.yield %q : tensor<64x64xf32>
  }
  return
}
}

// -----

// With A from registers (wgmma_reg_a), only B is read through a descriptor:
// B may come by TMA, A goes to its padded rows with cp.async.
module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
// CHECK-LABEL: func.func @reg_a
// TMA-LABEL: func.func @reg_a
// TMA: sage.global_scratch = 128
// TMA: sage.load {{.*}} via cp_async :
// TMA: sage.load {{.*}} via tma map
func.func @reg_a(%a: !sage.ptr<i8> {sage.alignment = 16 : i64},
                 %n: i64 {sage.divisibility = 16 : i64},
                 %s: tensor<1x1xf32>) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %at = sage.load %a[%c0, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
  %bt = sage.load %a[%c0, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
  %p = sage.qmatmul %at[%s], %bt[%s] contract(1, 1) using wgmma_reg_a : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  return
}
}
