// sagegpu.dot on wgmma (sm_90a): K-major shared operands stored from
// registers (unswizzled: 16 bytes of K of every row together) are read
// through matrix descriptors (tma.mlir has a swizzled one); the barrier after the
// generic-proxy stores fences them for the async proxy. The dot ends at
// commit_group: its registers are in flight until the sagegpu.dot_wait that
// promote-operands puts at the result's first use, inline PTX tying every
// accumulator register (outputs "=r"/"=f", inputs "0", "1", ...).
// RUN: sage-opt %s --sage-select-mma --sagegpu-assign-layouts --sagegpu-promote-operands --sagegpu-allocate-shared-memory --sagegpu-insert-barriers --convert-sage-to-llvm --canonicalize --cse | FileCheck %s
// RUN: sage-opt %s --sage-select-mma --sagegpu-assign-layouts --sagegpu-promote-operands --sagegpu-allocate-shared-memory --sagegpu-insert-barriers --convert-sage-to-llvm --convert-nvvm-to-llvm | FileCheck %s --check-prefix=ASM

module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
// CHECK-LABEL: func.func @qk
// Descriptor: leading offset (K-adjacent core matrices) 64 rows x 16 B =
// 1024 B (64 << 16), stride offset (8-row groups) 128 B (8 << 32).
// CHECK: arith.constant 34363932672 : i64
// The async proxy must see the generic-proxy stores before the barrier.
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : vector<4xi8>, !llvm.ptr<3>
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK: nvvm.barrier0
// CHECK: nvvm.wgmma.fence.aligned
// A zero accumulator is not materialised: the first K step ignores D.
// CHECK: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 64, k = 32>, D[<s32>, <zero>], A[<s8>, <one>, <row>], B[<s8>, <one>, <col>]
// CHECK-COUNT-3: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 64, k = 32>, D[<s32>, <one>], A[<s8>, <one>, <row>], B[<s8>, <one>, <col>]
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NOT: nvvm.wgmma.wait.group
// CHECK: %[[W:.*]] = llvm.inline_asm has_side_effects asm_dialect = att "wgmma.wait_group.sync.aligned 0;", {{"(=r,){32}0(,[0-9]+){31}"}} {{.*}} : ({{(i32, ){31}i32}}) -> !llvm.struct<({{(i32, ){31}i32}})>
// CHECK: llvm.extractvalue %[[W]][0]
// CHECK: arith.sitofp
// CHECK-NOT: nvvm.wgmma.wait.group
// CHECK-NOT: wgmma.wait_group
// CHECK: return
// ASM: llvm.inline_asm has_side_effects asm_dialect = att "{\0A.reg .pred p;\0Asetp.ne.b32 p, $66, 0;\0Awgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8
func.func @qk(%q: tensor<64x128xi8>, %sq: tensor<1x1xf32>, %k: tensor<64x128xi8>, %sk: tensor<1x1xf32>) -> tensor<64x64xf32> {
  %s = sage.qmatmul %q[%sq], %k[%sk] contract(1, 1) using wgmma : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  return %s : tensor<64x64xf32>
}

// Two 64-row blocks for one warpgroup: two chains of K / 16 wgmmas, one
// group, one wait for both blocks' 64 f32 registers.
// CHECK-LABEL: func.func @dp
// CHECK: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK-COUNT-3: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK-COUNT-3: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK-NOT: nvvm.wgmma.mma_async
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: llvm.inline_asm has_side_effects asm_dialect = att "wgmma.wait_group.sync.aligned 0;", {{"(=f,){64}0(,[0-9]+){63}"}}
func.func @dp(%do: tensor<128x64xbf16>, %v: tensor<64x64xbf16>) -> tensor<128x64xf32> {
  %dp = sage.matmul %do, %v contract(1, 1) using wgmma : tensor<128x64xbf16>, tensor<64x64xbf16> -> tensor<128x64xf32>
  return %dp : tensor<128x64xf32>
}

// With A in registers (wgmma_reg_a), a blocked A goes through a shared tile
// into each warp's fragments (local_load into #dot_op: one 32-bit word per
// fragment register), all loaded before the wgmma fence; B still comes from
// its descriptor.
// CHECK-LABEL: func.func @pv
// CHECK-COUNT-16: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<3> -> vector<4xi8>
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: llvm.inline_asm has_side_effects asm_dialect = att "{\0A.reg .pred p;\0Asetp.ne.b32 p, $69, 0;\0Awgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 {$0, $1, {{.*}}, $31}, {$64, $65, $66, $67}, $68, p;\0A}", "=r,{{.*}},=r,0,1,{{.*}},31,r,r,r,r,l,r"
// CHECK-COUNT-3: wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NOT: wgmma.mma_async
// CHECK: "wgmma.wait_group.sync.aligned 0;"
// The 16-bit form also gives A/B scales and B's (absent) transpose.
// CHECK-LABEL: func.func @pv_half
// CHECK: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, $68, p, 1, 1, 0;
func.func @pv(%p: tensor<64x128xi8>, %sp: tensor<1x1xf32>, %v: tensor<64x128xi8>, %sv: tensor<1x1xf32>) -> tensor<64x64xf32> {
  %o = sage.qmatmul %p[%sp], %v[%sv] contract(1, 1) using wgmma_reg_a : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  return %o : tensor<64x64xf32>
}
func.func @pv_half(%p: tensor<64x64xbf16>, %v: tensor<64x64xbf16>) -> tensor<64x64xf32> {
  %o = sage.matmul %p, %v contract(1, 1) using wgmma_reg_a : tensor<64x64xbf16>, tensor<64x64xbf16> -> tensor<64x64xf32>
  return %o : tensor<64x64xf32>
}

// An unsigned lhs (a #sage.uint8 P^): u8 x s8 products, from registers or
// from shared memory.
// CHECK-LABEL: func.func @pv_unsigned
// CHECK: wgmma.mma_async.sync.aligned.m64n64k32.s32.u8.s8 {$0
// CHECK-LABEL: func.func @qk_unsigned
// CHECK: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 64, k = 32>, D[<s32>, <one>], A[<u8>, <one>, <row>], B[<s8>, <one>, <col>]
func.func @pv_unsigned(%p: tensor<64x128xi8>, %sp: tensor<1x1xf32>, %v: tensor<64x128xi8>, %sv: tensor<1x1xf32>) -> tensor<64x64xf32> {
  %o = sage.qmatmul %p[%sp], %v[%sv] contract(1, 1) lhs_unsigned using wgmma_reg_a : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  return %o : tensor<64x64xf32>
}
func.func @qk_unsigned(%q: tensor<64x128xi8>, %sq: tensor<1x1xf32>, %k: tensor<64x128xi8>, %sk: tensor<1x1xf32>) -> tensor<64x64xf32> {
  %s = sage.qmatmul %q[%sq], %k[%sk] contract(1, 1) lhs_unsigned using wgmma : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  return %s : tensor<64x64xf32>
}

// A register A that a loop carries: its wait is fenced (ptxas moves nothing
// across the fence, so the wait stays after the work placed before it).
// CHECK-LABEL: func.func @pv_carried
// CHECK: scf.for
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: llvm.inline_asm has_side_effects asm_dialect = att "fence.acq_rel.cta; wgmma.wait_group.sync.aligned 0;"
// CHECK: scf.yield
func.func @pv_carried(%p0: tensor<64x64xbf16>, %v: tensor<64x64xbf16>, %s: tensor<64x64xf32>,
                      %o: tensor<64x64xf32>, %n: index) -> tensor<64x64xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%p = %p0, %acc = %o) -> (tensor<64x64xbf16>, tensor<64x64xf32>) {
    %y = sage.matmul %p, %v acc %acc contract(1, 1) using wgmma_reg_a : tensor<64x64xbf16>, tensor<64x64xbf16> -> tensor<64x64xf32>
    %q = arith.truncf %s : tensor<64x64xf32> to tensor<64x64xbf16>
    scf.yield %q, %y : tensor<64x64xbf16>, tensor<64x64xf32>
  }
  return %r#1 : tensor<64x64xf32>
}

// A splat constant accumulator (here the bits of 1.5 * 2^23) is stored to
// the dot's 16 bytes of scratch by every thread, once, at the kernel's entry
// (the bytes are the dot's alone), and read back four registers a volatile
// load (no move a register) in every trip; the first K step accumulates
// onto it. No barrier orders those bytes: every thread writes the same ones.
// CHECK-LABEL: func.func @biased
// CHECK: llvm.mlir.constant(1262485504 : i32)
// CHECK: llvm.inline_asm has_side_effects asm_dialect = att "st.shared.v4.b32 [$0], {$1, $1, $1, $1};", "r,r" %{{.*}}, %{{.*}} : (i32, i32) -> ()
// CHECK: scf.for
// CHECK-NOT: nvvm.barrier0
// CHECK-NOT: st.shared
// CHECK-COUNT-8: llvm.inline_asm has_side_effects asm_dialect = att "ld.volatile.shared.v4.b32 {$0, $1, $2, $3}, [$4];", "=r,=r,=r,=r,r"
// CHECK-NOT: ld.volatile.shared
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-2: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 64, k = 32>, D[<s32>, <one>]
// CHECK-NOT: nvvm.barrier0
// CHECK: scf.yield
// The constant: 0x4B400000.
// CHECK-LABEL: func.func @biased_bits
// CHECK: llvm.mlir.constant(1262485504 : i32)
// CHECK: st.shared.v4.b32
// Only a splat of 32-bit elements other than 0 is loaded so: a zero
// accumulator is not materialised at all.
// CHECK-LABEL: func.func @zero_acc
// CHECK-NOT: st.shared.v4.b32
// CHECK: D[<s32>, <zero>]
func.func @biased(%q: tensor<64x64xi8>, %k: tensor<64x64xi8>, %o: tensor<64x64xf32>,
                  %n: index) -> tensor<64x64xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %bias = arith.constant dense<1262485504> : tensor<64x64xi32>
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %o) -> (tensor<64x64xf32>) {
    %t = sage.matmul %q, %k acc %bias contract(1, 1) using wgmma : tensor<64x64xi8>, tensor<64x64xi8> -> tensor<64x64xi32>
    %f = arith.bitcast %t : tensor<64x64xi32> to tensor<64x64xf32>
    %s = arith.addf %acc, %f : tensor<64x64xf32>
    scf.yield %s : tensor<64x64xf32>
  }
  return %r : tensor<64x64xf32>
}
func.func @biased_bits(%q: tensor<64x64xi8>, %k: tensor<64x64xi8>) -> tensor<64x64xi32> {
  %bias = arith.constant dense<1262485504> : tensor<64x64xi32>
  %t = sage.matmul %q, %k acc %bias contract(1, 1) using wgmma : tensor<64x64xi8>, tensor<64x64xi8> -> tensor<64x64xi32>
  return %t : tensor<64x64xi32>
}
func.func @zero_acc(%q: tensor<64x64xi8>, %k: tensor<64x64xi8>) -> tensor<64x64xi32> {
  %zero = arith.constant dense<0> : tensor<64x64xi32>
  %t = sage.matmul %q, %k acc %zero contract(1, 1) using wgmma : tensor<64x64xi8>, tensor<64x64xi8> -> tensor<64x64xi32>
  return %t : tensor<64x64xi32>
}

// An f32 splat (bf16 operands) loads as f32 words: 1.0 is 0x3F800000.
// CHECK-LABEL: func.func @splat_f32
// CHECK: llvm.mlir.constant(1065353216 : i32)
// CHECK: st.shared.v4.b32
// CHECK-COUNT-8: "ld.volatile.shared.v4.f32 {$0, $1, $2, $3}, [$4];", "=f,=f,=f,=f,r"
// CHECK: D[<f32>, <one>]
func.func @splat_f32(%a: tensor<64x64xbf16>, %b: tensor<64x64xbf16>) -> tensor<64x64xf32> {
  %one = arith.constant dense<1.0> : tensor<64x64xf32>
  %t = sage.matmul %a, %b acc %one contract(1, 1) using wgmma : tensor<64x64xbf16>, tensor<64x64xbf16> -> tensor<64x64xf32>
  return %t : tensor<64x64xf32>
}
}
