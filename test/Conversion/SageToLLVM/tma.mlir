// sage.make_tensor_map assembles the map in its shared scratch (warp 0,
// fields written by lane 0) and publishes it to the program's slot of the
// global scratch. sagegpu.tma_load has the copy leader (an elected lane of
// warp 0, elected at the copy inside a branch that only warp 0 takes) arm
// the operand's mbarrier with the box's bytes and issue the copy;
// after a barrier (the mbarrier's initialisation before anyone waits) every
// thread waits on it, the wgmma reads the tile, and the leader invalidates
// the mbarrier after a barrier.
// RUN: sage-opt %s --sagegpu-allocate-shared-memory --sagegpu-insert-barriers --convert-sage-to-llvm --canonicalize --cse | FileCheck %s

#blocked = #sagegpu.blocked<size = [1, 4], threads = [4, 8], warps = [4, 1]>
#mma = #sagegpu.mma<wgmma, warps = [4, 1], n = 64>
#mma128 = #sagegpu.mma<wgmma, warps = [4, 1], n = 128>
#shared = #sagegpu.shared<swizzle = 128, bits = 8>
module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
// CHECK-LABEL: func.func @qk
// CHECK-SAME: %[[SCRATCH:[a-z0-9]+]]: !llvm.ptr<1>)
// The boxes' wgmma descriptors: the 128-byte swizzle (mode 1 << 62), stride
// offset (8-row groups) 8 x 128 B = 1024 B (64 << 32), leading offset unused
// (1 << 16).
// CHECK: %[[DESC:.*]] = arith.constant 4611686293305360384 : i64
// The slot: scratch + (program * 2 maps + 1) * 128 for the map of %b.
// CHECK: nvvm.read.ptx.sreg.ctaid.z
// CHECK: %[[MAP_B:.*]] = llvm.getelementptr %[[SCRATCH]]
// CHECK: "@$1 st.shared.b32 [$0], 0;"
// CHECK: "bar.warp.sync -1;"
// CHECK: "@$2 tensormap.replace.tile.global_address.shared::cta.b1024.b64 [$0], $1;"
// The view is 2-D bytes (rank field: rank - 1) in the 128-byte swizzle mode
// (3); a box is 128 bytes by 64 rows; dimension 1's stride is the rows'.
// CHECK: "@$1 tensormap.replace.tile.rank.shared::cta.b1024.b32 [$0], 1;"
// CHECK: "@$1 tensormap.replace.tile.swizzle_mode.shared::cta.b1024.b32 [$0], 3;"
// CHECK: "@$2 tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [$0], 0, $1;", "r,r,b" %{{.*}}, %c128_i32,
// CHECK: "@$2 tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [$0], 1, $1;", "r,r,b" %{{.*}}, %c64_i32,
// CHECK-NOT: box_dim
// CHECK: "@$2 tensormap.replace.tile.global_stride.shared::cta.b1024.b64 [$0], 0, $1;"
// CHECK-NOT: global_stride
// CHECK: "@$2 tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [$0], [$1], 128;"
// CHECK: "@$1 fence.proxy.tensormap::generic.acquire.gpu [$0], 128;"
// Both maps are warp 0's alone: no barrier between them.
// CHECK-NOT: nvvm.barrier0
// CHECK: %[[MAP_A:.*]] = llvm.getelementptr %[[SCRATCH]]
// CHECK: tensormap.cp_fenceproxy
// The leader's region: warp 0 (the uniform test) branches in, and one of
// its active lanes is elected there.
// CHECK: "{\0A\09.reg .pred sage_leader;\0A\09.reg .b32 sage_lanes;\0A\09@!$2 bra.uni sage_led;\0A\09activemask.b32 sage_lanes;\0A\09elect.sync _|sage_leader, sage_lanes;\0A\09@sage_leader mbarrier.init.shared::cta.b64 [$0], $1;\0A\09@sage_leader fence.mbarrier_init.release.cluster;\0A\09sage_led:\0A\09}", "r,r,b" %{{.*}}, %c1_i32, %[[WARP0:[0-9a-z_]+]]
// Nothing else uses the box's bytes: no barrier first. The mbarrier is
// armed and the copy issued in one region.
// CHECK-NOT: nvvm.barrier0
// CHECK: "{{.*}}@!$7 bra.uni sage_led;{{.*}}@sage_leader mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;\0A\09@sage_leader cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [$2], [$3, {$4, $5}], [$6];\0A\09sage_led:
// CHECK-SAME: "r,r,r,l,r,r,r,b" {{.*}}, %[[WARP0]]
// One box per 128-byte slab: one for a 64 x 128 INT8 tile.
// CHECK-NOT: cp.async.bulk.tensor
// The leader sets up the second mbarrier right after the first.
// CHECK-NOT: nvvm.barrier0
// CHECK: mbarrier.init
// CHECK: cp.async.bulk.tensor.2d
// Every thread passes both initialisations before waiting.
// CHECK: nvvm.barrier0
// CHECK: mbarrier.try_wait.parity.shared::cta.b64 done, [$0], $1;
// CHECK-NOT: nvvm.barrier0
// CHECK: mbarrier.try_wait.parity
// CHECK: nvvm.wgmma.fence.aligned
// Each operand's first descriptor is encoded from its address; the next K
// steps (32 bytes further: 2 in the 16-byte start field) add to it, through
// an opaque move (LLVM would fold the adds into the encoding's `or`).
// CHECK: %[[DB:.*]] = arith.ori %{{.*}}, %[[DESC]] : i64
// CHECK: %[[DA:.*]] = arith.ori %{{.*}}, %[[DESC]] : i64
// CHECK-NEXT: nvvm.wgmma.mma_async %[[DA]], %[[DB]]
// CHECK-NEXT: %[[OB:.*]] = llvm.inline_asm {{.*}}"mov.b64 $0, $1;", "=l,l" %[[DB]]
// CHECK-NEXT: %[[DB1:.*]] = arith.addi %[[OB]], %c2_i64 : i64
// CHECK-NEXT: %[[OA:.*]] = llvm.inline_asm {{.*}}"mov.b64 $0, $1;", "=l,l" %[[DA]]
// CHECK-NEXT: %[[DA1:.*]] = arith.addi %[[OA]], %c2_i64 : i64
// CHECK-NEXT: nvvm.wgmma.mma_async %[[DA1]], %[[DB1]]
// CHECK-COUNT-2: nvvm.wgmma.mma_async
// Every thread is done waiting before the leader releases the mbarriers.
// CHECK: nvvm.barrier0
// CHECK: "{{.*}}@sage_leader mbarrier.inval.shared::cta.b64 [$0];{{.*}}", "r,b"
// CHECK-NOT: nvvm.barrier0
// CHECK: "{{.*}}@sage_leader mbarrier.inval.shared::cta.b64 [$0];{{.*}}", "r,b"
func.func @qk(%a: !sage.ptr<i8>, %b: !sage.ptr<i8>, %n: i64, %z: tensor<64x64xi32, #mma>,
              %scratch: !sage.ptr<i8>) -> tensor<64x64xi32, #mma>
    attributes {sage.global_scratch = 256 : i64} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %mb = sage.make_tensor_map %b strides [%n, %c1] bounds [%n, %n] box [64, 128] inner 1 swizzle 128 scratch %scratch[1] : !sage.ptr<i8>, !sage.ptr<i8>
  %ma = sage.make_tensor_map %a strides [%n, %c1] bounds [%n, %n] box [64, 128] inner 1 swizzle 128 scratch %scratch[0] : !sage.ptr<i8>, !sage.ptr<i8>
  %row = sage.program_id 0
  %r = arith.extsi %row : i32 to i64
  %at = sagegpu.local_alloc !sagegpu.smem<64x128xi8, #shared>
  %abar = sagegpu.local_alloc !sagegpu.smem<1xi64>
  sagegpu.mbarrier_init %abar, 1 : !sagegpu.smem<1xi64>
  sagegpu.tma_load %ma[%r, %c0], %abar into %at : !sagegpu.smem<1xi64>, !sagegpu.smem<64x128xi8, #shared>
  %bt = sagegpu.local_alloc !sagegpu.smem<64x128xi8, #shared>
  %bbar = sagegpu.local_alloc !sagegpu.smem<1xi64>
  sagegpu.mbarrier_init %bbar, 1 : !sagegpu.smem<1xi64>
  sagegpu.tma_load %mb[%c0, %c0], %bbar into %bt : !sagegpu.smem<1xi64>, !sagegpu.smem<64x128xi8, #shared>
  %phase = arith.constant 0 : i32
  sagegpu.mbarrier_wait %abar, %phase : !sagegpu.smem<1xi64>
  sagegpu.mbarrier_wait %bbar, %phase : !sagegpu.smem<1xi64>
  %p = sagegpu.dot %at, %bt, %z contract(1, 1) : !sagegpu.smem<64x128xi8, #shared>, !sagegpu.smem<64x128xi8, #shared> -> tensor<64x64xi32, #mma>
  sagegpu.mbarrier_inval %abar : !sagegpu.smem<1xi64>
  sagegpu.mbarrier_inval %bbar : !sagegpu.smem<1xi64>
  %w = sagegpu.dot_wait %p {pendings = 0 : i32} : tensor<64x64xi32, #mma>
  return %w : tensor<64x64xi32, #mma>
}

// The unswizzled layout (chunk-major core matrices) has its own descriptor:
// leading offset (K-adjacent core matrices) 64 rows x 16 B = 1024 B
// (64 << 16), stride offset (8-row groups) 128 B (8 << 32), no swizzle.
// CHECK-LABEL: func.func @unswizzled
// CHECK: arith.constant 34363932672 : i64
// CHECK-COUNT-4: nvvm.wgmma.mma_async
func.func @unswizzled(%a: !sagegpu.smem<64x128xi8, #sagegpu.shared<swizzle = 0, bits = 8>>,
                      %z: tensor<64x64xi32, #mma>)
    -> tensor<64x64xi32, #mma> {
  %d = sagegpu.dot %a, %a, %z contract(1, 1) : !sagegpu.smem<64x128xi8, #sagegpu.shared<swizzle = 0, bits = 8>>, !sagegpu.smem<64x128xi8, #sagegpu.shared<swizzle = 0, bits = 8>> -> tensor<64x64xi32, #mma>
  %w = sagegpu.dot_wait %d {pendings = 0 : i32} : tensor<64x64xi32, #mma>
  return %w : tensor<64x64xi32, #mma>
}

// A 16-bit B that lies MN-major (V as TMA copies it: 128 keys x 128 D, D
// inner in two 128-byte slabs) is read through wgmma's transposed form:
// leading offset between the slabs 128 rows x 128 B = 16384 B (1024 << 16),
// stride offset between 8-key groups 1024 B (64 << 32), 128-byte swizzle
// (1 << 62); each 16-key step moves B's start by 2048 B (128 units).
// CHECK-LABEL: func.func @mn_major_b
// CHECK-DAG: %[[FIELDS:.*]] = arith.constant 4611686293372403712 : i64
// CHECK-DAG: %[[STEP:.*]] = arith.constant 128 : i64
// CHECK: %[[B0:.*]] = arith.ori %{{.*}}, %[[FIELDS]] : i64
// CHECK: nvvm.wgmma.mma_async %{{.*}}, %[[B0]], {{.*}} B[<bf16>, <one>, <row>]
// CHECK: %[[O0:.*]] = llvm.inline_asm {{.*}}"mov.b64 $0, $1;", "=l,l" %[[B0]]
// CHECK: %[[B1:.*]] = arith.addi %[[O0]], %[[STEP]] : i64
// CHECK: nvvm.wgmma.mma_async %{{.*}}, %[[B1]], {{.*}} B[<bf16>, <one>, <row>]
// CHECK-COUNT-6: nvvm.wgmma.mma_async {{.*}} B[<bf16>, <one>, <row>]
func.func @mn_major_b(%a: !sagegpu.smem<64x128xbf16, #sagegpu.shared<swizzle = 128, bits = 16>>,
                      %v: !sagegpu.smem<128x128xbf16, #sagegpu.shared<swizzle = 128, bits = 16>>,
                      %z: tensor<64x128xf32, #mma128>) -> tensor<64x128xf32, #mma128> {
  %d = sagegpu.dot %a, %v, %z contract(1, 0) : !sagegpu.smem<64x128xbf16, #sagegpu.shared<swizzle = 128, bits = 16>>, !sagegpu.smem<128x128xbf16, #sagegpu.shared<swizzle = 128, bits = 16>> -> tensor<64x128xf32, #mma128>
  %w = sagegpu.dot_wait %d {pendings = 0 : i32} : tensor<64x128xf32, #mma128>
  return %w : tensor<64x128xf32, #mma128>
}

// sagegpu.tma_store: every thread writes its part of the tile, fences it for
// the async proxy and meets the others; the copy leader then has the copy
// engine store both 128-byte slabs (64 rows each, the second from byte 8192
// of the tile, 128 bytes further along the rows), commits and waits until
// the tile has been read. The leader's warp is found once, at the
// function's start (tid / 32, as lane 0 holds it, is 0); its lane is
// elected in the region.
// CHECK-LABEL: func.func @store
// CHECK: %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x
// CHECK: %[[WARP:.*]] = arith.shrui %[[TID]], %c5_i32
// CHECK: %[[UNIFORM:.*]] = nvvm.shfl.sync idx %c-1_i32, %[[WARP]], %c0_i32, %c31_i32
// CHECK: %[[WARP0:.*]] = arith.cmpi eq, %[[UNIFORM]], %c0_i32
// CHECK-NOT: elect
// CHECK: st.shared
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT: nvvm.barrier0
// CHECK: "{{.*}}@!$8 bra.uni sage_led;{{.*}}elect.sync _|sage_leader, sage_lanes;\0A\09@sage_leader cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [$0, {$1, $2}], [$3];\0A\09@sage_leader cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [$4, {$5, $6}], [$7];\0A\09@sage_leader cp.async.bulk.commit_group;\0A\09@sage_leader cp.async.bulk.wait_group.read 0;\0A\09sage_led:\0A\09}", "l,r,r,r,l,r,r,r,b" {{.*}}, %[[WARP0]]
func.func @store(%c: !sage.ptr<i8>, %n: i64, %t: tensor<64x256xi8, #blocked>,
                 %scratch: !sage.ptr<i8>) attributes {sage.global_scratch = 128 : i64} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %m = sage.make_tensor_map %c strides [%n, %c1] bounds [%n, %n] box [64, 256] inner 1 swizzle 128 scratch %scratch[0] : !sage.ptr<i8>, !sage.ptr<i8>
  %s = sagegpu.local_alloc %t : tensor<64x256xi8, #blocked> -> !sagegpu.smem<64x256xi8, #shared>
  sagegpu.tma_store %s into %m[%c0, %c0] : !sagegpu.smem<64x256xi8, #shared>
  return
}

// sagegpu.tma_store add: the copy engine adds the tile (a bulk reduction)
// through a typed map: element type F32 (7), dimension 0 and the box's
// slab in elements (128 bytes: 32), the copy's inner coordinate in
// elements (the column, not 4x it).
// CHECK-LABEL: func.func @store_add
// CHECK: "@$1 tensormap.replace.tile.elemtype.shared::cta.b1024.b32 [$0], 7;"
// CHECK: "@$2 tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [$0], 0, $1;", "r,r,b" %{{.*}}, %c32_i32,
// CHECK: "@$2 tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [$0], 0, $1;", "r,r,b" %{{.*}}, %[[N:.*]],
// CHECK: %[[COL:.*]] = arith.trunci %arg18 : i64 to i32
// CHECK: "{{.*}}@sage_leader cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [$0, {$1, $2}], [$3];\0A\09@sage_leader cp.async.bulk.commit_group;{{.*}}", "l,r,r,r,b" %{{.*}}, %[[COL]],
func.func @store_add(%c: !sage.ptr<f32>, %n: i64, %t: tensor<64x32xf32, #blocked>, %col: i64,
                     %scratch: !sage.ptr<i8>) attributes {sage.global_scratch = 128 : i64} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %m = sage.make_tensor_map %c strides [%n, %c1] bounds [%n, %n] box [64, 32] inner 1 swizzle 128 typed scratch %scratch[0] : !sage.ptr<f32>, !sage.ptr<i8>
  %s = sagegpu.local_alloc %t : tensor<64x32xf32, #blocked> -> !sagegpu.smem<64x32xf32, #sagegpu.shared<swizzle = 128, bits = 32>>
  sagegpu.tma_store add %s into %m[%c0, %col] : !sagegpu.smem<64x32xf32, #sagegpu.shared<swizzle = 128, bits = 32>>
  return
}

// A bulk copy: the copy leader arms the mbarrier with the tile's 512 bytes and asks
// for them at the element's address (no map, no bounds); after the barrier
// that orders the mbarrier's initialisation before the waits (hoisted out of
// a pipelined loop with the ring), the threads wait on the mbarrier.
// CHECK-LABEL: func.func @bulk
// CHECK: %[[SRC:.*]] = llvm.getelementptr %{{.*}}[%arg1] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
// CHECK: "{{.*}}@sage_leader mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;\0A\09@sage_leader cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [$2], [$3], $4, [$5];{{.*}}", "r,r,r,l,r,r,b" %{{.*}}, %c512_i32, %{{.*}}, %[[SRC]], %c512_i32,
// CHECK-NEXT: nvvm.barrier0
// CHECK-NEXT: mbarrier.try_wait
func.func @bulk(%s: !sage.ptr<f32>, %col: i64) -> tensor<1x128xf32, #blocked> {
  %t = sagegpu.local_alloc !sagegpu.smem<1x128xf32, #sagegpu.shared<swizzle = 0, bits = 32, inner = 1>>
  %bar = sagegpu.local_alloc !sagegpu.smem<1xi64>
  sagegpu.mbarrier_init %bar, 1 : !sagegpu.smem<1xi64>
  sagegpu.bulk_load %s[%col], %bar into %t : !sage.ptr<f32>, !sagegpu.smem<1xi64>, !sagegpu.smem<1x128xf32, #sagegpu.shared<swizzle = 0, bits = 32, inner = 1>>
  %phase = arith.constant 0 : i32
  sagegpu.mbarrier_wait %bar, %phase : !sagegpu.smem<1xi64>
  %v = sagegpu.local_load %t : !sagegpu.smem<1x128xf32, #sagegpu.shared<swizzle = 0, bits = 32, inner = 1>> -> tensor<1x128xf32, #blocked>
  sagegpu.mbarrier_inval %bar : !sagegpu.smem<1xi64>
  return %v : tensor<1x128xf32, #blocked>
}

// A map with leading dimensions (a batch and a head; strides %sb, %sh):
// rank 4 (field 3), dimensions 2 and 3 the head and the batch with boxes of
// one index, their byte strides the fields after the rows'. Copies name
// their coordinates innermost first: the slab's byte and row, then the head
// and the batch (i32).
// CHECK-LABEL: func.func @leading
// CHECK: "@$1 tensormap.replace.tile.rank.shared::cta.b1024.b32 [$0], 3;"
// CHECK: "@$2 tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [$0], 1, $1;", "r,r,b" %{{.*}}, %c64_i32,
// CHECK: "@$2 tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [$0], 2, $1;", "r,r,b" %{{.*}}, %c1_i32,
// CHECK: "@$2 tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [$0], 3, $1;", "r,r,b" %{{.*}}, %c1_i32,
// CHECK: "@$2 tensormap.replace.tile.global_stride.shared::cta.b1024.b64 [$0], 0, $1;", "r,l,b" %{{.*}}, %arg2,
// CHECK: "@$2 tensormap.replace.tile.global_stride.shared::cta.b1024.b64 [$0], 1, $1;", "r,l,b" %{{.*}}, %arg3,
// CHECK: "@$2 tensormap.replace.tile.global_stride.shared::cta.b1024.b64 [$0], 2, $1;", "r,l,b" %{{.*}}, %arg4,
// CHECK: %[[H:.*]] = arith.trunci %arg6 : i64 to i32
// CHECK: %[[B:.*]] = arith.trunci %arg5 : i64 to i32
// CHECK: "{{.*}}@sage_leader cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [$2], [$3, {$4, $5, $6, $7}], [$8];{{.*}}", "r,r,r,l,r,r,r,r,r,b" %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[H]], %[[B]],
// CHECK: "{{.*}}@sage_leader cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [$0, {$1, $2, $3, $4}], [$5];{{.*}}", "l,r,r,r,r,r,b" %{{.*}}, %{{.*}}, %{{.*}}, %[[H]], %[[B]],
func.func @leading(%a: !sage.ptr<i8>, %n: i64, %sn: i64, %sh: i64, %sb: i64, %b: i64, %h: i64,
                   %scratch: !sage.ptr<i8>) attributes {sage.global_scratch = 128 : i64} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %m = sage.make_tensor_map %a strides [%sb, %sh, %sn, %c1] bounds [%n, %n, %n, %n] box [64, 128] inner 1 swizzle 128 scratch %scratch[0] : !sage.ptr<i8>, !sage.ptr<i8>
  %t = sagegpu.local_alloc !sagegpu.smem<64x128xi8, #shared>
  %bar = sagegpu.local_alloc !sagegpu.smem<1xi64>
  sagegpu.mbarrier_init %bar, 1 : !sagegpu.smem<1xi64>
  sagegpu.tma_load %m[%c0, %c0] leading [%b, %h], %bar into %t : !sagegpu.smem<1xi64>, !sagegpu.smem<64x128xi8, #shared>
  %phase = arith.constant 0 : i32
  sagegpu.mbarrier_wait %bar, %phase : !sagegpu.smem<1xi64>
  sagegpu.tma_store %t into %m[%c0, %c0] leading [%b, %h] : !sagegpu.smem<64x128xi8, #shared>
  sagegpu.mbarrier_inval %bar : !sagegpu.smem<1xi64>
  return
}
}
