// A barrier does not wait for the tensor cores: writing the shared operands
// of a wgmma still in flight (before the sagegpu.dot_wait that completes it,
// or after a wait that leaves its group in flight) is reported.
// RUN: sage-opt %s --split-input-file --sagegpu-insert-barriers -verify-diagnostics

#blocked = #sagegpu.blocked<size = [1, 4], threads = [4, 8], warps = [4, 1]>
#shared = #sagegpu.shared<swizzle = 0, bits = 8>
#wgmma = #sagegpu.mma<wgmma, warps = [4, 1], n = 64>
module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
func.func @write_in_flight(%t: tensor<64x128xi8, #blocked>, %z: tensor<64x64xi32, #wgmma>) -> tensor<64x64xi32, #wgmma> {
  %a = sagegpu.local_alloc %t : tensor<64x128xi8, #blocked> -> {offset = 0 : i64} !sagegpu.smem<64x128xi8, #shared>
  %d = sagegpu.dot %a, %a, %z contract(1, 1) : !sagegpu.smem<64x128xi8, #shared>, !sagegpu.smem<64x128xi8, #shared> -> tensor<64x64xi32, #wgmma>
  // expected-error @+1 {{writes shared memory that an in-flight wgmma reads: a sagegpu.dot_wait must complete the dot first}}
  sagegpu.local_store %t, %a : tensor<64x128xi8, #blocked> -> !sagegpu.smem<64x128xi8, #shared>
  %w = sagegpu.dot_wait %d {pendings = 0 : i32} : tensor<64x64xi32, #wgmma>
  return %w : tensor<64x64xi32, #wgmma>
}
}

// -----

#blocked = #sagegpu.blocked<size = [1, 4], threads = [4, 8], warps = [4, 1]>
#shared = #sagegpu.shared<swizzle = 0, bits = 8>
#wgmma = #sagegpu.mma<wgmma, warps = [4, 1], n = 64>
module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
func.func @still_pending(%t: tensor<64x128xi8, #blocked>, %z: tensor<64x64xi32, #wgmma>) -> (tensor<64x64xi32, #wgmma>, tensor<64x64xi32, #wgmma>) {
  %a = sagegpu.local_alloc %t : tensor<64x128xi8, #blocked> -> {offset = 0 : i64} !sagegpu.smem<64x128xi8, #shared>
  %b = sagegpu.local_alloc %t : tensor<64x128xi8, #blocked> -> {offset = 8192 : i64} !sagegpu.smem<64x128xi8, #shared>
  %d = sagegpu.dot %a, %a, %z contract(1, 1) : !sagegpu.smem<64x128xi8, #shared>, !sagegpu.smem<64x128xi8, #shared> -> tensor<64x64xi32, #wgmma>
  %e = sagegpu.dot %b, %b, %z contract(1, 1) : !sagegpu.smem<64x128xi8, #shared>, !sagegpu.smem<64x128xi8, #shared> -> tensor<64x64xi32, #wgmma>
  %w = sagegpu.dot_wait %d {pendings = 1 : i32} : tensor<64x64xi32, #wgmma>
  // %a is free: only %e's group may still be in flight.
  sagegpu.local_store %t, %a : tensor<64x128xi8, #blocked> -> !sagegpu.smem<64x128xi8, #shared>
  // expected-error @+1 {{writes shared memory that an in-flight wgmma reads}}
  sagegpu.local_store %t, %b : tensor<64x128xi8, #blocked> -> !sagegpu.smem<64x128xi8, #shared>
  %x = sagegpu.dot_wait %e {pendings = 0 : i32} : tensor<64x64xi32, #wgmma>
  return %w, %x : tensor<64x64xi32, #wgmma>, tensor<64x64xi32, #wgmma>
}
}

// -----

// A ring's slots: a write to slot (i + 1) % 2 while the dot reading slot
// i % 2 is in flight is allowed (a pipelined loop's refill); a write to the
// slot that dot reads is not.
#blocked = #sagegpu.blocked<size = [1, 4], threads = [4, 8], warps = [4, 1]>
#shared = #sagegpu.shared<swizzle = 0, bits = 8>
#wgmma = #sagegpu.mma<wgmma, warps = [4, 1], n = 64>
module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
func.func @ring_slots(%t: tensor<64x128xi8, #blocked>, %z: tensor<64x64xi32, #wgmma>, %i: i32) -> tensor<64x64xi32, #wgmma> {
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %ring = sagegpu.local_alloc {offset = 0 : i64} !sagegpu.smem<2x64x128xi8, #shared>
  %cur = arith.remui %i, %c2 : i32
  %i1 = arith.addi %i, %c1 : i32
  %other = arith.remui %i1, %c2 : i32
  %a = sagegpu.ring_slot %ring[%cur] : !sagegpu.smem<2x64x128xi8, #shared> -> !sagegpu.smem<64x128xi8, #shared>
  %b = sagegpu.ring_slot %ring[%other] : !sagegpu.smem<2x64x128xi8, #shared> -> !sagegpu.smem<64x128xi8, #shared>
  %same = sagegpu.ring_slot %ring[%cur] : !sagegpu.smem<2x64x128xi8, #shared> -> !sagegpu.smem<64x128xi8, #shared>
  %d = sagegpu.dot %a, %a, %z contract(1, 1) : !sagegpu.smem<64x128xi8, #shared>, !sagegpu.smem<64x128xi8, #shared> -> tensor<64x64xi32, #wgmma>
  sagegpu.local_store %t, %b : tensor<64x128xi8, #blocked> -> !sagegpu.smem<64x128xi8, #shared>
  // expected-error @+1 {{writes shared memory that an in-flight wgmma reads}}
  sagegpu.local_store %t, %same : tensor<64x128xi8, #blocked> -> !sagegpu.smem<64x128xi8, #shared>
  %w = sagegpu.dot_wait %d {pendings = 0 : i32} : tensor<64x64xi32, #wgmma>
  return %w : tensor<64x64xi32, #wgmma>
}
}

// -----

// A barrier of all consumer warps inside a ping-pong turn would deadlock.
#blocked = #sagegpu.blocked<size = [1, 4], threads = [4, 8], warps = [8, 1]>
#shared = #sagegpu.shared<swizzle = 0, bits = 8>
module attributes {sage.target = "sm_90a", sage.num_warps = 8 : i32} {
func.func @barrier_in_turn(%t: tensor<64x128xi8, #blocked>) {
  sagegpu.warp_specialize producer(registers = 40) {
  } consumers(registers = 232) {
    sagegpu.warpgroup_turn {warpgroups = 2 : i32}
    %a = sagegpu.local_alloc %t : tensor<64x128xi8, #blocked> -> {offset = 0 : i64} !sagegpu.smem<64x128xi8, #shared>
    // expected-error @+1 {{'sagegpu.barrier' op orders all consumer warps inside a ping-pong turn, which would deadlock}}
    %b = sagegpu.local_load %a : !sagegpu.smem<64x128xi8, #shared> -> tensor<64x128xi8, #blocked>
    sagegpu.warpgroup_turn {pass, warpgroups = 2 : i32}
  }
  return
}
}
