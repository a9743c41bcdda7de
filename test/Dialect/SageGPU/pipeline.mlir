// sagegpu-pipeline: the copy-engine copies (TMA, bulk) of a loop with
// sage.num_stages = S go S - 1 iterations ahead, into rings of S buffers and
// mbarriers.
// RUN: sage-opt %s --split-input-file --sage-select-mma --sagegpu-assign-layouts --loop-invariant-code-motion --sagegpu-promote-operands --loop-invariant-code-motion --canonicalize --cse --sagegpu-pipeline --canonicalize | FileCheck %s

module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
// Two stages: the rings and their mbarriers are set up before the loop and
// the first iteration's copies issued there (if the loop runs at all).
// CHECK-LABEL: func.func @two_stages
// CHECK-SAME: %[[LB:[a-z0-9]+]]: i32, %[[UB:[a-z0-9]+]]: i32
// CHECK: %[[MB:.*]] = sage.make_tensor_map %arg1
// CHECK: %[[MA:.*]] = sage.make_tensor_map %arg0
// CHECK: %[[RA:.*]] = sagegpu.local_alloc !sagegpu.smem<2x64x128xi8, #shared>
// CHECK-NEXT: %[[BA:.*]] = sagegpu.local_alloc !sagegpu.smem<2xi64>
// CHECK-NEXT: %[[BA0:.*]] = sagegpu.ring_slot %[[BA]][%c0_i32] : !sagegpu.smem<2xi64> -> !sagegpu.smem<1xi64>
// CHECK-NEXT: sagegpu.mbarrier_init %[[BA0]], 1
// CHECK-NEXT: %[[BA1:.*]] = sagegpu.ring_slot %[[BA]][%c1_i32]
// CHECK-NEXT: sagegpu.mbarrier_init %[[BA1]], 1
// CHECK: %[[RB:.*]] = sagegpu.local_alloc !sagegpu.smem<2x64x128xi8, #shared>
// CHECK-NEXT: %[[BB:.*]] = sagegpu.local_alloc !sagegpu.smem<2xi64>
// CHECK: %[[FIRST:.*]] = arith.cmpi slt, %[[LB]], %[[UB]] : i32
// CHECK-NEXT: scf.if %[[FIRST]] {
// CHECK: %[[A0:.*]] = sagegpu.ring_slot %[[RA]][%c0_i32] : !sagegpu.smem<2x64x128xi8, #shared> -> !sagegpu.smem<64x128xi8, #shared>
// CHECK-NEXT: %[[A0BAR:.*]] = sagegpu.ring_slot %[[BA]][%c0_i32]
// CHECK-NEXT: sagegpu.tma_load %[[MA]][{{.*}}], %[[A0BAR]] into %[[A0]]
// CHECK: sagegpu.tma_load %[[MB]]
// CHECK-NEXT: }
// Iteration it = (j - lb) / 64 reads slot it % 2 at phase (it / 2) % 2 and
// first issues iteration it + 1's copies into slot (it + 1) % 2, both under
// one branch on that iteration existing.
// CHECK: scf.for %[[J:.*]] = %[[LB]] to %[[UB]] step %c64_i32
// CHECK: %[[IT:.*]] = arith.divui %{{.*}}, %c64_i32 : i32
// CHECK-NEXT: %[[SLOT:.*]] = arith.remui %[[IT]], %c2_i32 : i32
// CHECK-NEXT: %[[HALF:.*]] = arith.divui %[[IT]], %c2_i32 : i32
// CHECK-NEXT: %[[PHASE:.*]] = arith.remui %[[HALF]], %c2_i32 : i32
// CHECK: %[[A:.*]] = sagegpu.ring_slot %[[RA]][%[[SLOT]]]
// CHECK: %[[NEXT:.*]] = arith.addi %[[J]], %c64_i32 : i32
// CHECK: %[[NSLOT:.*]] = arith.remui %{{.*}}, %c2_i32 : i32
// CHECK: %[[MORE:.*]] = arith.cmpi slt, %[[NEXT]], %[[UB]] : i32
// CHECK-NEXT: scf.if %[[MORE]] {
// CHECK: sagegpu.ring_slot %[[RA]][%[[NSLOT]]]
// CHECK: sagegpu.tma_load %[[MA]]
// CHECK: sagegpu.ring_slot %[[RB]][%[[NSLOT]]]
// CHECK: sagegpu.tma_load %[[MB]]
// CHECK-NEXT: }
// CHECK-NOT: sagegpu.mbarrier_init
// CHECK: %[[BAR:.*]] = sagegpu.ring_slot %[[BA]][%[[SLOT]]]
// CHECK-NEXT: sagegpu.mbarrier_wait %[[BAR]], %[[PHASE]]
// CHECK: sagegpu.dot %[[A]], %{{.*}} contract(1, 1)
// CHECK-NOT: sagegpu.mbarrier_inval
// CHECK: scf.yield
// CHECK-NEXT: } {sage.num_stages = 2 : i32}
// Every mbarrier is released after the loop.
// CHECK-COUNT-4: sagegpu.mbarrier_inval
func.func @two_stages(%a: !sage.ptr<i8> {sage.alignment = 16 : i64},
                      %b: !sage.ptr<i8> {sage.alignment = 16 : i64},
                      %lb: i32, %ub: i32, %n: i64 {sage.divisibility = 16 : i64},
                      %s: tensor<1x1xf32>) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c64 = arith.constant 64 : i32
  %z = arith.constant dense<0.0> : tensor<64x64xf32>
  %r = scf.for %j = %lb to %ub step %c64 iter_args(%acc = %z) -> (tensor<64x64xf32>) : i32 {
    %jj = arith.extsi %j : i32 to i64
    %at = sage.load %a[%jj, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    %bt = sage.load %b[%jj, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    %p = sage.qmatmul %at[%s], %bt[%s] acc %acc contract(1, 1) using wgmma : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
    scf.yield %p : tensor<64x64xf32>
  } {sage.num_stages = 2 : i32}
  return
}
}

// -----

module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
// Three stages: two iterations' copies before the loop (slots 0 and 1, each
// if its iteration exists), and iteration it issues it + 2's into slot
// (it + 2) % 3.
// CHECK-LABEL: func.func @three_stages
// CHECK: sagegpu.local_alloc !sagegpu.smem<3x64x128xi8, #shared1>
// CHECK-NEXT: sagegpu.local_alloc !sagegpu.smem<3xi64>
// CHECK-COUNT-3: sagegpu.mbarrier_init
// CHECK: %[[FIRST:.*]] = arith.cmpi sgt, %{{.*}}, %c0_i32 : i32
// CHECK-NEXT: scf.if %[[FIRST]] {
// CHECK: sagegpu.ring_slot %{{.*}}[%c0_i32] : !sagegpu.smem<3x64x128xi8, #shared1>
// CHECK: sagegpu.tma_load %{{.*}}[%c0_i64, %c0_i64]
// CHECK: %[[SECOND:.*]] = arith.cmpi sgt, %{{.*}}, %c64_i32 : i32
// CHECK-NEXT: scf.if %[[SECOND]] {
// CHECK: sagegpu.ring_slot %{{.*}}[%c1_i32] : !sagegpu.smem<3x64x128xi8, #shared1>
// CHECK: sagegpu.tma_load %{{.*}}[%c64_i64, %c0_i64]
// CHECK: scf.for
// CHECK: arith.remui %{{.*}}, %c3_i32
// CHECK: arith.addi %{{.*}}, %c128_i32 : i32
// CHECK: sagegpu.tma_load
// CHECK: } {sage.num_stages = 3 : i32}
// CHECK-COUNT-3: sagegpu.mbarrier_inval
func.func @three_stages(%b: !sage.ptr<i8> {sage.alignment = 16 : i64},
                        %ub: i32, %n: i64 {sage.divisibility = 16 : i64},
                        %x: tensor<64x128xi8>, %s: tensor<1x1xf32>) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c0i = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %z = arith.constant dense<0.0> : tensor<64x64xf32>
  %r = scf.for %j = %c0i to %ub step %c64 iter_args(%acc = %z) -> (tensor<64x64xf32>) : i32 {
    %jj = arith.extsi %j : i32 to i64
    %bt = sage.load %b[%jj, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    %p = sage.qmatmul %x[%s], %bt[%s] acc %acc contract(1, 1) using wgmma_reg_a : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
    scf.yield %p : tensor<64x64xf32>
  } {sage.num_stages = 3 : i32}
  return
}
}

// -----

module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
// Without the attribute (or with one stage) nothing changes: the buffer and
// its mbarrier stay per iteration.
// CHECK-LABEL: func.func @one_stage
// CHECK-NOT: sagegpu.ring_slot
// CHECK: scf.for
// CHECK: sagegpu.local_alloc !sagegpu.smem<64x128xi8, #shared1>
// CHECK: sagegpu.mbarrier_init
// CHECK: sagegpu.tma_load
// CHECK: sagegpu.mbarrier_inval
// CHECK-NOT: sagegpu.ring_slot
func.func @one_stage(%b: !sage.ptr<i8> {sage.alignment = 16 : i64},
                     %ub: i32, %n: i64 {sage.divisibility = 16 : i64},
                     %x: tensor<64x128xi8>, %s: tensor<1x1xf32>) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c0i = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %z = arith.constant dense<0.0> : tensor<64x64xf32>
  %r = scf.for %j = %c0i to %ub step %c64 iter_args(%acc = %z) -> (tensor<64x64xf32>) : i32 {
    %jj = arith.extsi %j : i32 to i64
    %bt = sage.load %b[%jj, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    %p = sage.qmatmul %x[%s], %bt[%s] acc %acc contract(1, 1) using wgmma_reg_a : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
    scf.yield %p : tensor<64x64xf32>
  } {sage.num_stages = 1 : i32}
  return
}
}

// -----

module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
// A copy whose coordinate is carried from the last iteration is not known
// ahead: it stays per iteration.
// CHECK-LABEL: func.func @carried_offset
// CHECK-NOT: sagegpu.ring_slot
// CHECK: scf.for
// CHECK: sagegpu.mbarrier_init
// CHECK: sagegpu.tma_load
// CHECK-NOT: sagegpu.ring_slot
func.func @carried_offset(%b: !sage.ptr<i8> {sage.alignment = 16 : i64},
                          %ub: i32, %n: i64 {sage.divisibility = 16 : i64},
                          %x: tensor<64x128xi8>, %s: tensor<1x1xf32>) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c64i = arith.constant 64 : i64
  %c0i = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %z = arith.constant dense<0.0> : tensor<64x64xf32>
  %r:2 = scf.for %j = %c0i to %ub step %c64 iter_args(%acc = %z, %row = %c0) -> (tensor<64x64xf32>, i64) : i32 {
    %bt = sage.load %b[%row, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    %p = sage.qmatmul %x[%s], %bt[%s] acc %acc contract(1, 1) using wgmma_reg_a : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
    %next = arith.addi %row, %c64i : i64
    scf.yield %p, %next : tensor<64x64xf32>, i64
  } {sage.num_stages = 2 : i32}
  return
}
}

// -----

module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
// A GEMM's loop: the one wgmma dot accumulates into the carried value and
// nothing else reads it, so the accumulation stays in flight across
// iterations. The dot's result is carried as it is; after it a dot_wait with
// no operands and pendings = 1 completes the previous iteration's dot, and
// only then is the slot that dot read, (it + 2) % 3, refilled. After the
// loop a dot_wait completes the last dot.
// CHECK-LABEL: func.func @in_flight_accumulator
// CHECK: %[[R:.*]] = scf.for {{.*}} iter_args(%[[ACC:.*]] = %{{.*}}) -> (tensor<64x64xi32, #mma>)
// CHECK: %[[SLOT:.*]] = arith.remui %[[IT:.*]], %c3_i32 : i32
// CHECK: %[[NSLOT:.*]] = arith.remui %{{.*}}, %c3_i32 : i32
// CHECK-NOT: scf.if
// CHECK: sagegpu.mbarrier_wait
// CHECK: %[[D:.*]] = sagegpu.dot %{{.*}}, %{{.*}}, %[[ACC]] contract(1, 1)
// CHECK-NEXT: sagegpu.dot_wait {pendings = 1 : i32}{{$}}
// CHECK-NEXT: scf.if
// CHECK: sagegpu.ring_slot %{{.*}}[%[[NSLOT]]]
// CHECK: sagegpu.tma_load
// CHECK: scf.yield %[[D]] : tensor<64x64xi32, #mma>
// CHECK-NEXT: } {sage.num_stages = 3 : i32}
// CHECK-NEXT: %[[DONE:.*]] = sagegpu.dot_wait %[[R]] {pendings = 0 : i32}
// CHECK: sagegpu.mbarrier_inval
// CHECK: sage.store %[[DONE]]
func.func @in_flight_accumulator(%a: !sage.ptr<i8> {sage.alignment = 16 : i64},
                                 %b: !sage.ptr<i8> {sage.alignment = 16 : i64},
                                 %c: !sage.ptr<i32>,
                                 %ub: i32, %n: i64 {sage.divisibility = 16 : i64}) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c0i = arith.constant 0 : i32
  %c128 = arith.constant 128 : i32
  %z = arith.constant dense<0> : tensor<64x64xi32>
  %r = scf.for %k = %c0i to %ub step %c128 iter_args(%acc = %z) -> (tensor<64x64xi32>) : i32 {
    %kk = arith.extsi %k : i32 to i64
    %at = sage.load %a[%c0, %kk] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    %bt = sage.load %b[%c0, %kk] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    %p = sage.matmul %at, %bt acc %acc contract(1, 1) using wgmma : tensor<64x128xi8>, tensor<64x128xi8> -> tensor<64x64xi32>
    scf.yield %p : tensor<64x64xi32>
  } {sage.num_stages = 3 : i32}
  sage.store %r, %c[%c0, %c0] strides [%n, %c1] bounds [%n, %n] : tensor<64x64xi32>, !sage.ptr<i32>
  return
}
}

// -----

module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
// A qmatmul scales every product: its result is read in the loop (the
// epilogue), so the loop waits for each dot as before.
// CHECK-LABEL: func.func @scaled_accumulator
// CHECK: scf.for
// CHECK: sagegpu.dot
// CHECK-NEXT: sagegpu.dot_wait %{{.*}} {pendings = 0 : i32}
// CHECK-NOT: pendings = 1
// CHECK: } {sage.num_stages = 3 : i32}
func.func @scaled_accumulator(%a: !sage.ptr<i8> {sage.alignment = 16 : i64},
                              %c: !sage.ptr<f32>,
                              %ub: i32, %n: i64 {sage.divisibility = 16 : i64},
                              %s: tensor<1x1xf32>) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c0i = arith.constant 0 : i32
  %c128 = arith.constant 128 : i32
  %z = arith.constant dense<0.0> : tensor<64x64xf32>
  %r = scf.for %k = %c0i to %ub step %c128 iter_args(%acc = %z) -> (tensor<64x64xf32>) : i32 {
    %kk = arith.extsi %k : i32 to i64
    %at = sage.load %a[%c0, %kk] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    %p = sage.qmatmul %at[%s], %at[%s] acc %acc contract(1, 1) using wgmma : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
    scf.yield %p : tensor<64x64xf32>
  } {sage.num_stages = 3 : i32}
  sage.store %r, %c[%c0, %c0] strides [%n, %c1] bounds [%n, %n] : tensor<64x64xf32>, !sage.ptr<f32>
  return
}
}

// -----

module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
// A bulk copy (per-key scales whose view ends with the tile) goes ahead
// with the TMA copies: its own ring of tiles and mbarriers, refilled under
// the same branch, waited for at its slot and phase where it is read.
// CHECK-LABEL: func.func @bulk_scales
// CHECK: %[[RS:.*]] = sagegpu.local_alloc !sagegpu.smem<2x1x128xf32, #shared1>
// CHECK-NEXT: %[[BS:.*]] = sagegpu.local_alloc !sagegpu.smem<2xi64>
// CHECK: scf.if
// CHECK: sagegpu.bulk_load %arg2[%{{.*}}], %{{.*}} into %{{.*}} : !sage.ptr<f32>, !sagegpu.smem<1xi64>, !sagegpu.smem<1x128xf32, #shared1>
// CHECK: scf.for %[[J:[a-z0-9_]+]] =
// CHECK: %[[SLOT:.*]] = arith.remui %{{.*}}, %c2_i32 : i32
// CHECK: %[[PHASE:.*]] = arith.remui %{{.*}}, %c2_i32 : i32
// CHECK: scf.if
// CHECK: sagegpu.tma_load
// CHECK: %[[NS:.*]] = sagegpu.ring_slot %[[RS]][%{{.*}}]
// CHECK-NEXT: %[[NB:.*]] = sagegpu.ring_slot %[[BS]][%{{.*}}]
// CHECK-NEXT: sagegpu.bulk_load %arg2[%{{.*}}], %[[NB]] into %[[NS]]
// CHECK-NEXT: }
// The scales' copy is waited for while the product is in flight, before the
// product's wait; they are read after it.
// CHECK: sagegpu.dot
// CHECK-NEXT: %[[SB:.*]] = sagegpu.ring_slot %[[BS]][%[[SLOT]]]
// CHECK-NEXT: sagegpu.mbarrier_wait %[[SB]], %[[PHASE]]
// CHECK-NEXT: sagegpu.dot_wait
// CHECK-NEXT: arith.sitofp
// CHECK-NEXT: sagegpu.local_load %{{.*}} : !sagegpu.smem<1x128xf32, #shared1>
// CHECK-NOT: sagegpu.mbarrier_inval
// CHECK: } {sage.num_stages = 2 : i32}
func.func @bulk_scales(%a: !sage.ptr<i8> {sage.alignment = 16 : i64},
                       %b: !sage.ptr<i8> {sage.alignment = 16 : i64},
                       %sk: !sage.ptr<f32> {sage.alignment = 16 : i64},
                       %lb: i32 {sage.divisibility = 16 : i64}, %ub: i32,
                       %n: i64 {sage.divisibility = 16 : i64},
                       %s: tensor<1x1xf32>) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c128 = arith.constant 128 : i32
  // A start known to be >= 0: the scales' offsets start inside the view.
  %zero = arith.constant 0 : i32
  %start = arith.maxsi %lb, %zero : i32
  %z = arith.constant dense<0.0> : tensor<64x128xf32>
  %at = sage.load %a[%c0, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
  %r = scf.for %j = %start to %ub step %c128 iter_args(%acc = %z) -> (tensor<64x128xf32>) : i32 {
    %jj = arith.extsi %j : i32 to i64
    %bt = sage.load %b[%jj, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<128x128xi8>
    %e = arith.addi %j, %c128 : i32
    %end = arith.extsi %e : i32 to i64
    %st = sage.load %sk[%jj, %c0] strides [%c1, %c0] bounds [%end, %c1] : !sage.ptr<f32> -> tensor<128x1xf32>
    %p = sage.qmatmul %at[%s], %bt[%st] contract(1, 1) using wgmma : tensor<64x128xi8>, tensor<1x1xf32>, tensor<128x128xi8>, tensor<128x1xf32> -> tensor<64x128xf32>
    %o = arith.addf %acc, %p : tensor<64x128xf32>
    scf.yield %o : tensor<64x128xf32>
  } {sage.num_stages = 2 : i32}
  return
}
}

// -----

module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
// The first copies go as early as the block allows: right after the wait
// for the previous grid (the last op they may not pass), before the work
// that precedes the loop (a global load, arithmetic, a shared-memory tile).
// The loop's bound, computed just before it, moves up with them.
// CHECK-LABEL: func.func @early_copies
// CHECK: sage.load %arg2
// CHECK-NEXT: sage.grid_dependency_wait
// CHECK-NEXT: %[[UB:.*]] = arith.muli %arg3, %c64_i32 : i32
// CHECK: %[[RA:.*]] = sagegpu.local_alloc !sagegpu.smem<2x64x128xi8, #shared>
// CHECK: scf.if
// CHECK: sagegpu.tma_load
// CHECK: sagegpu.tma_load
// CHECK-NEXT: }
// CHECK: arith.mulf
// CHECK: scf.for %{{.*}} = %c0_i32 to %[[UB]] step %c64_i32
func.func @early_copies(%a: !sage.ptr<i8> {sage.alignment = 16 : i64},
                        %b: !sage.ptr<i8> {sage.alignment = 16 : i64},
                        %x: !sage.ptr<f32> {sage.alignment = 16 : i64},
                        %blocks: i32, %n: i64 {sage.divisibility = 16 : i64},
                        %s: tensor<1x1xf32>) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %lb = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %xt = sage.load %x[%c0, %c0] strides [%c1, %c0] bounds [%n, %c1] : !sage.ptr<f32> -> tensor<64x1xf32>
  sage.grid_dependency_wait
  %y = arith.mulf %xt, %xt : tensor<64x1xf32>
  %z = sage.broadcast %y : tensor<64x1xf32> -> tensor<64x64xf32>
  %ub = arith.muli %blocks, %c64 : i32
  %r = scf.for %j = %lb to %ub step %c64 iter_args(%acc = %z) -> (tensor<64x64xf32>) : i32 {
    %jj = arith.extsi %j : i32 to i64
    %at = sage.load %a[%jj, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    %bt = sage.load %b[%jj, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    %p = sage.qmatmul %at[%s], %bt[%s] acc %acc contract(1, 1) using wgmma : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
    scf.yield %p : tensor<64x64xf32>
  } {sage.num_stages = 2 : i32}
  return
}

// A second loop's rings and first copies wait for the first loop's
// release of its mbarriers (mbarrier operations keep their order), and an
// op with a region (the first loop) stops them anyway.
// CHECK-LABEL: func.func @two_loops
// CHECK: scf.for
// CHECK: } {sage.num_stages = 2 : i32}
// CHECK-COUNT-4: sagegpu.mbarrier_inval
// CHECK: sagegpu.local_alloc !sagegpu.smem<2x64x128xi8, #shared>
// CHECK: scf.if
// CHECK: scf.for
func.func @two_loops(%a: !sage.ptr<i8> {sage.alignment = 16 : i64},
                     %b: !sage.ptr<i8> {sage.alignment = 16 : i64},
                     %ub: i32, %n: i64 {sage.divisibility = 16 : i64},
                     %s: tensor<1x1xf32>) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %lb = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %z = arith.constant dense<0.0> : tensor<64x64xf32>
  %r = scf.for %j = %lb to %ub step %c64 iter_args(%acc = %z) -> (tensor<64x64xf32>) : i32 {
    %jj = arith.extsi %j : i32 to i64
    %at = sage.load %a[%jj, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    %bt = sage.load %b[%jj, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    %p = sage.qmatmul %at[%s], %bt[%s] acc %acc contract(1, 1) using wgmma : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
    scf.yield %p : tensor<64x64xf32>
  } {sage.num_stages = 2 : i32}
  %r2 = scf.for %j = %lb to %ub step %c64 iter_args(%acc = %r) -> (tensor<64x64xf32>) : i32 {
    %jj = arith.extsi %j : i32 to i64
    %at = sage.load %a[%jj, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    %bt = sage.load %b[%jj, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    %p = sage.qmatmul %at[%s], %bt[%s] acc %acc contract(1, 1) using wgmma : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
    scf.yield %p : tensor<64x64xf32>
  } {sage.num_stages = 2 : i32}
  return
}

// A store to global memory may be what the copies read: they stay after it.
// CHECK-LABEL: func.func @after_store
// CHECK: sage.grid_dependency_wait
// CHECK: sage.store
// CHECK: sagegpu.local_alloc !sagegpu.smem<2x64x128xi8, #shared>
// CHECK: scf.if
// CHECK: sagegpu.tma_load
// CHECK: scf.for
func.func @after_store(%a: !sage.ptr<i8> {sage.alignment = 16 : i64},
                       %b: !sage.ptr<i8> {sage.alignment = 16 : i64},
                       %x: !sage.ptr<f32> {sage.alignment = 16 : i64},
                       %ub: i32, %n: i64 {sage.divisibility = 16 : i64},
                       %s: tensor<1x1xf32>) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %lb = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %z = arith.constant dense<0.0> : tensor<64x64xf32>
  %one = arith.constant dense<1.0> : tensor<64x1xf32>
  sage.grid_dependency_wait
  sage.store %one, %x[%c0, %c0] strides [%c1, %c0] bounds [%n, %c1] : tensor<64x1xf32>, !sage.ptr<f32>
  %r = scf.for %j = %lb to %ub step %c64 iter_args(%acc = %z) -> (tensor<64x64xf32>) : i32 {
    %jj = arith.extsi %j : i32 to i64
    %at = sage.load %a[%jj, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    %bt = sage.load %b[%jj, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    %p = sage.qmatmul %at[%s], %bt[%s] acc %acc contract(1, 1) using wgmma : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
    scf.yield %p : tensor<64x64xf32>
  } {sage.num_stages = 2 : i32}
  return
}
}
