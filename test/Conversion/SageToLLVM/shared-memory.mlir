// Shared tiles lower to addresses in @sage_scratch at their allocated
// offsets. Register tiles are stored and loaded at the offsets the shared
// encoding gives, in vectors where consecutive slots are consecutive bytes;
// cp.async copies 16-byte pieces, zero-filled past the bounds.
// RUN: sage-opt %s --convert-sage-to-llvm --canonicalize --cse | FileCheck %s

#blocked = #sagegpu.blocked<size = [1, 4], threads = [4, 8], warps = [4, 1]>
#shared = #sagegpu.shared<swizzle = 0, bits = 8>
#kmajor0 = #sagegpu.shared<swizzle = 0, bits = 8, inner = 0>
#mma = #sagegpu.mma<mma_sync, warps = [4, 1]>
module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
// Four consecutive bytes of a row per thread: one 32-bit store each (8 of
// them), at offset 2048 of the scratch, and back.
// CHECK-LABEL: func.func @round_trip
// CHECK: llvm.mlir.addressof @sage_scratch
// CHECK-COUNT-8: llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : vector<4xi8>, !llvm.ptr<3>
// CHECK-NOT: llvm.store
// CHECK: nvvm.barrier0
// CHECK-COUNT-8: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<3> -> vector<4xi8>
func.func @round_trip(%t: tensor<64x64xi8, #blocked>) -> tensor<64x64xi8, #blocked> {
  %s = sagegpu.local_alloc %t : tensor<64x64xi8, #blocked> -> {offset = 2048 : i64} !sagegpu.smem<64x64xi8, #shared>
  sagegpu.barrier
  %r = sagegpu.local_load %s : !sagegpu.smem<64x64xi8, #shared> -> tensor<64x64xi8, #blocked>
  return %r : tensor<64x64xi8, #blocked>
}

// With dimension 0 contiguous (an operand contracted over its rows), a
// thread's four bytes of a row land in four places: byte stores.
// CHECK-LABEL: func.func @transposed
// CHECK-COUNT-32: llvm.store %{{.*}}, %{{.*}} {alignment = 1 : i64} : i8, !llvm.ptr<3>
// CHECK-NOT: llvm.store
func.func @transposed(%t: tensor<64x64xi8, #blocked>, %s: !sagegpu.smem<64x64xi8, #kmajor0>) {
  sagegpu.local_store %t, %s : tensor<64x64xi8, #blocked> -> !sagegpu.smem<64x64xi8, #kmajor0>
  return
}

// 64 rows x 8 pieces over 128 threads: 4 cp.async per thread, each with the
// bytes left inside the bounds as its source size, then the group.
// CHECK-LABEL: func.func @copy
// CHECK-SAME: %[[A:.*]]: !llvm.ptr<1> {llvm.align = 16 : i64}
// CHECK: arith.minsi %{{.*}}, %{{.*}} : i64
// CHECK: arith.maxsi
// CHECK-COUNT-4: llvm.inline_asm has_side_effects asm_dialect = att "@$3 cp.async.cg.shared.global [$0], [$1], 16, $2;", "r,l,r,b"
// CHECK-NOT: cp.async.cg
// CHECK: nvvm.cp.async.commit.group
// CHECK-NEXT: nvvm.cp.async.wait.group 1
// The barrier before an async-proxy reader fences the generic writes.
// CHECK-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT: nvvm.barrier0
func.func @copy(%a: !sage.ptr<i8> {sage.alignment = 16 : i64}, %n: i64 {sage.divisibility = 16 : i64}) {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c128 = arith.constant 128 : i64
  %s = sagegpu.local_alloc {offset = 0 : i64} !sagegpu.smem<64x128xi8, #shared>
  sagegpu.async_copy %a[%c0, %c0] strides [%c128, %c1] bounds [%n, %c128] into %s : !sage.ptr<i8> -> !sagegpu.smem<64x128xi8, #shared>
  sagegpu.async_commit_group
  sagegpu.async_wait 1
  sagegpu.barrier {fence_async}
  return
}

// A ring's slot is the ring's address plus the index times the slot's
// bytes: 64 x 128 bytes of a ring at offset 1024, 8 bytes of an mbarrier
// ring at 17408.
// CHECK-LABEL: func.func @ring_slots
// CHECK-SAME: %[[I:.*]]: i32
// CHECK-DAG: %[[TILE:.*]] = llvm.mlir.constant(8192 : i32) : i32
// CHECK-DAG: %[[BAR:.*]] = llvm.mlir.constant(8 : i32) : i32
// CHECK: %[[RING:.*]] = llvm.getelementptr %{{.*}}[1024] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
// CHECK: %[[BARS:.*]] = llvm.getelementptr %{{.*}}[17408] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
// CHECK: %[[OFF:.*]] = llvm.mul %[[I]], %[[TILE]] : i32
// CHECK: llvm.getelementptr %[[RING]][%[[OFF]]] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
// CHECK: %[[BOFF:.*]] = llvm.mul %[[I]], %[[BAR]] : i32
// CHECK: llvm.getelementptr %[[BARS]][%[[BOFF]]] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
func.func @ring_slots(%i: i32) -> tensor<64x128xi8, #blocked> {
  %r = sagegpu.local_alloc {offset = 1024 : i64} !sagegpu.smem<2x64x128xi8, #shared>
  %b = sagegpu.local_alloc {offset = 17408 : i64} !sagegpu.smem<2xi64>
  %t = sagegpu.ring_slot %r[%i] : !sagegpu.smem<2x64x128xi8, #shared> -> !sagegpu.smem<64x128xi8, #shared>
  %m = sagegpu.ring_slot %b[%i] : !sagegpu.smem<2xi64> -> !sagegpu.smem<1xi64>
  %c0 = arith.constant 0 : i32
  sagegpu.mbarrier_wait %m, %c0 : !sagegpu.smem<1xi64>
  %v = sagegpu.local_load %t : !sagegpu.smem<64x128xi8, #shared> -> tensor<64x128xi8, #blocked>
  return %v : tensor<64x128xi8, #blocked>
}
}
