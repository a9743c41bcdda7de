// A warp-specialised kernel after sagegpu-warp-specialize: one program-wide
// barrier before the roles split, each role's barriers named for its own
// warps, the producer's first thread as the one that builds maps and issues
// copies, a branch on the warpgroup with the register split, and the
// producer warps recorded for the launch.
// RUN: sage-opt %s --split-input-file --sagegpu-allocate-shared-memory --sagegpu-insert-barriers | FileCheck %s --check-prefix=BARRIERS
// RUN: sage-opt %s --split-input-file --sagegpu-allocate-shared-memory --sagegpu-insert-barriers --convert-sage-to-llvm --canonicalize --cse | FileCheck %s
// RUN: sage-opt %s --split-input-file --sagegpu-allocate-shared-memory --sagegpu-insert-barriers --convert-sage-to-llvm --canonicalize --cse --convert-scf-to-cf --convert-arith-to-llvm --convert-cf-to-llvm --convert-func-to-llvm --reconcile-unrealized-casts --sage-finalize-kernels | FileCheck %s --check-prefix=LAUNCH

#blocked = #sagegpu.blocked<size = [1, 4], threads = [4, 8], warps = [4, 1]>
#shared = #sagegpu.shared<swizzle = 128, bits = 8>
module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
// The mbarriers' set-up is ordered before both roles at one barrier of
// every thread; inside the consumers a local store and its load meet at the
// consumers' barrier; nothing orders the roles but the mbarriers.
// BARRIERS-LABEL: func.func @roles
// BARRIERS: sagegpu.mbarrier_init
// BARRIERS-NEXT: sagegpu.barrier
// BARRIERS-NEXT: sagegpu.warp_specialize producer(registers = 40) {
// BARRIERS-NOT: sagegpu.barrier
// BARRIERS: sagegpu.tma_load
// BARRIERS: } consumers(registers = 240) {
// BARRIERS: sagegpu.mbarrier_wait
// BARRIERS-NEXT: sagegpu.local_alloc
// BARRIERS-NEXT: sagegpu.barrier
// BARRIERS-NEXT: sagegpu.local_load
// BARRIERS-NEXT: sagegpu.mbarrier_arrive

// CHECK-LABEL: func.func @roles
// CHECK-SAME: sage.producer_warps = 4 : i32
// Each role's leader warp is found at the function's start (the producer's
// first, warp 4, and warp 0, which initialises the mbarrier); a lane of it
// is elected at each one-thread op. Every thread meets once.
// CHECK: %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x
// CHECK: %[[WARP:.*]] = arith.shrui %[[TID]], %c5_i32
// CHECK: %[[UNIFORM4:.*]] = nvvm.shfl.sync idx %c-1_i32, %[[WARP]], %c0_i32, %c31_i32
// CHECK: %[[PRODUCER_WARP:.*]] = arith.cmpi eq, %[[UNIFORM4]], %c4_i32
// CHECK: %[[UNIFORM0:.*]] = nvvm.shfl.sync idx %c-1_i32, %[[WARP]], %c0_i32, %c31_i32
// CHECK: %[[WARP0:.*]] = arith.cmpi eq, %[[UNIFORM0]], %c0_i32
// CHECK-NOT: elect
// CHECK: "{{.*}}@!$2 bra.uni sage_led;{{.*}}elect.sync _|sage_leader, sage_lanes;\0A\09@sage_leader mbarrier.init.shared::cta.b64 [$0], $1;{{.*}}", "r,r,b" %{{.*}}, %c1_i32, %[[WARP0]]
// CHECK: nvvm.barrier0
// The consumer warpgroup (threads below 128) takes registers, the producer
// gives them back.
// CHECK-NEXT: %[[CONSUMER:.*]] = arith.cmpi ult, %[[TID]], %c128_i32
// CHECK-NEXT: scf.if %[[CONSUMER]] {
// CHECK-NEXT: llvm.inline_asm has_side_effects asm_dialect = att "setmaxnreg.inc.sync.aligned.u32 240;"
// CHECK: mbarrier.try_wait.parity
// CHECK: "bar.sync 1, 128;"
// CHECK: "mbarrier.arrive.shared::cta.b64 _, [$0];"
// CHECK: } else {
// CHECK-NEXT: llvm.inline_asm has_side_effects asm_dialect = att "setmaxnreg.dec.sync.aligned.u32 40;"
// The producer's warp 0 (warp 4) assembles the map; its leader arms the
// mbarrier and issues the copy.
// CHECK: arith.cmpi eq, %[[WARP]], %c4_i32
// CHECK: tensormap.cp_fenceproxy
// CHECK: mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;\0A\09@sage_leader cp.async.bulk.tensor.2d{{.*}}", "r,r,r,l,r,r,r,b" %{{.*}}, %c8192_i32, {{.*}}, %[[PRODUCER_WARP]]
// CHECK-NOT: nvvm.barrier0
// CHECK: return

// LAUNCH: llvm.func @roles
// LAUNCH-SAME: nvvm.maxntid = array<i32: 256, 1, 1>
func.func @roles(%a: !sage.ptr<i8>, %n: i64, %t: tensor<64x128xi8, #blocked>,
                 %scratch: !sage.ptr<i8>) attributes {sage.kernel, sage.global_scratch = 128 : i64} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %p0 = arith.constant 0 : i32
  %ring = sagegpu.local_alloc !sagegpu.smem<64x128xi8, #shared>
  %full = sagegpu.local_alloc !sagegpu.smem<1xi64>
  sagegpu.mbarrier_init %full, 1 : !sagegpu.smem<1xi64>
  sagegpu.warp_specialize producer(registers = 40) {
    %m = sage.make_tensor_map %a strides [%n, %c1] bounds [%n, %n] box [64, 128] inner 1 swizzle 128 scratch %scratch[0] : !sage.ptr<i8>, !sage.ptr<i8>
    sagegpu.tma_load %m[%c0, %c0], %full into %ring : !sagegpu.smem<1xi64>, !sagegpu.smem<64x128xi8, #shared>
  } consumers(registers = 240) {
    sagegpu.mbarrier_wait %full, %p0 : !sagegpu.smem<1xi64>
    %own = sagegpu.local_alloc %t : tensor<64x128xi8, #blocked> -> !sagegpu.smem<64x128xi8, #shared>
    %back = sagegpu.local_load %own : !sagegpu.smem<64x128xi8, #shared> -> tensor<64x128xi8, #blocked>
    sagegpu.mbarrier_arrive %full : !sagegpu.smem<1xi64>
  }
  return
}
}

// -----

module attributes {sage.target = "sm_90a", sage.num_warps = 8 : i32} {
// A warpgroup's turn (ping-pong): warpgroup tid / 128 waits at named barrier
// 3 + g, passes the turn at 3 + (g + 1) % 2, 256 threads each; `only`
// predicates it on the warpgroup.
// CHECK-LABEL: func.func @turns
// CHECK: %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x
// CHECK: %[[G:.*]] = llvm.udiv %[[TID]]
// CHECK: "bar.sync $0, 256;", "r,r"
// CHECK: llvm.urem
// CHECK: "bar.arrive $0, 256;", "r,r"
// CHECK: "{\0A.reg .pred p;\0Asetp.eq.u32 p, $1, 1;\0A@p bar.arrive $0, 256;\0A}", "r,r"
func.func @turns() attributes {sage.kernel} {
  sagegpu.warp_specialize producer(registers = 40) {
  } consumers(registers = 232) {
    sagegpu.warpgroup_turn {warpgroups = 2 : i32}
    sagegpu.warpgroup_turn {pass, warpgroups = 2 : i32}
    sagegpu.warpgroup_turn {pass, warpgroups = 2 : i32, only = 1 : i32}
  }
  return
}
}
