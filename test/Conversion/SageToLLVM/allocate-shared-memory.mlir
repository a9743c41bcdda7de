// sagegpu-allocate-shared-memory: buffers live from their alloc to their
// last use (a use inside a loop keeps them for the whole loop); buffers
// whose lives overlap get disjoint bytes, others share; op scratch lives
// while its op runs.
// RUN: sage-opt %s --sagegpu-allocate-shared-memory=reuse-above=0 | FileCheck %s
// RUN: sage-opt %s --sagegpu-allocate-shared-memory | FileCheck %s --check-prefix=OWN

#blocked = #sagegpu.blocked<size = [1, 4], threads = [4, 8], warps = [4, 1]>
#shared = #sagegpu.shared<swizzle = 0, bits = 8>
#sw = #sagegpu.shared<swizzle = 64, bits = 8>
#mma = #sagegpu.mma<mma_sync, warps = [4, 1]>
#wgmma = #sagegpu.mma<wgmma, warps = [4, 1], n = 64>
module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
// CHECK-LABEL: func.func @liveness
// CHECK-SAME: sage.shared_memory = 24576
// Live across the loop: bytes of its own. The largest buffers are placed
// first.
// CHECK: %[[Q:.*]] = sagegpu.local_alloc %{{.*}} {offset = 0 : i64}
// CHECK: scf.for
// K and V live at the same time inside one trip: disjoint.
// CHECK: %[[K:.*]] = sagegpu.local_alloc %{{.*}} {offset = 8192 : i64}
// CHECK: %[[V:.*]] = sagegpu.local_alloc %{{.*}} {offset = 16384 : i64}
// The reduction's scratch is live only while it runs: it reuses K's bytes
// (dead once the first dot has read it).
// CHECK: sage.reduce max %{{.*}} axis 0 {sagegpu.scratch_offset = 8192 : i64}
// Under the budget (96 KiB by default) nothing shares bytes.
// OWN-LABEL: func.func @liveness
// OWN-SAME: sage.shared_memory = 25600
// OWN: sage.reduce max %{{.*}} axis 0 {sagegpu.scratch_offset = 24576 : i64}
func.func @liveness(%q: tensor<64x128xi8, #blocked>, %k: tensor<64x128xi8, #blocked>,
                    %v: tensor<64x128xi8, #blocked>, %z: tensor<64x64xi32, #mma>,
                    %n: index) -> tensor<64x64xi32, #mma> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %qs = sagegpu.local_alloc %q : tensor<64x128xi8, #blocked> -> !sagegpu.smem<64x128xi8, #shared>
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<64x64xi32, #mma>) {
    %ks = sagegpu.local_alloc %k : tensor<64x128xi8, #blocked> -> !sagegpu.smem<64x128xi8, #shared>
    %vs = sagegpu.local_alloc %v : tensor<64x128xi8, #blocked> -> !sagegpu.smem<64x128xi8, #shared>
    %s = sagegpu.dot %qs, %ks, %acc contract(1, 1) : !sagegpu.smem<64x128xi8, #shared>, !sagegpu.smem<64x128xi8, #shared> -> tensor<64x64xi32, #mma>
    %f = arith.sitofp %s : tensor<64x64xi32, #mma> to tensor<64x64xf32, #mma>
    %m = sage.reduce max %f axis 0 : tensor<64x64xf32, #mma> -> tensor<1x64xf32, #sagegpu.slice<dim = 0, parent = #mma>>
    %o = sagegpu.dot %qs, %vs, %s contract(1, 1) : !sagegpu.smem<64x128xi8, #shared>, !sagegpu.smem<64x128xi8, #shared> -> tensor<64x64xi32, #mma>
    scf.yield %o : tensor<64x64xi32, #mma>
  }
  return %r : tensor<64x64xi32, #mma>
}

// Two mbarriers (8 bytes each) live together: 128 bytes apart, after the
// larger tile; the total is rounded to 128 bytes.
// CHECK-LABEL: func.func @mbarriers
// CHECK-SAME: sage.shared_memory = 1280
// CHECK: sagegpu.local_alloc {offset = 1024 : i64} !sagegpu.smem<1xi64>
// CHECK: sagegpu.local_alloc {offset = 1152 : i64} !sagegpu.smem<1xi64>
// CHECK: sagegpu.local_alloc {offset = 0 : i64} !sagegpu.smem<8x128xi8
func.func @mbarriers() {
  %a = sagegpu.local_alloc !sagegpu.smem<1xi64>
  %b = sagegpu.local_alloc !sagegpu.smem<1xi64>
  %t = sagegpu.local_alloc !sagegpu.smem<8x128xi8, #sagegpu.shared<swizzle = 128, bits = 8>>
  sagegpu.mbarrier_init %a, 1 : !sagegpu.smem<1xi64>
  sagegpu.mbarrier_init %b, 1 : !sagegpu.smem<1xi64>
  %u = sagegpu.local_load %t : !sagegpu.smem<8x128xi8, #sagegpu.shared<swizzle = 128, bits = 8>> -> tensor<8x128xi8, #blocked>
  return
}

// A ring set up before a loop and read through its slots inside it is live
// across the whole loop: a buffer of the loop body gets other bytes. A
// 64-byte swizzle's tiles sit at multiples of their 512-byte atom.
// CHECK-LABEL: func.func @ring
// CHECK: sagegpu.local_alloc {offset = 0 : i64} !sagegpu.smem<2x64x64xi8
// CHECK: scf.for
// CHECK: sagegpu.local_alloc {offset = 8192 : i64} !sagegpu.smem<64x64xi8
func.func @ring(%n: index, %i: i32, %z: tensor<64x64xi32, #mma>) -> tensor<64x64xi32, #mma> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %ring = sagegpu.local_alloc !sagegpu.smem<2x64x64xi8, #sagegpu.shared<swizzle = 64, bits = 8>>
  %r = scf.for %j = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<64x64xi32, #mma>) {
    %other = sagegpu.local_alloc !sagegpu.smem<64x64xi8, #sagegpu.shared<swizzle = 64, bits = 8>>
    %k = sagegpu.ring_slot %ring[%i] : !sagegpu.smem<2x64x64xi8, #sagegpu.shared<swizzle = 64, bits = 8>> -> !sagegpu.smem<64x64xi8, #sagegpu.shared<swizzle = 64, bits = 8>>
    %d = sagegpu.dot %other, %k, %acc contract(1, 1) : !sagegpu.smem<64x64xi8, #sagegpu.shared<swizzle = 64, bits = 8>>, !sagegpu.smem<64x64xi8, #sagegpu.shared<swizzle = 64, bits = 8>> -> tensor<64x64xi32, #mma>
    scf.yield %d : tensor<64x64xi32, #mma>
  }
  return %r : tensor<64x64xi32, #mma>
}

// A dot's splat accumulator is stored once, at the kernel's entry, and read
// in every trip: its 16 bytes are live throughout and no scratch shares
// them, even where buffers share by liveness (the reduction after it, live
// only while it runs and placed first, the larger, takes other bytes).
// CHECK-LABEL: func.func @splat
// CHECK-SAME: sage.shared_memory = 1152
// CHECK: sagegpu.dot {{.*}} {sagegpu.scratch_offset = 1024 : i64}
// CHECK: sage.reduce max %{{.*}} axis 0 {sagegpu.scratch_offset = 0 : i64}
func.func @splat(%q: !sagegpu.smem<64x64xi8, #sw>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %bias = arith.constant dense<1262485504> : tensor<64x64xi32, #wgmma>
  scf.for %i = %c0 to %n step %c1 {
    %s = sagegpu.dot %q, %q, %bias contract(1, 1) : !sagegpu.smem<64x64xi8, #sw>, !sagegpu.smem<64x64xi8, #sw> -> tensor<64x64xi32, #wgmma>
    %w = sagegpu.dot_wait %s {pendings = 0 : i32} : tensor<64x64xi32, #wgmma>
    %m = sage.reduce max %w axis 0 : tensor<64x64xi32, #wgmma> -> tensor<1x64xi32, #sagegpu.slice<dim = 0, parent = #wgmma>>
  }
  return
}
}
