// sagegpu-warp-specialize: a loop marked sage.warp_specialize gets a TMA
// producer warpgroup; the consumers (the kernel's warps) wait for full
// slots and free them on "empty" mbarriers.
// RUN: sage-opt %s --split-input-file --sage-select-mma --sagegpu-assign-layouts --loop-invariant-code-motion --sagegpu-promote-operands --loop-invariant-code-motion --canonicalize --cse --sagegpu-warp-specialize --sagegpu-pipeline --canonicalize | FileCheck %s
// RUN: sage-opt %s --split-input-file --sage-select-mma --sagegpu-assign-layouts --loop-invariant-code-motion --sagegpu-promote-operands --loop-invariant-code-motion --canonicalize --cse --sagegpu-warp-specialize="producer-registers=24" | FileCheck %s --check-prefix=REGS

module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
// The rings (a full mbarrier ring per copy, one arrival each) and the empty
// ring (every consumer thread arrives: 128) are set up before the split.
// CHECK-LABEL: func.func @in_flight
// CHECK: %[[RA:.*]] = sagegpu.local_alloc !sagegpu.smem<3x64x128xi8, #shared>
// CHECK-NEXT: %[[FA:.*]] = sagegpu.local_alloc !sagegpu.smem<3xi64>
// CHECK-COUNT-3: sagegpu.mbarrier_init %{{.*}}, 1 :
// CHECK: %[[RB:.*]] = sagegpu.local_alloc !sagegpu.smem<3x128x128xi8, #shared>
// CHECK-NEXT: %[[FB:.*]] = sagegpu.local_alloc !sagegpu.smem<3xi64>
// CHECK-COUNT-3: sagegpu.mbarrier_init %{{.*}}, 1 :
// CHECK: %[[EMPTY:.*]] = sagegpu.local_alloc !sagegpu.smem<3xi64>
// CHECK-COUNT-3: sagegpu.mbarrier_init %{{.*}}, 128 :
// One producer warpgroup at 40 registers a thread; the consumer warpgroup
// takes what is left, at most 240.
// CHECK: sagegpu.warp_specialize producer(registers = 40) {
// The producer builds the maps itself and, each iteration, waits for its
// slot's previous use to be freed (parity flipped: the first S iterations
// pass), then issues both copies into it.
// CHECK: %[[MB:.*]] = sage.make_tensor_map %arg1
// CHECK: %[[MA:.*]] = sage.make_tensor_map %arg0
// CHECK: scf.for %[[J:.*]] = %c0_i32 to %arg3 step %c128_i32 : i32 {
// CHECK-NEXT: %[[IT:.*]] = arith.divui %[[J]], %c128_i32
// CHECK-NEXT: %[[SLOT:.*]] = arith.remui %[[IT]], %c3_i32
// CHECK-NEXT: %[[ROUND:.*]] = arith.divui %[[IT]], %c3_i32
// CHECK-NEXT: %[[PHASE:.*]] = arith.remui %[[ROUND]], %c2_i32
// CHECK-NEXT: %[[FREED:.*]] = arith.xori %[[PHASE]], %c1_i32
// CHECK-NEXT: %[[E:.*]] = sagegpu.ring_slot %[[EMPTY]][%[[SLOT]]]
// CHECK-NEXT: sagegpu.mbarrier_wait %[[E]], %[[FREED]]
// CHECK: %[[A:.*]] = sagegpu.ring_slot %[[RA]][%[[SLOT]]]
// CHECK-NEXT: %[[AF:.*]] = sagegpu.ring_slot %[[FA]][%[[SLOT]]]
// CHECK-NEXT: sagegpu.tma_load %[[MA]][%c0_i64, %{{.*}}], %[[AF]] into %[[A]]
// CHECK: sagegpu.tma_load %[[MB]]
// CHECK-NEXT: } {sage.num_stages = 3 : i32}
// CHECK-NEXT: } consumers(registers = 240) {
// The consumers build no map, wait for both copies of the slot, keep the
// accumulation in flight and free the previous iteration's slot once the
// wait has completed its dot.
// CHECK-NOT: sage.make_tensor_map
// CHECK: %[[TRIPS:.*]] = arith.maxsi
// CHECK: scf.for %[[CJ:.*]] = %c0_i32 to %arg3 step %c128_i32 iter_args
// CHECK: %[[CIT:.*]] = arith.divui %[[CJ]], %c128_i32
// CHECK-NEXT: %[[CSLOT:.*]] = arith.remui %[[CIT]], %c3_i32
// CHECK: sagegpu.mbarrier_wait
// CHECK: sagegpu.mbarrier_wait
// CHECK: %[[DOT:.*]] = sagegpu.dot
// CHECK-NEXT: sagegpu.dot_wait {pendings = 1 : i32}
// CHECK-NEXT: %[[PREV:.*]] = arith.addi %[[CIT]], %c2_i32
// CHECK-NEXT: %[[NOTFIRST:.*]] = arith.cmpi ne, %[[CIT]], %c0_i32
// CHECK-NEXT: scf.if %[[NOTFIRST]] {
// CHECK-NEXT: %[[PSLOT:.*]] = arith.remui %[[PREV]], %c3_i32
// CHECK-NEXT: %[[PE:.*]] = sagegpu.ring_slot %[[EMPTY]][%[[PSLOT]]]
// CHECK-NEXT: sagegpu.mbarrier_arrive %[[PE]]
// CHECK: scf.yield %[[DOT]]
// The last iteration's slot is freed after the loop's last wait.
// CHECK: sagegpu.dot_wait %{{.*}} {pendings = 0 : i32}
// CHECK-NEXT: arith.addi %[[TRIPS]], %c2_i32
// CHECK-NEXT: arith.cmpi ne, %[[TRIPS]], %c0_i32
// CHECK-NEXT: scf.if
// CHECK: sagegpu.mbarrier_arrive
// CHECK: sage.store
// CHECK-COUNT-9: sagegpu.mbarrier_inval
// CHECK-NEXT: }
// CHECK-NEXT: return
// REGS: sagegpu.warp_specialize producer(registers = 24)
// REGS: consumers(registers = 240)
func.func @in_flight(%a: !sage.ptr<i8> {sage.alignment = 16 : i64},
                     %b: !sage.ptr<i8> {sage.alignment = 16 : i64},
                     %c: !sage.ptr<i32> {sage.alignment = 16 : i64},
                     %k: i32 {sage.divisibility = 16 : i64},
                     %n: i64 {sage.divisibility = 16 : i64}) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i32
  %c0l = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c128 = arith.constant 128 : i32
  %z = arith.constant dense<0> : tensor<64x128xi32>
  %r = scf.for %j = %c0 to %k step %c128 iter_args(%acc = %z) -> (tensor<64x128xi32>) : i32 {
    %jj = arith.extsi %j : i32 to i64
    %at = sage.load %a[%c0l, %jj] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    %bt = sage.load %b[%c0l, %jj] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<128x128xi8>
    %p = sage.matmul %at, %bt acc %acc contract(1, 1) : tensor<64x128xi8>, tensor<128x128xi8> -> tensor<64x128xi32>
    scf.yield %p : tensor<64x128xi32>
  } {sage.num_stages = 3 : i32, sage.warp_specialize}
  sage.store %r, %c[%c0l, %c0l] strides [%n, %c1] bounds [%n, %n] : tensor<64x128xi32>, !sage.ptr<i32>
  return
}
}

// -----

module attributes {sage.target = "sm_90a", sage.num_warps = 8 : i32} {
// A persistent kernel: the loop over tiles runs in both roles, each
// carrying the count of iterations that used the rings (slot and phase
// continue across tiles); the producer recomputes the tile's row.
// CHECK-LABEL: func.func @persistent
// CHECK: sagegpu.mbarrier_init %{{.*}}, 256 :
// CHECK: sagegpu.warp_specialize producer(registers = 40) {
// CHECK: %[[PID:.*]] = sage.program_id 0
// CHECK: %[[GRID:.*]] = sage.num_programs 0
// CHECK: scf.for %[[T:.*]] = %[[PID]] to %arg4 step %[[GRID]] iter_args(%[[N:.*]] = %c0_i32) -> (i32)
// CHECK: %[[ROW:.*]] = arith.muli %[[T]], %c128_i32
// CHECK: %[[PTRIPS:.*]] = arith.maxsi
// CHECK: scf.for %[[J:.*]] = %c0_i32 to %arg3 step %c64_i32 : i32 {
// CHECK-NEXT: %[[LOCAL:.*]] = arith.divui %[[J]], %c64_i32
// CHECK-NEXT: %[[IT:.*]] = arith.addi %[[N]], %[[LOCAL]]
// CHECK-NEXT: arith.remui %[[IT]], %c2_i32
// CHECK: sagegpu.tma_load
// CHECK: } {sage.num_stages = 2 : i32}
// CHECK-NEXT: %[[NEXT:.*]] = arith.addi %[[N]], %[[PTRIPS]]
// CHECK-NEXT: scf.yield %[[NEXT]] : i32
// CHECK: } consumers(registers = 232) {
// CHECK: scf.for %{{.*}} = %{{.*}} to %arg4 step %{{.*}} iter_args(%[[CN:.*]] = %c0_i32) -> (i32)
// CHECK: %[[CTRIPS:.*]] = arith.maxsi
// CHECK: scf.for
// CHECK: arith.addi %[[CN]], %{{.*}}
// CHECK: sagegpu.mbarrier_arrive
// CHECK: } {sage.num_stages = 2 : i32}
// CHECK: %[[CNEXT:.*]] = arith.addi %[[CN]], %[[CTRIPS]]
// CHECK: sage.store
// CHECK: scf.yield %[[CNEXT]] : i32
func.func @persistent(%a: !sage.ptr<bf16> {sage.alignment = 16 : i64},
                      %b: !sage.ptr<bf16> {sage.alignment = 16 : i64},
                      %c: !sage.ptr<f32> {sage.alignment = 16 : i64},
                      %k: i32 {sage.divisibility = 16 : i64},
                      %tiles: i32, %n: i64 {sage.divisibility = 16 : i64}) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i32
  %c0l = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c64 = arith.constant 64 : i32
  %c128 = arith.constant 128 : i32
  %z = arith.constant dense<0.0> : tensor<128x128xf32>
  %pid = sage.program_id 0
  %grid = sage.num_programs 0
  scf.for %t = %pid to %tiles step %grid : i32 {
    %row = arith.muli %t, %c128 : i32
    %rr = arith.extsi %row : i32 to i64
    %r = scf.for %j = %c0 to %k step %c64 iter_args(%acc = %z) -> (tensor<128x128xf32>) : i32 {
      %jj = arith.extsi %j : i32 to i64
      %at = sage.load %a[%rr, %jj] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<bf16> -> tensor<128x64xbf16>
      %bt = sage.load %b[%c0l, %jj] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<bf16> -> tensor<128x64xbf16>
      %p = sage.matmul %at, %bt acc %acc contract(1, 1) : tensor<128x64xbf16>, tensor<128x64xbf16> -> tensor<128x128xf32>
      scf.yield %p : tensor<128x128xf32>
    } {sage.num_stages = 2 : i32, sage.warp_specialize}
    sage.store %r, %c[%rr, %c0l] strides [%n, %c1] bounds [%n, %n] : tensor<128x128xf32>, !sage.ptr<f32>
  }
  return
}
}

// -----

module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
// A dot completed in its iteration (its result scaled after the wait):
// every iteration frees its own slot at its end.
// CHECK-LABEL: func.func @completed_in_iteration
// CHECK: } consumers(registers = 240) {
// CHECK: scf.for
// CHECK: %[[SLOT:.*]] = arith.remui
// CHECK: sagegpu.dot_wait
// CHECK: %[[E:.*]] = sagegpu.ring_slot %{{.*}}[%[[SLOT]]] : !sagegpu.smem<2xi64>
// CHECK-NEXT: sagegpu.mbarrier_arrive %[[E]]
// CHECK-NEXT: scf.yield
func.func @completed_in_iteration(%a: !sage.ptr<i8> {sage.alignment = 16 : i64},
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
  } {sage.num_stages = 2 : i32, sage.warp_specialize}
  return
}
}

// -----

module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
// Two marked loops of one block (a loop split where a mask starts) share
// one set of rings: the producer runs the second loop's copies after the
// first's, both roles counting on from the first loop's trips.
// CHECK-LABEL: func.func @two_loops_share_rings
// CHECK: sagegpu.local_alloc !sagegpu.smem<2x64x128xi8
// CHECK: sagegpu.local_alloc !sagegpu.smem<2x128x128xi8
// CHECK-NOT: sagegpu.local_alloc !sagegpu.smem<2x{{(64|128)}}x128xi8
// CHECK: sagegpu.warp_specialize
// CHECK: %[[T1:.*]] = arith.maxsi
// CHECK: scf.for %[[J:.*]] = %c0_i32 to %arg3 step %c128_i32 : i32 {
// CHECK: sagegpu.tma_load
// CHECK: sagegpu.tma_load
// CHECK: } {sage.num_stages = 2 : i32}
// CHECK: scf.for %[[J2:.*]] = %arg3 to %arg4 step %c128_i32 : i32 {
// CHECK: %[[L2:.*]] = arith.divui
// CHECK-NEXT: %[[IT2:.*]] = arith.addi %[[T1]], %[[L2]]
// CHECK-NEXT: arith.remui %[[IT2]], %c2_i32
// CHECK: sagegpu.tma_load
// CHECK: sagegpu.tma_load
// CHECK: } {sage.num_stages = 2 : i32}
// CHECK: consumers
// CHECK: %[[C1:.*]] = arith.maxsi
// CHECK: scf.for
// CHECK: sagegpu.mbarrier_arrive
// CHECK: scf.for
// CHECK: %[[CL2:.*]] = arith.divui
// CHECK-NEXT: arith.addi %[[C1]], %[[CL2]]
// CHECK: sagegpu.mbarrier_arrive
// CHECK-NOT: sage.warp_specialize
func.func @two_loops_share_rings(%a: !sage.ptr<i8> {sage.alignment = 16 : i64},
                                 %b: !sage.ptr<i8> {sage.alignment = 16 : i64},
                                 %c: !sage.ptr<f32> {sage.alignment = 16 : i64},
                                 %k: i32 {sage.divisibility = 16 : i64},
                                 %k2: i32 {sage.divisibility = 16 : i64},
                                 %n: i64 {sage.divisibility = 16 : i64}) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i32
  %c0l = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c128 = arith.constant 128 : i32
  %z = arith.constant dense<0.0> : tensor<64x128xf32>
  %r = scf.for %j = %c0 to %k step %c128 iter_args(%acc = %z) -> (tensor<64x128xf32>) : i32 {
    %jj = arith.extsi %j : i32 to i64
    %at = sage.load %a[%c0l, %jj] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    %bt = sage.load %b[%c0l, %jj] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<128x128xi8>
    %p = sage.matmul %at, %bt contract(1, 1) : tensor<64x128xi8>, tensor<128x128xi8> -> tensor<64x128xi32>
    %f = arith.sitofp %p : tensor<64x128xi32> to tensor<64x128xf32>
    %s = arith.addf %acc, %f : tensor<64x128xf32>
    scf.yield %s : tensor<64x128xf32>
  } {sage.num_stages = 2 : i32, sage.warp_specialize}
  %r2 = scf.for %j = %k to %k2 step %c128 iter_args(%acc = %r) -> (tensor<64x128xf32>) : i32 {
    %jj = arith.extsi %j : i32 to i64
    %at = sage.load %a[%c0l, %jj] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    %bt = sage.load %b[%c0l, %jj] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<128x128xi8>
    %p = sage.matmul %at, %bt contract(1, 1) : tensor<64x128xi8>, tensor<128x128xi8> -> tensor<64x128xi32>
    %f = arith.sitofp %p : tensor<64x128xi32> to tensor<64x128xf32>
    %m = arith.mulf %f, %f : tensor<64x128xf32>
    %s = arith.addf %acc, %m : tensor<64x128xf32>
    scf.yield %s : tensor<64x128xf32>
  } {sage.num_stages = 2 : i32, sage.warp_specialize}
  sage.store %r2, %c[%c0l, %c0l] strides [%n, %c1] bounds [%n, %n] : tensor<64x128xf32>, !sage.ptr<f32>
  return
}
}

// -----

module attributes {sage.target = "sm_90a", sage.num_warps = 8 : i32} {
// Ping-pong: the two consumer warpgroups take turns at the loop's matmuls.
// Warpgroup 1 hands warpgroup 0 the first turn before the loop; each
// iteration waits for its turn before the dot and passes it on after
// issuing it; warpgroup 0 takes the last turn passed after the loop.
// CHECK-LABEL: func.func @ping_pong
// CHECK: consumers
// CHECK: sagegpu.warpgroup_turn {only = 1 : i32, pass, warpgroups = 2 : i32}
// CHECK-NEXT: scf.for
// CHECK: sagegpu.mbarrier_wait
// CHECK: sagegpu.warpgroup_turn {warpgroups = 2 : i32}
// CHECK-NEXT: sagegpu.dot
// CHECK-NEXT: sagegpu.warpgroup_turn {pass, warpgroups = 2 : i32}
// CHECK: scf.yield
// CHECK: sagegpu.warpgroup_turn {only = 0 : i32, warpgroups = 2 : i32}
func.func @ping_pong(%a: !sage.ptr<i8> {sage.alignment = 16 : i64},
                     %b: !sage.ptr<i8> {sage.alignment = 16 : i64},
                     %c: !sage.ptr<f32> {sage.alignment = 16 : i64},
                     %k: i32 {sage.divisibility = 16 : i64},
                     %n: i64 {sage.divisibility = 16 : i64}) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i32
  %c0l = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c128 = arith.constant 128 : i32
  %z = arith.constant dense<0.0> : tensor<128x128xf32>
  %r = scf.for %j = %c0 to %k step %c128 iter_args(%acc = %z) -> (tensor<128x128xf32>) : i32 {
    %jj = arith.extsi %j : i32 to i64
    %at = sage.load %a[%c0l, %jj] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<128x128xi8>
    %bt = sage.load %b[%c0l, %jj] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<128x128xi8>
    %p = sage.matmul %at, %bt contract(1, 1) : tensor<128x128xi8>, tensor<128x128xi8> -> tensor<128x128xi32>
    %f = arith.sitofp %p : tensor<128x128xi32> to tensor<128x128xf32>
    %s = arith.addf %acc, %f : tensor<128x128xf32>
    scf.yield %s : tensor<128x128xf32>
  } {sage.num_stages = 2 : i32, sage.warp_specialize, sage.ping_pong}
  sage.store %r, %c[%c0l, %c0l] strides [%n, %c1] bounds [%n, %n] : tensor<128x128xf32>, !sage.ptr<f32>
  return
}
}
