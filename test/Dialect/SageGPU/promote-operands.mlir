// sagegpu-promote-operands: matmul operands become shared tiles (copied
// straight from global memory when 16-byte alignment is proven), the product
// a sagegpu.dot, and the scales ordinary tile ops.
// RUN: sage-opt %s --split-input-file --sage-select-mma --sagegpu-assign-layouts --sagegpu-promote-operands | FileCheck %s

// Operand tiles that threads fill are K-major and unswizzled.
// CHECK: #shared = #sagegpu.shared<swizzle = 0, bits = 8>
// CHECK-NEXT: #shared1 = #sagegpu.shared<swizzle = 0, bits = 16>
module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
// The cp.async copy is issued where the load was; its wait and the dot
// come at the matmul. The wgmma is waited for where the result is first
// used (here the return); the epilogue then scales the i32 product: two
// single scales multiply once, then one multiply per element.
// CHECK-LABEL: func.func @eligible
// CHECK: %[[A:.*]] = sagegpu.local_alloc !sagegpu.smem<64x128xi8, #shared>
// CHECK-NEXT: sagegpu.async_copy %{{.*}} into %[[A]]
// CHECK-NEXT: sagegpu.async_commit_group
// CHECK: %[[B:.*]] = sagegpu.local_alloc !sagegpu.smem<64x128xi8, #shared>
// CHECK-NEXT: sagegpu.async_copy %{{.*}} into %[[B]]
// CHECK-NEXT: sagegpu.async_commit_group
// CHECK-NEXT: sagegpu.async_wait 0
// CHECK: %[[D:.*]] = sagegpu.dot %[[A]], %[[B]], %{{.*}} contract(1, 1) : {{.*}} -> tensor<64x64xi32, #mma>
// CHECK-NEXT: %[[W:.*]] = sagegpu.dot_wait %[[D]] {pendings = 0 : i32} : tensor<64x64xi32, #mma>
// CHECK-NEXT: %[[F:.*]] = arith.sitofp %[[W]] : tensor<64x64xi32, #mma> to tensor<64x64xf32, #mma>
// CHECK-NEXT: %[[S:.*]] = arith.mulf %{{.*}}, %{{.*}} fastmath<contract> : tensor<1x1xf32, #blocked>
// CHECK-NEXT: %[[SB:.*]] = sage.broadcast %[[S]] : tensor<1x1xf32, #blocked> -> tensor<64x64xf32, #mma>
// CHECK-NEXT: arith.mulf %[[F]], %[[SB]] fastmath<contract>
// CHECK-NOT: sage.load
// CHECK-NOT: sage.qmatmul
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
  %at = sage.load %a[%r, %c0] strides [%c128, %c1] bounds [%n, %c128] : !sage.ptr<i8> -> tensor<64x128xi8>
  %bt = sage.load %bh[%c0, %c0] strides [%n, %c1] bounds [%n, %c128] : !sage.ptr<i8> -> tensor<64x128xi8>
  %c = sage.qmatmul %at[%s], %bt[%s] contract(1, 1) : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  return %c : tensor<64x64xf32>
}

// Tiles that cannot be copied 16 bytes at a time are stored from registers
// into a shared tile whose contiguous dimension is the contracted one.
// CHECK-LABEL: func.func @not_eligible
// Unit stride along the rows, not along the contraction (a transposed
// operand); no alignment promise on the pointer.
// CHECK: %[[T0:.*]] = sage.load
// CHECK-NEXT: sagegpu.local_alloc %[[T0]] : tensor<64x64xf16, #blocked> -> !sagegpu.smem<64x64xf16, #shared1>
// CHECK-NEXT: %[[T1:.*]] = sage.load
// CHECK-NEXT: sagegpu.local_alloc %[[T1]]
// CHECK: sagegpu.dot
// A row stride of unknown divisibility, and an odd contracted offset.
// CHECK-COUNT-2: sagegpu.local_alloc %{{.*}} : tensor
// CHECK: sagegpu.dot
// A second use keeps the tile in registers; it is stored once.
// CHECK: %[[T4:.*]] = sagegpu.local_alloc %{{.*}} : tensor
// CHECK: sagegpu.dot %[[T4]], %[[T4]]
// A store between the load and the matmul could change the tile.
// CHECK: sagegpu.local_alloc %{{.*}} : tensor
// CHECK: sage.store
// CHECK: sagegpu.dot
// CHECK-NOT: sagegpu.async_copy
// mma.sync is synchronous: no waits.
// CHECK-NOT: sagegpu.dot_wait
// CHECK: return
func.func @not_eligible(%a: !sage.ptr<f16> {sage.alignment = 16 : i64},
                        %u: !sage.ptr<f16>, %n: i64, %k: i64,
                        %d: !sage.ptr<f32>) -> tensor<64x64xf32> {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c3 = arith.constant 3 : i64
  %c64 = arith.constant 64 : i64
  %t0 = sage.load %a[%c0, %c0] strides [%c1, %c64] bounds [%n, %c64] : !sage.ptr<f16> -> tensor<64x64xf16>
  %t1 = sage.load %u[%c0, %c0] strides [%c64, %c1] bounds [%n, %c64] : !sage.ptr<f16> -> tensor<64x64xf16>
  %p0 = sage.matmul %t0, %t1 contract(1, 1) using mma_sync : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
  %t2 = sage.load %a[%c0, %c0] strides [%k, %c1] bounds [%n, %c64] : !sage.ptr<f16> -> tensor<64x64xf16>
  %t3 = sage.load %a[%c0, %c3] strides [%c64, %c1] bounds [%n, %c64] : !sage.ptr<f16> -> tensor<64x64xf16>
  %p1 = sage.matmul %t2, %t3 contract(1, 1) using mma_sync : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
  %t4 = sage.load %a[%c0, %c0] strides [%c64, %c1] bounds [%n, %c64] : !sage.ptr<f16> -> tensor<64x64xf16>
  %p2 = sage.matmul %t4, %t4 contract(1, 1) using mma_sync : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
  %t5 = sage.load %a[%c0, %c0] strides [%c64, %c1] bounds [%n, %c64] : !sage.ptr<f16> -> tensor<64x64xf16>
  sage.store %p2, %d[%c0, %c0] strides [%c64, %c1] bounds [%n, %c64] : tensor<64x64xf32>, !sage.ptr<f32>
  %p3 = sage.matmul %t5, %t1 contract(1, 1) using mma_sync : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
  %r0 = arith.addf %p0, %p1 : tensor<64x64xf32>
  %r1 = arith.addf %r0, %p3 : tensor<64x64xf32>
  return %r1 : tensor<64x64xf32>
}

// A load outside the loop of its matmul is not re-copied every iteration;
// the accumulator operand is added after the scales (the two may fuse into
// an FMA: fastmath<contract>). A matmul onto an accumulator is waited for
// right after its dot (deferred, the partial and the accumulator would both
// be live).
// CHECK-LABEL: func.func @hoisted
// CHECK: %[[Q:.*]] = sage.load
// CHECK-NEXT: sagegpu.local_alloc %[[Q]]
// CHECK: scf.for
// CHECK: sagegpu.async_copy
// CHECK: sagegpu.async_wait 0
// CHECK: %[[D:.*]] = sagegpu.dot
// CHECK-NEXT: sagegpu.dot_wait %[[D]] {pendings = 0 : i32}
// CHECK: sage.broadcast
// CHECK-NEXT: %[[SCALED:.*]] = arith.mulf {{.*}} fastmath<contract>
// CHECK-NEXT: arith.addf %{{.*}}, %[[SCALED]] fastmath<contract>
func.func @hoisted(%a: !sage.ptr<i8> {sage.alignment = 16 : i64}, %n: i64, %s: tensor<1x1xf32>) -> tensor<64x64xf32> {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c64 = arith.constant 64 : i64
  %c128 = arith.constant 128 : i64
  %q = sage.load %a[%c0, %c0] strides [%c128, %c1] bounds [%n, %c128] : !sage.ptr<i8> -> tensor<64x128xi8>
  %z = arith.constant dense<0.0> : tensor<64x64xf32>
  %r = scf.for %j = %c0 to %n step %c64 iter_args(%acc = %z) -> (tensor<64x64xf32>) : i64 {
    %k = sage.load %a[%j, %c0] strides [%c128, %c1] bounds [%n, %c128] : !sage.ptr<i8> -> tensor<64x128xi8>
    %p = sage.qmatmul %q[%s], %k[%s] acc %acc contract(1, 1) : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
    scf.yield %p : tensor<64x64xf32>
  }
  return %r : tensor<64x64xf32>
}

// A wgmma's wait and epilogue go before the first op that uses its result,
// so the work written between the matmul and that op (a load, math on it)
// runs while the wgmma is in flight.
// CHECK-LABEL: func.func @wait_at_first_use
// CHECK: %[[D:.*]] = sagegpu.dot
// CHECK-NOT: sagegpu.dot_wait
// CHECK: %[[M:.*]] = sage.load
// CHECK-NOT: sagegpu.dot_wait
// CHECK: %[[X:.*]] = arith.mulf %[[M]], %[[M]]
// CHECK-NEXT: %[[W:.*]] = sagegpu.dot_wait %[[D]] {pendings = 0 : i32}
// CHECK-NEXT: arith.sitofp %[[W]]
// CHECK: %[[C:.*]] = arith.mulf {{.*}} : tensor<64x64xf32, #mma>
// CHECK-NEXT: arith.addf %[[C]], %[[X]]
func.func @wait_at_first_use(%a: tensor<64x128xi8>, %b: tensor<64x128xi8>, %s: tensor<1x1xf32>,
                             %p: !sage.ptr<f32>, %n: i64) -> tensor<64x64xf32> {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c = sage.qmatmul %a[%s], %b[%s] contract(1, 1) using wgmma : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  %m = sage.load %p[%c0, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<f32> -> tensor<64x64xf32>
  %x = arith.mulf %m, %m : tensor<64x64xf32>
  %r = arith.addf %c, %x : tensor<64x64xf32>
  return %r : tensor<64x64xf32>
}

// A use inside a region counts at the op that holds it: the wait goes
// before the scf.if, not into it.
// CHECK-LABEL: func.func @wait_before_region
// CHECK: sagegpu.dot
// CHECK: sagegpu.dot_wait
// CHECK: scf.if
// CHECK-NOT: sagegpu.dot_wait
// CHECK: return
func.func @wait_before_region(%a: tensor<64x128xi8>, %b: tensor<64x128xi8>, %s: tensor<1x1xf32>,
                              %cond: i1, %y: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %c = sage.qmatmul %a[%s], %b[%s] contract(1, 1) using wgmma : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  %r = scf.if %cond -> tensor<64x64xf32> {
    %t = arith.addf %c, %y : tensor<64x64xf32>
    scf.yield %t : tensor<64x64xf32>
  } else {
    scf.yield %y : tensor<64x64xf32>
  }
  return %r : tensor<64x64xf32>
}

// sage.matmul onto an accumulator accumulates in the tensor cores: the
// accumulator is the dot's C operand (no zero tile, no add), i32 for i8
// operands and f32 for 16-bit ones; in a loop the wait comes before the
// yield that carries the result.
// CHECK-LABEL: func.func @chained_accumulators
// CHECK: scf.for {{.*}} iter_args(%[[I:.*]] = %{{.*}}, %[[F:.*]] = %{{.*}}) -> (tensor<64x64xi32, #mma>, tensor<64x64xf32, #mma>)
// CHECK-NOT: arith.constant dense<0>
// CHECK: %[[DI:.*]] = sagegpu.dot %{{.*}}, %{{.*}}, %[[I]] contract(1, 1) : {{.*}} -> tensor<64x64xi32, #mma>
// CHECK: %[[DF:.*]] = sagegpu.dot %{{.*}}, %{{.*}}, %[[F]] contract(1, 1) : {{.*}} -> tensor<64x64xf32, #mma>
// CHECK-NOT: arith.addi
// CHECK-NOT: arith.addf
// CHECK: sagegpu.dot_wait %[[DI]] {pendings = 1 : i32}
// CHECK: sagegpu.dot_wait %[[DF]] {pendings = 0 : i32}
// CHECK-NEXT: scf.yield
func.func @chained_accumulators(%a: tensor<64x128xi8>, %b: tensor<64x128xi8>,
                                %h: tensor<64x64xf16>, %n: index) -> (tensor<64x64xi32>, tensor<64x64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zi = arith.constant dense<0> : tensor<64x64xi32>
  %zf = arith.constant dense<0.0> : tensor<64x64xf32>
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%ai = %zi, %af = %zf) -> (tensor<64x64xi32>, tensor<64x64xf32>) {
    %di = sage.matmul %a, %b acc %ai contract(1, 1) using wgmma : tensor<64x128xi8>, tensor<64x128xi8> -> tensor<64x64xi32>
    %df = sage.matmul %h, %h acc %af contract(1, 1) using wgmma : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
    scf.yield %di, %df : tensor<64x64xi32>, tensor<64x64xf32>
  }
  return %r#0, %r#1 : tensor<64x64xi32>, tensor<64x64xf32>
}

// A wait lets the dots issued after the one it completes stay in flight
// (wgmma groups complete in order): the second matmul keeps running under
// the use of the first one's result, as the next QKᵀ under the softmax.
// CHECK-LABEL: func.func @later_dots_stay_in_flight
// CHECK: %[[S:.*]] = sagegpu.dot
// CHECK: %[[O:.*]] = sagegpu.dot
// CHECK: %[[WS:.*]] = sagegpu.dot_wait %[[S]] {pendings = 1 : i32}
// CHECK-NEXT: arith.mulf %[[WS]]
// CHECK: sagegpu.dot_wait %[[O]] {pendings = 0 : i32}
func.func @later_dots_stay_in_flight(%q: tensor<64x64xf16>, %k: tensor<64x64xf16>,
                                     %p: tensor<64x64xf16>, %v: tensor<64x64xf16>,
                                     %o: tensor<64x64xf32>) -> (tensor<64x64xf32>, tensor<64x64xf32>) {
  %s = sage.matmul %q, %k contract(1, 1) using wgmma : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
  %acc = sage.matmul %p, %v acc %o contract(1, 1) using wgmma : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
  %t = arith.mulf %s, %s : tensor<64x64xf32>
  %r = arith.mulf %acc, %t : tensor<64x64xf32>
  return %t, %r : tensor<64x64xf32>, tensor<64x64xf32>
}

// A register A the loop carries keeps its registers across the back edge:
// the op that computes the next trip's A would write them under the
// in-flight wgmma, so the wait comes before it (not at the yield, the
// accumulator's first use), fenced so that ptxas keeps it there.
// CHECK-LABEL: func.func @carried_register_a
// CHECK: scf.for
// CHECK: %[[D:.*]] = sagegpu.dot
// CHECK: arith.mulf
// CHECK-NEXT: sagegpu.dot_wait %[[D]] {fenced, pendings = 0 : i32}
// CHECK-NEXT: arith.truncf
// CHECK-NEXT: scf.yield
func.func @carried_register_a(%p0: tensor<64x64xf16>, %v: tensor<64x64xf16>, %s: tensor<64x64xf32>,
                              %o: tensor<64x64xf32>, %n: index) -> tensor<64x64xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%p = %p0, %acc = %o) -> (tensor<64x64xf16>, tensor<64x64xf32>) {
    %y = sage.matmul %p, %v acc %acc contract(1, 1) using wgmma_reg_a : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
    %e = arith.mulf %s, %s : tensor<64x64xf32>
    %q = arith.truncf %e : tensor<64x64xf32> to tensor<64x64xf16>
    scf.yield %q, %y : tensor<64x64xf16>, tensor<64x64xf32>
  }
  return %r#1 : tensor<64x64xf32>
}

// A region between the dot and its wait that issues wgmma (an unknown
// number of groups) keeps the wait complete.
// CHECK-LABEL: func.func @dots_in_a_region_keep_the_wait_complete
// CHECK: %[[D:.*]] = sagegpu.dot
// CHECK: scf.for
// CHECK: sagegpu.dot
// CHECK: sagegpu.dot_wait %{{.*}} {pendings = 0 : i32}
// CHECK: scf.yield
// CHECK: sagegpu.dot_wait %[[D]] {pendings = 0 : i32}
func.func @dots_in_a_region_keep_the_wait_complete(%a: tensor<64x64xf16>, %n: index,
                                                   %o: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %s = sage.matmul %a, %a contract(1, 1) using wgmma : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
  %l = scf.for %i = %c0 to %n step %c1 iter_args(%x = %o) -> (tensor<64x64xf32>) {
    %y = sage.matmul %a, %a acc %x contract(1, 1) using wgmma : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
    scf.yield %y : tensor<64x64xf32>
  }
  %r = arith.addf %s, %l : tensor<64x64xf32>
  return %r : tensor<64x64xf32>
}

// Per-token scales: the lhs column is a slice of the accumulator; the rhs
// column runs along the result's columns, so it is transposed first; each
// multiplies every element, the rows' first.
// CHECK-LABEL: func.func @token_scales
// CHECK: sagegpu.convert_layout %{{.*}} : tensor<64x1xf32, #blocked> -> tensor<64x1xf32, #slice>
// CHECK: %[[ROWS:.*]] = sage.broadcast %{{.*}} : tensor<64x1xf32, #slice> -> tensor<64x64xf32, #mma>
// CHECK: sagegpu.trans %{{.*}} : tensor<64x1xf32, #blocked> -> tensor<1x64xf32, #slice1>
// CHECK: %[[COLS:.*]] = sage.broadcast %{{.*}} : tensor<1x64xf32, #slice1> -> tensor<64x64xf32, #mma>
// CHECK: %[[SCALED:.*]] = arith.mulf %{{.*}}, %[[ROWS]]
// CHECK: arith.mulf %[[SCALED]], %[[COLS]]
func.func @token_scales(%a: tensor<64x128xi8>, %b: tensor<64x128xi8>, %sa: tensor<64x1xf32>, %sb: tensor<64x1xf32>) -> tensor<64x64xf32> {
  %c = sage.qmatmul %a[%sa], %b[%sb] contract(1, 1) : tensor<64x128xi8>, tensor<64x1xf32>, tensor<64x128xi8>, tensor<64x1xf32> -> tensor<64x64xf32>
  return %c : tensor<64x64xf32>
}
}

// -----

// Without a target (sage-attach-target runs first in sage-to-nvvm) there is
// no cp.async: operands are stored from registers.
module {
// CHECK-LABEL: func.func @no_target
// CHECK-NOT: sagegpu.async_copy
// CHECK: sagegpu.local_alloc %{{.*}} : tensor
func.func @no_target(%a: !sage.ptr<i8> {sage.alignment = 16 : i64}, %n: i64, %s: tensor<1x1xf32>) -> tensor<64x64xf32> {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c128 = arith.constant 128 : i64
  %q = sage.load %a[%c0, %c0] strides [%c128, %c1] bounds [%n, %c128] : !sage.ptr<i8> -> tensor<64x128xi8>
  %p = sage.qmatmul %q[%s], %q[%s] contract(1, 1) using mma_sync : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  return %p : tensor<64x64xf32>
}
}

// -----

// On sm_90a, a kernel's loads that feed wgmma descriptor operands go through
// the copy engine: each gets a tensor map in its own slot of the global
// scratch that a new last argument points at, built where the view is known
// (here before the loop, whose iterations only move the offsets), and an
// mbarrier the threads wait on before the dot. Its tile takes the widest
// swizzle its rows allow (128 bytes of INT8 K); the cp.async tiles stay
// unswizzled.
// TMA: #shared = #sagegpu.shared<swizzle = 128, bits = 8>
// TMA-NEXT: #shared1 = #sagegpu.shared<swizzle = 0, bits = 8>
// RUN: sage-opt %s --split-input-file --sage-select-mma --sagegpu-assign-layouts --sagegpu-promote-operands | FileCheck %s --check-prefix=TMA
// RUN: sage-opt %s --split-input-file --sage-select-mma --sagegpu-assign-layouts --sagegpu-promote-operands=ptx-version=80 | FileCheck %s --check-prefix=PTX80
module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
// TMA-LABEL: func.func @kernel
// TMA-SAME: %[[N:.*]]: i64 {sage.divisibility = 16 : i64}, %[[S:.*]]: tensor<1x1xf32, {{.*}}>, %[[SCRATCH:.*]]: !sage.ptr<i8>)
// TMA-SAME: sage.global_scratch = 256
// TMA: %[[M1:.*]] = sage.make_tensor_map %{{.*}} strides[%{{.*}}, %{{.*}}] bounds[%{{.*}}, %{{.*}}] box [64, 128] inner 1 swizzle 128 scratch %[[SCRATCH]][1]
// TMA: scf.for
// TMA: %[[M0:.*]] = sage.make_tensor_map %{{.*}} box [64, 128] inner 1 swizzle 128 scratch %[[SCRATCH]][0]
// TMA: %[[A:.*]] = sagegpu.local_alloc !sagegpu.smem<64x128xi8, #shared>
// TMA-NEXT: %[[BAR:.*]] = sagegpu.local_alloc !sagegpu.smem<1xi64>
// TMA-NEXT: sagegpu.mbarrier_init %[[BAR]], 1
// TMA-NEXT: sagegpu.tma_load %[[M0]][%{{.*}}, %{{.*}}], %[[BAR]] into %[[A]]
// TMA: sagegpu.tma_load %[[M1]]
// TMA: sagegpu.mbarrier_wait %[[BAR]], %{{.*}}
// TMA: %[[P:.*]] = sagegpu.dot
// TMA-NEXT: sagegpu.dot_wait %[[P]]
// The mbarrier is released after the matmul (every thread has waited).
// TMA: sagegpu.mbarrier_inval %[[BAR]]
// A matmul that asked for mma.sync (it accumulates onto the wgmma's result,
// so it shares the wgmma encoding): cp.async, into the same swizzled tiles.
// TMA-COUNT-2: sagegpu.async_copy
// TMA: sagegpu.async_wait 0
// TMA: %[[Q:.*]] = sagegpu.dot
// TMA-NEXT: sagegpu.dot_wait %[[Q]]
// PTX80-LABEL: func.func @kernel
// PTX80-NOT: make_tensor_map
// PTX80-COUNT-4: sagegpu.async_copy
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

// A loop-invariant A (the attention forward's Q) feeding the matmuls of two
// loops one after the other: one TMA copy, issued where it is loaded and
// waited for once, before the first loop (not every iteration); both dots
// read its tile; the mbarrier is released after the second loop.
module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
// TMA-LABEL: func.func @invariant_operand
// TMA: %[[A:.*]] = sagegpu.local_alloc !sagegpu.smem<64x128xi8, #shared>
// TMA-NEXT: %[[BAR:.*]] = sagegpu.local_alloc !sagegpu.smem<1xi64>
// TMA-NEXT: sagegpu.mbarrier_init %[[BAR]], 1
// TMA-NEXT: sagegpu.tma_load %{{.*}}, %[[BAR]] into %[[A]]
// TMA: sagegpu.mbarrier_wait %[[BAR]], %{{.*}}
// TMA-NEXT: scf.for
// TMA-NOT: sagegpu.mbarrier_wait %[[BAR]]
// TMA: sagegpu.dot %[[A]],
// TMA: scf.for
// TMA-NOT: sagegpu.mbarrier_wait %[[BAR]]
// TMA: sagegpu.dot %[[A]],
// TMA: scf.yield
// TMA-NEXT: }
// TMA-NEXT: sagegpu.mbarrier_inval %[[BAR]]
// TMA-NOT: sagegpu.local_alloc %{{.*}} : tensor<64x128xi8
func.func @invariant_operand(%a: !sage.ptr<i8> {sage.alignment = 16 : i64},
                             %b: !sage.ptr<i8> {sage.alignment = 16 : i64},
                             %n: i64 {sage.divisibility = 16 : i64},
                             %s: tensor<1x1xf32>) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c64 = arith.constant 64 : i64
  %z = arith.constant dense<0.0> : tensor<64x64xf32>
  %at = sage.load %a[%c0, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
  %r = scf.for %j = %c0 to %n step %c64 iter_args(%acc = %z) -> (tensor<64x64xf32>) : i64 {
    %bt = sage.load %b[%j, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    %p = sage.qmatmul %at[%s], %bt[%s] acc %acc contract(1, 1) using wgmma : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
    scf.yield %p : tensor<64x64xf32>
  }
  %r2 = scf.for %j = %c0 to %n step %c64 iter_args(%acc = %r) -> (tensor<64x64xf32>) : i64 {
    %bt = sage.load %b[%j, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    %p = sage.qmatmul %at[%s], %bt[%s] acc %acc contract(1, 1) using wgmma : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
    scf.yield %p : tensor<64x64xf32>
  }
  return
}
}

// -----

// With A from registers (wgmma_reg_a), A reaches the dot_op encoding through
// a shared tile (here copied by cp.async) read back with local_load; only B
// is read through a descriptor and may come by TMA.
module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
// TMA-LABEL: func.func @reg_a
// TMA: sage.global_scratch = 128
// TMA: %[[AS:.*]] = sagegpu.local_alloc
// TMA-NEXT: sagegpu.async_copy
// TMA: sagegpu.tma_load
// TMA: %[[A:.*]] = sagegpu.local_load %[[AS]] : !sagegpu.smem<64x128xi8, #shared> -> tensor<64x128xi8, #dot_op>
// TMA: sagegpu.dot %[[A]], %{{.*}} : tensor<64x128xi8, #dot_op>, !sagegpu.smem<64x128xi8, #shared1>
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

// -----

// A 16-bit B whose rows run along N (V in P·V: contracted over its rows,
// unit stride along D) is copied as it lies: a TMA box with the N
// dimension inner, into a swizzled tile the wgmma reads MN-major. The same
// view under mma.sync, which has no transposed form, is stored K-major by
// the threads instead.
module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
// TMA: #shared1 = #sagegpu.shared<swizzle = 128, bits = 16>
// TMA-NEXT: #shared2 = #sagegpu.shared<swizzle = 0, bits = 16, inner = 0>
// TMA-LABEL: func.func @mn_major_b
// TMA: sage.make_tensor_map %{{.*}} box [64, 64] inner 1 swizzle 128
// TMA: %[[V:.*]] = sagegpu.local_alloc !sagegpu.smem<64x64xf16, #shared1>
// TMA: sagegpu.tma_load %{{.*}} into %[[V]]
// TMA: sagegpu.dot %{{.*}}, %[[V]], %{{.*}} contract(1, 0)
// TMA-LABEL: func.func @mn_major_b_mma_sync
// TMA-NOT: tma_load
// TMA: sagegpu.local_alloc %{{.*}} : tensor<64x64xf16, #{{.*}}> -> !sagegpu.smem<64x64xf16, #shared2>
func.func @mn_major_b(%v: !sage.ptr<f16> {sage.alignment = 16 : i64},
                      %n: i64 {sage.divisibility = 16 : i64},
                      %p: tensor<64x64xf16>) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %vt = sage.load %v[%c0, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<f16> -> tensor<64x64xf16>
  %o = sage.matmul %p, %vt contract(1, 0) using wgmma_reg_a : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
  return
}
func.func @mn_major_b_mma_sync(%v: !sage.ptr<f16> {sage.alignment = 16 : i64},
                               %n: i64 {sage.divisibility = 16 : i64},
                               %p: tensor<64x64xf16>) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %vt = sage.load %v[%c0, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<f16> -> tensor<64x64xf16>
  %o = sage.matmul %p, %vt contract(1, 0) using mma_sync : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
  return
}
}

// -----

// A rhs in sigma16 order takes A from registers in the sigma16 fragment
// layout: an INT8 P quantized from an accumulator reaches it by a
// conversion (in-thread: no shared tile), on wgmma and on mma.sync alike.
// CHECK: #dot_op1 = #sagegpu.dot_op<0, parent = #mma, bits = 8, sigma16 = true>
module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
// CHECK-LABEL: func.func @sigma16_pv
// CHECK: %[[P:.*]] = arith.fptosi
// CHECK-NEXT: %[[A:.*]] = sagegpu.convert_layout %[[P]] : tensor<64x64xi8, #mma> -> tensor<64x64xi8, #dot_op1>
// CHECK: sagegpu.dot %[[A]], %{{.*}} : tensor<64x64xi8, #dot_op1>, !sagegpu.smem<64x64xi8, #shared>
// CHECK-NOT: sagegpu.local_alloc %[[P]]
func.func @sigma16_pv(%q: tensor<64x64xi8>, %k: tensor<64x64xi8>, %vt: tensor<64x64xi8>,
                      %s: tensor<1x1xf32>) -> tensor<64x64xf32> {
  %x = sage.qmatmul %q[%s], %k[%s] contract(1, 1) : tensor<64x64xi8>, tensor<1x1xf32>, tensor<64x64xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  %p = arith.fptosi %x : tensor<64x64xf32> to tensor<64x64xi8>
  %o = sage.qmatmul %p[%s], %vt[%s] contract(1, 1) rhs_sigma16 : tensor<64x64xi8>, tensor<1x1xf32>, tensor<64x64xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  return %o : tensor<64x64xf32>
}
}

// -----

// CHECK: #dot_op = #sagegpu.dot_op<0, parent = #mma, bits = 8, sigma16 = true>
module attributes {sage.target = "sm_80", sage.num_warps = 4 : i32} {
// CHECK-LABEL: func.func @sigma16_pv_mma_sync
// CHECK: %[[P:.*]] = arith.fptosi
// CHECK-NEXT: %[[A:.*]] = sagegpu.convert_layout %[[P]] : tensor<64x64xi8, #mma> -> tensor<64x64xi8, #dot_op>
// CHECK: sagegpu.dot %[[A]], %{{.*}} : tensor<64x64xi8, #dot_op>, !sagegpu.smem<64x64xi8, #shared>
func.func @sigma16_pv_mma_sync(%q: tensor<64x64xi8>, %k: tensor<64x64xi8>, %vt: tensor<64x64xi8>,
                               %s: tensor<1x1xf32>) -> tensor<64x64xf32> {
  %x = sage.qmatmul %q[%s], %k[%s] contract(1, 1) : tensor<64x64xi8>, tensor<1x1xf32>, tensor<64x64xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  %p = arith.fptosi %x : tensor<64x64xf32> to tensor<64x64xi8>
  %o = sage.qmatmul %p[%s], %vt[%s] contract(1, 1) rhs_sigma16 : tensor<64x64xi8>, tensor<1x1xf32>, tensor<64x64xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  return %o : tensor<64x64xf32>
}
}

// -----

module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
// A store marked tma whose view the copy engine can write: the tile goes to
// a swizzled shared tile (128-byte rows of bf16: swizzle 128) and the copy
// engine stores it through a tensor map with the tile as its box.
// CHECK-LABEL: func.func @tma_store
// CHECK: %[[MAP:.*]] = sage.make_tensor_map %arg1 strides[%arg2, %c1_i64] bounds[%arg3, %arg3] box [64, 64] inner 1 swizzle 128
// CHECK: %[[STAGED:.*]] = sagegpu.local_alloc %arg0 : tensor<64x64xbf16{{.*}}> -> !sagegpu.smem<64x64xbf16, #shared>
// CHECK-NEXT: sagegpu.tma_store %[[STAGED]] into %[[MAP]][%arg4, %c0_i64] : !sagegpu.smem<64x64xbf16, #shared>
// CHECK-NOT: sage.store
// A view the engine cannot write (rows of unknown alignment) keeps a plain
// store, without the mark.
// CHECK-LABEL: func.func @tma_store_fallback
// CHECK-NOT: sagegpu.tma_store
// CHECK: sage.store %arg0, %arg1
// CHECK-NOT: tma
func.func @tma_store(%t: tensor<64x64xbf16>, %c: !sage.ptr<bf16> {sage.alignment = 16 : i64},
                     %n: i64 {sage.divisibility = 16 : i64}, %m: i64, %row: i64) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  sage.store tma %t, %c[%row, %c0] strides [%n, %c1] bounds [%m, %m] : tensor<64x64xbf16>, !sage.ptr<bf16>
  return
}
func.func @tma_store_fallback(%t: tensor<64x64xbf16>, %c: !sage.ptr<bf16> {sage.alignment = 16 : i64},
                              %n: i64, %m: i64, %row: i64) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  sage.store tma %t, %c[%row, %c0] strides [%n, %c1] bounds [%m, %m] : tensor<64x64xbf16>, !sage.ptr<bf16>
  return
}
}

// -----

// A store that adds (f32) and is marked tma becomes a bulk reduction by the
// copy engine (128-byte rows of f32: swizzle 128); the same without an
// aligned view keeps its per-element atomics.
module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
// CHECK-LABEL: func.func @tma_add
// CHECK: %[[MAP:.*]] = sage.make_tensor_map %arg1 strides[%arg2, %c1_i64] bounds[%arg3, %arg3] box [64, 32] inner 1 swizzle 128 typed
// CHECK: %[[STAGED:.*]] = sagegpu.local_alloc %arg0
// CHECK-NEXT: sagegpu.tma_store add %[[STAGED]] into %[[MAP]][%arg4, %c0_i64]
// CHECK-NOT: sage.store
// CHECK-LABEL: func.func @tma_add_fallback
// CHECK: sage.store atomic_add %arg0, %arg1
func.func @tma_add(%t: tensor<64x32xf32>, %c: !sage.ptr<f32> {sage.alignment = 16 : i64},
                   %n: i64 {sage.divisibility = 16 : i64}, %m: i64, %row: i64) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  sage.store atomic_add tma %t, %c[%row, %c0] strides [%n, %c1] bounds [%m, %m] : tensor<64x32xf32>, !sage.ptr<f32>
  return
}
func.func @tma_add_fallback(%t: tensor<64x32xf32>, %c: !sage.ptr<f32> {sage.alignment = 16 : i64},
                            %n: i64, %m: i64, %row: i64) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  sage.store atomic_add tma %t, %c[%row, %c0] strides [%n, %c1] bounds [%m, %m] : tensor<64x32xf32>, !sage.ptr<f32>
  return
}
}

// -----

// Views with leading dimensions (a batch and a head). A TMA copy keeps them
// as dimensions of its map, built once before the loop over the tiles (the
// view is the whole tensor), and names its batch and head per copy; a
// store marked tma does the same. A load that stays a plain access folds
// them into its pointer, and zeroes its first bound when an index lies
// outside its dimension.
module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
// CHECK-LABEL: func.func @leading_dims
// CHECK: %[[MO:.*]] = sage.make_tensor_map %arg2 strides[%arg5, %arg4, %arg3, %c1_i64] bounds[%arg6, %arg6, %arg6, %c64_i64] box [64, 64] inner 1 swizzle 128 scratch %arg7[1]
// CHECK: %[[MK:.*]] = sage.make_tensor_map %arg1 strides[%arg5, %arg4, %arg3, %c1_i64] bounds[%arg6, %arg6, %arg6, %c64_i64] box [64, 64] inner 1 swizzle 128 scratch %arg7[0]
// CHECK: scf.for %[[T:.*]] =
// CHECK: %[[B:.*]] = arith.divui %[[T]]
// CHECK: %[[H:.*]] = arith.remui %[[T]]
// Q, the A operand read through registers here, is copied by cp.async: a
// 2-D view.
// CHECK: %[[QOFF:.*]] = arith.muli %[[B]], %arg5
// CHECK-NEXT: %[[QB:.*]] = sage.addptr %arg0, %[[QOFF]]
// CHECK: %[[QP:.*]] = sage.addptr %[[QB]]
// CHECK: arith.andi
// CHECK: %[[IN:.*]] = arith.andi %{{.*}}, %{{.*}} : i1
// CHECK-NEXT: %[[QN:.*]] = arith.select %[[IN]], %arg6, %{{.*}} : i64
// CHECK: sagegpu.async_copy %[[QP]][%c0_i64, %c0_i64] strides[%arg3, %c1_i64] bounds[%[[QN]], %c64_i64]
// CHECK: sagegpu.tma_load %[[MK]][%c0_i64, %c0_i64] leading[%[[B]], %[[H]]]
// CHECK: sagegpu.tma_store %{{.*}} into %[[MO]][%c0_i64, %c0_i64] leading[%[[B]], %[[H]]]
// CHECK-NOT: sage.store
func.func @leading_dims(%q: !sage.ptr<bf16> {sage.alignment = 16 : i64},
                        %k: !sage.ptr<bf16> {sage.alignment = 16 : i64},
                        %o: !sage.ptr<bf16> {sage.alignment = 16 : i64},
                        %sn: i64 {sage.divisibility = 16 : i64}, %sh: i64 {sage.divisibility = 16 : i64},
                        %sb: i64 {sage.divisibility = 16 : i64}, %n: i64) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c2 = arith.constant 2 : i64
  %c8 = arith.constant 8 : i64
  %c64 = arith.constant 64 : i64
  scf.for %t = %c0 to %c8 step %c1 : i64 {
    %b = arith.divui %t, %c2 : i64
    %h = arith.remui %t, %c2 : i64
    %qt = sage.load %q[%b, %h, %c0, %c0] strides [%sb, %sh, %sn, %c1] bounds [%n, %n, %n, %c64] : !sage.ptr<bf16> -> tensor<64x64xbf16>
    %kt = sage.load %k[%b, %h, %c0, %c0] strides [%sb, %sh, %sn, %c1] bounds [%n, %n, %n, %c64] : !sage.ptr<bf16> -> tensor<64x64xbf16>
    %s = sage.matmul %qt, %kt contract(1, 1) using wgmma_reg_a : tensor<64x64xbf16>, tensor<64x64xbf16> -> tensor<64x64xf32>
    %p = arith.truncf %s : tensor<64x64xf32> to tensor<64x64xbf16>
    sage.store tma %p, %o[%b, %h, %c0, %c0] strides [%sb, %sh, %sn, %c1] bounds [%n, %n, %n, %c64] : tensor<64x64xbf16>, !sage.ptr<bf16>
  }
  return
}
}

// -----

// A column of 128 per-key scales that only the matmul reads (the SageBwd
// forward's K scales) is copied to shared memory by cp.async where it was
// loaded, and read after the dot, straight into the row slice of the
// result: no registers hold it while the dot runs. The copy is waited for
// before the dot's wait, under the dot. A 64-key column is cheaper as it is
// (the copy's fixed cost per trip) and stays a load.
module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
// TMA-LABEL: func.func @scales_copied
// TMA: scf.for
// TMA: %[[SK:.*]] = sagegpu.local_alloc !sagegpu.smem<1x128xf32, #[[SH:shared[0-9]*]]>
// TMA-NEXT: sagegpu.async_copy %{{.*}}[%c0_i64, %{{.*}}] strides[%c0_i64, %c1_i64] bounds[%c1_i64, %{{.*}}] into %[[SK]]
// TMA-NEXT: sagegpu.async_commit_group
// TMA: sagegpu.dot
// TMA: sagegpu.async_wait 0
// TMA-NEXT: sagegpu.dot_wait
// TMA-NEXT: arith.sitofp
// TMA-NEXT: %{{.*}} = sagegpu.local_load %[[SK]] : !sagegpu.smem<1x128xf32, #[[SH]]> -> tensor<1x128xf32, #slice{{[0-9]*}}>
// TMA-NOT: sage.load %{{.*}} : !sage.ptr<f32> -> tensor<128x1xf32
// TMA-LABEL: func.func @short_scales_loaded
// TMA: sage.load %{{.*}} : !sage.ptr<f32> -> tensor<64x1xf32, #{{.*}}>
// TMA-NOT: sagegpu.async_copy
// TMA: return
// A view that ends with the tile (`end=` in the kernels): every element
// exists, so the copy engine takes it, on an mbarrier.
// TMA-LABEL: func.func @scales_bulk
// TMA: scf.for %[[J:[a-z0-9_]+]] =
// TMA: %[[SK:.*]] = sagegpu.local_alloc !sagegpu.smem<1x128xf32, #[[SH:shared[0-9]*]]>
// TMA-NEXT: %[[BAR:.*]] = sagegpu.local_alloc !sagegpu.smem<1xi64>
// TMA-NEXT: sagegpu.mbarrier_init %[[BAR]], 1
// TMA-NEXT: sagegpu.bulk_load %{{.*}}[%[[J]]], %[[BAR]] into %[[SK]]
// TMA: sagegpu.dot
// TMA: sagegpu.mbarrier_wait %[[BAR]], %{{.*}}
// TMA-NEXT: sagegpu.dot_wait
// TMA-NEXT: arith.sitofp
// TMA-NEXT: %{{.*}} = sagegpu.local_load %[[SK]] : !sagegpu.smem<1x128xf32, #[[SH]]> -> tensor<1x128xf32, #slice{{[0-9]*}}>
// TMA-NEXT: sagegpu.mbarrier_inval %[[BAR]]
// TMA-NOT: sagegpu.async_copy
// TMA: return
// An offset not known to be >= 0 (the loop starts at an argument) may
// start before the view: cp.async, which zero-fills there.
// TMA-LABEL: func.func @scales_bulk_unknown_start
// TMA-NOT: sagegpu.bulk_load
// TMA: sagegpu.async_copy
// TMA-NOT: sagegpu.bulk_load
// TMA: return
// Shorter vectors stay loads, bulk copy or not (64 keys: 2% slower copied).
// TMA-LABEL: func.func @short_scales_bulk_loaded
// TMA-NOT: sagegpu.bulk_load
// TMA: sage.load %{{.*}} : !sage.ptr<f32> -> tensor<64x1xf32, #{{.*}}>
// TMA-NOT: sagegpu.bulk_load
// TMA: return
// Two readers: the cp.async copy (at 128 scales), not the one-reader bulk.
// TMA-LABEL: func.func @scales_bulk_two_readers
// TMA-NOT: sagegpu.bulk_load
// TMA: sagegpu.async_copy
// TMA-NOT: sagegpu.bulk_load
// TMA: return
// A warp-specialised loop shares the producer's rings with the masked loop
// after it, which must copy alike, and cp.async's barriers would order the
// consumers inside a ping-pong turn: the scales stay a load.
// TMA-LABEL: func.func @scales_warp_specialized
// TMA-NOT: sagegpu.bulk_load
// TMA-NOT: sagegpu.async_copy
// TMA: sage.load %{{.*}} : !sage.ptr<f32> -> tensor<128x1xf32, #{{.*}}>
// TMA-NOT: sagegpu.async_copy
// TMA: sage.warp_specialize
func.func @scales_copied(%a: !sage.ptr<i8> {sage.alignment = 16 : i64},
                         %b: !sage.ptr<i8> {sage.alignment = 16 : i64},
                         %sk: !sage.ptr<f32> {sage.alignment = 16 : i64},
                         %n: i64 {sage.divisibility = 16 : i64},
                         %s: tensor<1x1xf32>) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c128 = arith.constant 128 : i64
  %z = arith.constant dense<0.0> : tensor<64x128xf32>
  %at = sage.load %a[%c0, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
  %r = scf.for %j = %c0 to %n step %c128 iter_args(%acc = %z) -> (tensor<64x128xf32>) : i64 {
    %bt = sage.load %b[%j, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<128x128xi8>
    %st = sage.load %sk[%j, %c0] strides [%c1, %c0] bounds [%n, %c1] : !sage.ptr<f32> -> tensor<128x1xf32>
    %p = sage.qmatmul %at[%s], %bt[%st] contract(1, 1) using wgmma : tensor<64x128xi8>, tensor<1x1xf32>, tensor<128x128xi8>, tensor<128x1xf32> -> tensor<64x128xf32>
    %o = arith.addf %acc, %p : tensor<64x128xf32>
    scf.yield %o : tensor<64x128xf32>
  }
  return
}
func.func @short_scales_loaded(%a: !sage.ptr<i8> {sage.alignment = 16 : i64},
                               %b: !sage.ptr<i8> {sage.alignment = 16 : i64},
                               %sk: !sage.ptr<f32> {sage.alignment = 16 : i64},
                               %n: i64 {sage.divisibility = 16 : i64},
                               %s: tensor<1x1xf32>) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c64 = arith.constant 64 : i64
  %z = arith.constant dense<0.0> : tensor<64x64xf32>
  %at = sage.load %a[%c0, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
  %r = scf.for %j = %c0 to %n step %c64 iter_args(%acc = %z) -> (tensor<64x64xf32>) : i64 {
    %bt = sage.load %b[%j, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    %st = sage.load %sk[%j, %c0] strides [%c1, %c0] bounds [%n, %c1] : !sage.ptr<f32> -> tensor<64x1xf32>
    %p = sage.qmatmul %at[%s], %bt[%st] contract(1, 1) using wgmma : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<64x1xf32> -> tensor<64x64xf32>
    %o = arith.addf %acc, %p : tensor<64x64xf32>
    scf.yield %o : tensor<64x64xf32>
  }
  return
}
func.func @scales_bulk(%a: !sage.ptr<i8> {sage.alignment = 16 : i64},
                       %b: !sage.ptr<i8> {sage.alignment = 16 : i64},
                       %sk: !sage.ptr<f32> {sage.alignment = 16 : i64},
                       %n: i64 {sage.divisibility = 16 : i64},
                       %s: tensor<1x1xf32>) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c128 = arith.constant 128 : i64
  %z = arith.constant dense<0.0> : tensor<64x128xf32>
  %at = sage.load %a[%c0, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
  %r = scf.for %j = %c0 to %n step %c128 iter_args(%acc = %z) -> (tensor<64x128xf32>) : i64 {
    %bt = sage.load %b[%j, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<128x128xi8>
    %end = arith.addi %j, %c128 : i64
    %st = sage.load %sk[%j, %c0] strides [%c1, %c0] bounds [%end, %c1] : !sage.ptr<f32> -> tensor<128x1xf32>
    %p = sage.qmatmul %at[%s], %bt[%st] contract(1, 1) using wgmma : tensor<64x128xi8>, tensor<1x1xf32>, tensor<128x128xi8>, tensor<128x1xf32> -> tensor<64x128xf32>
    %o = arith.addf %acc, %p : tensor<64x128xf32>
    scf.yield %o : tensor<64x128xf32>
  }
  return
}
func.func @scales_bulk_unknown_start(%a: !sage.ptr<i8> {sage.alignment = 16 : i64},
                       %b: !sage.ptr<i8> {sage.alignment = 16 : i64},
                       %sk: !sage.ptr<f32> {sage.alignment = 16 : i64},
                       %n: i64 {sage.divisibility = 16 : i64},
                       %s: tensor<1x1xf32>, %start: i64 {sage.divisibility = 16 : i64}) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c128 = arith.constant 128 : i64
  %z = arith.constant dense<0.0> : tensor<64x128xf32>
  %at = sage.load %a[%c0, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
  %r = scf.for %j = %start to %n step %c128 iter_args(%acc = %z) -> (tensor<64x128xf32>) : i64 {
    %bt = sage.load %b[%j, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<128x128xi8>
    %end = arith.addi %j, %c128 : i64
    %st = sage.load %sk[%j, %c0] strides [%c1, %c0] bounds [%end, %c1] : !sage.ptr<f32> -> tensor<128x1xf32>
    %p = sage.qmatmul %at[%s], %bt[%st] contract(1, 1) using wgmma : tensor<64x128xi8>, tensor<1x1xf32>, tensor<128x128xi8>, tensor<128x1xf32> -> tensor<64x128xf32>
    %o = arith.addf %acc, %p : tensor<64x128xf32>
    scf.yield %o : tensor<64x128xf32>
  }
  return
}
func.func @short_scales_bulk_loaded(%a: !sage.ptr<i8> {sage.alignment = 16 : i64},
                       %b: !sage.ptr<i8> {sage.alignment = 16 : i64},
                       %sk: !sage.ptr<f32> {sage.alignment = 16 : i64},
                       %n: i64 {sage.divisibility = 16 : i64},
                       %s: tensor<1x1xf32>) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c64 = arith.constant 64 : i64
  %z = arith.constant dense<0.0> : tensor<64x64xf32>
  %at = sage.load %a[%c0, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
  %r = scf.for %j = %c0 to %n step %c64 iter_args(%acc = %z) -> (tensor<64x64xf32>) : i64 {
    %bt = sage.load %b[%j, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    %end = arith.addi %j, %c64 : i64
    %st = sage.load %sk[%j, %c0] strides [%c1, %c0] bounds [%end, %c1] : !sage.ptr<f32> -> tensor<64x1xf32>
    %p = sage.qmatmul %at[%s], %bt[%st] contract(1, 1) using wgmma : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<64x1xf32> -> tensor<64x64xf32>
    %o = arith.addf %acc, %p : tensor<64x64xf32>
    scf.yield %o : tensor<64x64xf32>
  }
  return
}
func.func @scales_bulk_two_readers(%a: !sage.ptr<i8> {sage.alignment = 16 : i64},
                                   %b: !sage.ptr<i8> {sage.alignment = 16 : i64},
                                   %sk: !sage.ptr<f32> {sage.alignment = 16 : i64},
                                   %n: i64 {sage.divisibility = 16 : i64},
                                   %s: tensor<1x1xf32>) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c128 = arith.constant 128 : i64
  %z = arith.constant dense<0.0> : tensor<64x128xf32>
  %at = sage.load %a[%c0, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
  %r = scf.for %j = %c0 to %n step %c128 iter_args(%acc = %z) -> (tensor<64x128xf32>) : i64 {
    %bt = sage.load %b[%j, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<128x128xi8>
    %end = arith.addi %j, %c128 : i64
    %st = sage.load %sk[%j, %c0] strides [%c1, %c0] bounds [%end, %c1] : !sage.ptr<f32> -> tensor<128x1xf32>
    %p = sage.qmatmul %at[%s], %bt[%st] contract(1, 1) using wgmma : tensor<64x128xi8>, tensor<1x1xf32>, tensor<128x128xi8>, tensor<128x1xf32> -> tensor<64x128xf32>
    %q = sage.qmatmul %at[%s], %bt[%st] contract(1, 1) using wgmma : tensor<64x128xi8>, tensor<1x1xf32>, tensor<128x128xi8>, tensor<128x1xf32> -> tensor<64x128xf32>
    %o = arith.addf %acc, %p : tensor<64x128xf32>
    %o2 = arith.addf %o, %q : tensor<64x128xf32>
    scf.yield %o2 : tensor<64x128xf32>
  }
  return
}
func.func @scales_warp_specialized(%a: !sage.ptr<i8> {sage.alignment = 16 : i64},
                                   %b: !sage.ptr<i8> {sage.alignment = 16 : i64},
                                   %sk: !sage.ptr<f32> {sage.alignment = 16 : i64},
                                   %n: i64 {sage.divisibility = 16 : i64},
                                   %s: tensor<1x1xf32>) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c128 = arith.constant 128 : i64
  %z = arith.constant dense<0.0> : tensor<64x128xf32>
  %at = sage.load %a[%c0, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
  %r = scf.for %j = %c0 to %n step %c128 iter_args(%acc = %z) -> (tensor<64x128xf32>) : i64 {
    %bt = sage.load %b[%j, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<128x128xi8>
    %end = arith.addi %j, %c128 : i64
    %st = sage.load %sk[%j, %c0] strides [%c1, %c0] bounds [%end, %c1] : !sage.ptr<f32> -> tensor<128x1xf32>
    %p = sage.qmatmul %at[%s], %bt[%st] contract(1, 1) using wgmma : tensor<64x128xi8>, tensor<1x1xf32>, tensor<128x128xi8>, tensor<128x1xf32> -> tensor<64x128xf32>
    %o = arith.addf %acc, %p : tensor<64x128xf32>
    scf.yield %o : tensor<64x128xf32>
  } {sage.num_stages = 2 : i32, sage.warp_specialize}
  return
}
}
