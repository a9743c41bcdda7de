// sagegpu-insert-barriers orders shared-memory accesses of different
// threads: a barrier before an access that overlaps an earlier one since
// the last barrier where either writes.
// RUN: sage-opt %s --split-input-file --sagegpu-insert-barriers | FileCheck %s

#blocked = #sagegpu.blocked<size = [1, 4], threads = [4, 8], warps = [4, 1]>
#shared = #sagegpu.shared<swizzle = 128, bits = 8>
#mma = #sagegpu.mma<mma_sync, warps = [4, 1]>
#wgmma = #sagegpu.mma<wgmma, warps = [4, 1], n = 64>
module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
// Stores to disjoint tiles need nothing; a read of stored bytes waits for
// every writer.
// CHECK-LABEL: func.func @raw
// CHECK: sagegpu.local_alloc %{{.*}} {offset = 0 : i64}
// CHECK-NEXT: sagegpu.local_alloc %{{.*}} {offset = 8192 : i64}
// CHECK-NEXT: sagegpu.barrier
// CHECK-NOT: fence_async
// CHECK-NEXT: sagegpu.dot
func.func @raw(%t: tensor<64x128xi8, #blocked>, %z: tensor<64x64xi32, #mma>) -> tensor<64x64xi32, #mma> {
  %a = sagegpu.local_alloc %t : tensor<64x128xi8, #blocked> -> {offset = 0 : i64} !sagegpu.smem<64x128xi8, #shared>
  %b = sagegpu.local_alloc %t : tensor<64x128xi8, #blocked> -> {offset = 8192 : i64} !sagegpu.smem<64x128xi8, #shared>
  %d = sagegpu.dot %a, %b, %z contract(1, 1) : !sagegpu.smem<64x128xi8, #shared>, !sagegpu.smem<64x128xi8, #shared> -> tensor<64x64xi32, #mma>
  return %d : tensor<64x64xi32, #mma>
}

// wgmma reads through the async proxy: the barrier also fences.
// CHECK-LABEL: func.func @async_proxy
// CHECK: sagegpu.local_alloc
// CHECK-NEXT: sagegpu.barrier {fence_async}
// CHECK-NEXT: sagegpu.dot
func.func @async_proxy(%t: tensor<64x128xi8, #blocked>, %z: tensor<64x64xi32, #wgmma>) -> tensor<64x64xi32, #wgmma> {
  %a = sagegpu.local_alloc %t : tensor<64x128xi8, #blocked> -> {offset = 0 : i64} !sagegpu.smem<64x128xi8, #shared>
  %d = sagegpu.dot %a, %a, %z contract(1, 1) : !sagegpu.smem<64x128xi8, #shared>, !sagegpu.smem<64x128xi8, #shared> -> tensor<64x64xi32, #wgmma>
  %w = sagegpu.dot_wait %d {pendings = 0 : i32} : tensor<64x64xi32, #wgmma>
  return %w : tensor<64x64xi32, #wgmma>
}

// A wgmma reads its operands until the dot_wait that completes it: a
// barrier between the dot and the wait (here for the other tile) does not
// order a later write to them; one after the wait does.
// CHECK-LABEL: func.func @read_until_wait
// CHECK: sagegpu.barrier {fence_async}
// CHECK-NEXT: sagegpu.dot
// CHECK-NEXT: sagegpu.local_load
// CHECK-NEXT: sagegpu.barrier
// CHECK-NEXT: sagegpu.local_store
// CHECK-NEXT: sagegpu.dot_wait
// CHECK-NEXT: sagegpu.barrier
// CHECK-NEXT: sagegpu.local_store
// CHECK-NOT: sagegpu.barrier
// CHECK: return
func.func @read_until_wait(%t: tensor<64x128xi8, #blocked>, %z: tensor<64x64xi32, #wgmma>) -> tensor<64x64xi32, #wgmma> {
  %a = sagegpu.local_alloc %t : tensor<64x128xi8, #blocked> -> {offset = 0 : i64} !sagegpu.smem<64x128xi8, #shared>
  %b = sagegpu.local_alloc {offset = 8192 : i64} !sagegpu.smem<64x128xi8, #shared>
  %d = sagegpu.dot %a, %a, %z contract(1, 1) : !sagegpu.smem<64x128xi8, #shared>, !sagegpu.smem<64x128xi8, #shared> -> tensor<64x64xi32, #wgmma>
  %r = sagegpu.local_load %b : !sagegpu.smem<64x128xi8, #shared> -> tensor<64x128xi8, #blocked>
  sagegpu.local_store %t, %b : tensor<64x128xi8, #blocked> -> !sagegpu.smem<64x128xi8, #shared>
  %w = sagegpu.dot_wait %d {pendings = 0 : i32} : tensor<64x64xi32, #wgmma>
  sagegpu.local_store %t, %a : tensor<64x128xi8, #blocked> -> !sagegpu.smem<64x128xi8, #shared>
  return %w : tensor<64x64xi32, #wgmma>
}

// A wait that leaves the dot's group in flight does not complete it; a
// second dot reading the same bytes needs no barrier (reads only).
// CHECK-LABEL: func.func @wait_pendings
// CHECK: sagegpu.dot
// CHECK-NEXT: sagegpu.dot
// CHECK-NEXT: sagegpu.dot_wait %{{.*}} {pendings = 1 : i32}
// CHECK-NEXT: sagegpu.dot_wait %{{.*}} {pendings = 0 : i32}
// CHECK-NEXT: sagegpu.barrier
// CHECK-NEXT: sagegpu.local_store
func.func @wait_pendings(%t: tensor<64x128xi8, #blocked>, %z: tensor<64x64xi32, #wgmma>) -> (tensor<64x64xi32, #wgmma>, tensor<64x64xi32, #wgmma>) {
  %a = sagegpu.local_alloc %t : tensor<64x128xi8, #blocked> -> {offset = 0 : i64} !sagegpu.smem<64x128xi8, #shared>
  %d = sagegpu.dot %a, %a, %z contract(1, 1) : !sagegpu.smem<64x128xi8, #shared>, !sagegpu.smem<64x128xi8, #shared> -> tensor<64x64xi32, #wgmma>
  %e = sagegpu.dot %a, %a, %z contract(1, 1) : !sagegpu.smem<64x128xi8, #shared>, !sagegpu.smem<64x128xi8, #shared> -> tensor<64x64xi32, #wgmma>
  %w = sagegpu.dot_wait %d {pendings = 1 : i32} : tensor<64x64xi32, #wgmma>
  %x = sagegpu.dot_wait %e {pendings = 0 : i32} : tensor<64x64xi32, #wgmma>
  sagegpu.local_store %t, %a : tensor<64x128xi8, #blocked> -> !sagegpu.smem<64x128xi8, #shared>
  return %w, %x : tensor<64x64xi32, #wgmma>, tensor<64x64xi32, #wgmma>
}

// A tile stored before the loop and read in it: one barrier before the
// loop. A tile read and then rewritten on the next trip: one barrier in the
// loop, between the last read and the store (the end of a trip meets the
// start of the next).
// CHECK-LABEL: func.func @loop
// CHECK: sagegpu.local_alloc {offset = 8192 : i64}
// CHECK-NEXT: sagegpu.barrier
// CHECK-NEXT: scf.for
// CHECK-NEXT: sagegpu.barrier
// CHECK-NEXT: sagegpu.local_store
// CHECK-NEXT: sagegpu.barrier
// CHECK-NEXT: sagegpu.dot
// CHECK-NOT: sagegpu.barrier
// CHECK: scf.yield
func.func @loop(%t: tensor<64x128xi8, #blocked>, %z: tensor<64x64xi32, #mma>, %n: index) -> tensor<64x64xi32, #mma> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %q = sagegpu.local_alloc %t : tensor<64x128xi8, #blocked> -> {offset = 0 : i64} !sagegpu.smem<64x128xi8, #shared>
  %k = sagegpu.local_alloc {offset = 8192 : i64} !sagegpu.smem<64x128xi8, #shared>
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<64x64xi32, #mma>) {
    sagegpu.local_store %t, %k : tensor<64x128xi8, #blocked> -> !sagegpu.smem<64x128xi8, #shared>
    %d = sagegpu.dot %q, %k, %acc contract(1, 1) : !sagegpu.smem<64x128xi8, #shared>, !sagegpu.smem<64x128xi8, #shared> -> tensor<64x64xi32, #mma>
    scf.yield %d : tensor<64x64xi32, #mma>
  }
  return %r : tensor<64x64xi32, #mma>
}

// TMA: the copy leader arms the mbarrier it initialised (no barrier); everyone
// passes a barrier before waiting on it; the box is visible after the
// wait; the mbarrier is released after a barrier.
// CHECK-LABEL: func.func @tma
// CHECK: sagegpu.mbarrier_init
// CHECK-NEXT: sagegpu.tma_load
// CHECK: sagegpu.barrier
// CHECK-NEXT: sagegpu.mbarrier_wait
// CHECK-NEXT: sagegpu.dot
// CHECK-NEXT: sagegpu.barrier
// CHECK-NEXT: sagegpu.mbarrier_inval
// CHECK-NEXT: sagegpu.dot_wait
func.func @tma(%map: !sage.tensor_map, %i: i64, %z: tensor<64x64xi32, #wgmma>) -> tensor<64x64xi32, #wgmma> {
  %a = sagegpu.local_alloc {offset = 0 : i64} !sagegpu.smem<64x128xi8, #shared>
  %bar = sagegpu.local_alloc {offset = 8192 : i64} !sagegpu.smem<1xi64>
  sagegpu.mbarrier_init %bar, 1 : !sagegpu.smem<1xi64>
  sagegpu.tma_load %map[%i, %i], %bar into %a : !sagegpu.smem<1xi64>, !sagegpu.smem<64x128xi8, #shared>
  %phase = arith.constant 0 : i32
  sagegpu.mbarrier_wait %bar, %phase : !sagegpu.smem<1xi64>
  %d = sagegpu.dot %a, %a, %z contract(1, 1) : !sagegpu.smem<64x128xi8, #shared>, !sagegpu.smem<64x128xi8, #shared> -> tensor<64x64xi32, #wgmma>
  sagegpu.mbarrier_inval %bar : !sagegpu.smem<1xi64>
  %w = sagegpu.dot_wait %d {pendings = 0 : i32} : tensor<64x64xi32, #wgmma>
  return %w : tensor<64x64xi32, #wgmma>
}

// Op scratch counts like a tile: two reductions through the same bytes are
// separated, and so is a branch's write from the read after it.
// CHECK-LABEL: func.func @scratch
// CHECK: sage.reduce
// CHECK-NEXT: sagegpu.barrier
// CHECK-NEXT: sage.reduce
func.func @scratch(%x: tensor<64x64xf32, #mma>) -> (tensor<1x64xf32, #sagegpu.slice<dim = 0, parent = #mma>>, tensor<1x64xf32, #sagegpu.slice<dim = 0, parent = #mma>>) {
  %m = sage.reduce max %x axis 0 {sagegpu.scratch_offset = 0 : i64} : tensor<64x64xf32, #mma> -> tensor<1x64xf32, #sagegpu.slice<dim = 0, parent = #mma>>
  %s = sage.reduce sum %x axis 0 {sagegpu.scratch_offset = 0 : i64} : tensor<64x64xf32, #mma> -> tensor<1x64xf32, #sagegpu.slice<dim = 0, parent = #mma>>
  return %m, %s : tensor<1x64xf32, #sagegpu.slice<dim = 0, parent = #mma>>, tensor<1x64xf32, #sagegpu.slice<dim = 0, parent = #mma>>
}

// CHECK-LABEL: func.func @branch
// CHECK: scf.if
// CHECK-NEXT: sagegpu.local_store
// CHECK: }
// CHECK-NEXT: sagegpu.barrier
// CHECK-NEXT: sagegpu.local_load
func.func @branch(%c: i1, %t: tensor<64x128xi8, #blocked>) -> tensor<64x128xi8, #blocked> {
  %a = sagegpu.local_alloc {offset = 0 : i64} !sagegpu.smem<64x128xi8, #shared>
  scf.if %c {
    sagegpu.local_store %t, %a : tensor<64x128xi8, #blocked> -> !sagegpu.smem<64x128xi8, #shared>
  }
  %r = sagegpu.local_load %a : !sagegpu.smem<64x128xi8, #shared> -> tensor<64x128xi8, #blocked>
  return %r : tensor<64x128xi8, #blocked>
}

// A cp.async copy writes when the wait that completes its group returns: a
// barrier before that (here for the other tile) does not order it, and a
// wait that leaves its group in flight does not either.
// CHECK-LABEL: func.func @copy_in_flight
// CHECK: sagegpu.async_commit_group
// CHECK: sagegpu.barrier
// CHECK-NEXT: sagegpu.local_load %{{.*}} : !sagegpu.smem<64x128xi8, #{{.*}}> -> tensor<64x128xi8, #{{.*}}>
// CHECK-NEXT: sagegpu.async_copy
// CHECK-NEXT: sagegpu.async_commit_group
// CHECK-NEXT: sagegpu.async_wait 1
// CHECK-NEXT: sagegpu.barrier
// CHECK-NEXT: sagegpu.local_load %[[A:.*]] :
// CHECK-NEXT: sagegpu.async_wait 0
// CHECK-NEXT: sagegpu.barrier
// CHECK-NEXT: sagegpu.local_load
func.func @copy_in_flight(%p: !sage.ptr<i8>, %i: i64, %t: tensor<64x128xi8, #blocked>) {
  %a = sagegpu.local_alloc {offset = 0 : i64} !sagegpu.smem<64x128xi8, #shared>
  %b = sagegpu.local_alloc %t : tensor<64x128xi8, #blocked> -> {offset = 8192 : i64} !sagegpu.smem<64x128xi8, #shared>
  %c = sagegpu.local_alloc {offset = 16384 : i64} !sagegpu.smem<64x128xi8, #shared>
  sagegpu.async_copy %p[%i, %i] strides [%i, %i] bounds [%i, %i] into %a : !sage.ptr<i8> -> !sagegpu.smem<64x128xi8, #shared>
  sagegpu.async_commit_group
  %rb = sagegpu.local_load %b : !sagegpu.smem<64x128xi8, #shared> -> tensor<64x128xi8, #blocked>
  sagegpu.async_copy %p[%i, %i] strides [%i, %i] bounds [%i, %i] into %c : !sage.ptr<i8> -> !sagegpu.smem<64x128xi8, #shared>
  sagegpu.async_commit_group
  sagegpu.async_wait 1
  %ra = sagegpu.local_load %a : !sagegpu.smem<64x128xi8, #shared> -> tensor<64x128xi8, #blocked>
  sagegpu.async_wait 0
  %rc = sagegpu.local_load %c : !sagegpu.smem<64x128xi8, #shared> -> tensor<64x128xi8, #blocked>
  return
}

// A pipelined loop: a slot is refilled by TMA at the top of an iteration
// while the previous iteration's dot read the other slot of the same ring.
// A slot counts as its whole ring, so a barrier orders the refill after
// every warp's reads; the dot reads the slot the mbarrier made visible
// without one.
// CHECK-LABEL: func.func @ring_refill
// CHECK: scf.for
// CHECK: scf.if
// CHECK: sagegpu.barrier
// CHECK-NEXT: sagegpu.tma_load
// CHECK: sagegpu.mbarrier_wait
// CHECK-NEXT: sagegpu.dot
// CHECK-NEXT: sagegpu.dot_wait
func.func @ring_refill(%map: !sage.tensor_map, %n: index, %go: i1, %i: i32, %next: i32,
                       %phase: i32, %z: tensor<64x64xi32, #wgmma>) -> tensor<64x64xi32, #wgmma> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = arith.constant 0 : i64
  %ring = sagegpu.local_alloc {offset = 0 : i64} !sagegpu.smem<2x64x128xi8, #shared>
  %bars = sagegpu.local_alloc {offset = 16384 : i64} !sagegpu.smem<2xi64>
  %r = scf.for %j = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<64x64xi32, #wgmma>) {
    scf.if %go {
      %t = sagegpu.ring_slot %ring[%next] : !sagegpu.smem<2x64x128xi8, #shared> -> !sagegpu.smem<64x128xi8, #shared>
      %b = sagegpu.ring_slot %bars[%next] : !sagegpu.smem<2xi64> -> !sagegpu.smem<1xi64>
      sagegpu.tma_load %map[%x, %x], %b into %t : !sagegpu.smem<1xi64>, !sagegpu.smem<64x128xi8, #shared>
    }
    %a = sagegpu.ring_slot %ring[%i] : !sagegpu.smem<2x64x128xi8, #shared> -> !sagegpu.smem<64x128xi8, #shared>
    %bar = sagegpu.ring_slot %bars[%i] : !sagegpu.smem<2xi64> -> !sagegpu.smem<1xi64>
    sagegpu.mbarrier_wait %bar, %phase : !sagegpu.smem<1xi64>
    %d = sagegpu.dot %a, %a, %acc contract(1, 1) : !sagegpu.smem<64x128xi8, #shared>, !sagegpu.smem<64x128xi8, #shared> -> tensor<64x64xi32, #wgmma>
    %w = sagegpu.dot_wait %d {pendings = 0 : i32} : tensor<64x64xi32, #wgmma>
    scf.yield %w : tensor<64x64xi32, #wgmma>
  }
  return %r : tensor<64x64xi32, #wgmma>
}
}
