// sage.make_tensor_map assembles the map in shared memory (warp 0, fields
// written by lane 0) and publishes it to the program's slot of the global
// scratch. A matmul whose operands are loaded `via tma` has thread 0 arm an
// mbarrier for both boxes and issue the copies; everyone waits on it after
// a barrier, multiplies, and thread 0 invalidates it afterwards.
// RUN: sage-opt %s --sagegpu-assign-layouts --convert-sage-to-llvm --canonicalize --cse | FileCheck %s

module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
// CHECK-LABEL: func.func @qk
// CHECK-SAME: %[[SCRATCH:[a-z0-9]+]]: !llvm.ptr<1>)
// The slot: scratch + (program * 2 maps + 1) * 128 for the map of %b.
// CHECK: nvvm.read.ptx.sreg.ctaid.z
// CHECK: %[[MAP_B:.*]] = llvm.getelementptr %[[SCRATCH]]
// CHECK: "@$1 st.shared.b32 [$0], 0;"
// CHECK: "bar.warp.sync -1;"
// CHECK: "@$2 tensormap.replace.tile.global_address.shared::cta.b1024.b64 [$0], $1;"
// CHECK: "@$1 tensormap.replace.tile.rank.shared::cta.b1024.b32 [$0], 2;"
// CHECK: "@$1 tensormap.replace.tile.swizzle_mode.shared::cta.b1024.b32 [$0], 0;"
// CHECK: "@$2 tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [$0], 2, $1;"
// CHECK: "@$2 tensormap.replace.tile.global_stride.shared::cta.b1024.b64 [$0], 1, $1;"
// CHECK: "@$2 tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [$0], [$1], 128;"
// CHECK: "@$1 fence.proxy.tensormap::generic.acquire.gpu [$0], 128;"
// CHECK: nvvm.barrier0
// CHECK: %[[MAP_A:.*]] = llvm.getelementptr %[[SCRATCH]]
// CHECK: tensormap.cp_fenceproxy
// CHECK: "@$1 mbarrier.init.shared::cta.b64 [$0], 1;"
// CHECK: "@$0 fence.mbarrier_init.release.cluster;"
// CHECK: "@$2 mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;"
// CHECK-COUNT-2: cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [$0], [$1, {$2, $3, $4}], [$5];
// CHECK: nvvm.barrier0
// CHECK: mbarrier.try_wait.parity.shared::cta.b64 done, [$0], 0;
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: nvvm.wgmma.mma_async
// CHECK: nvvm.barrier0
// CHECK: "@$1 mbarrier.inval.shared::cta.b64 [$0];"
func.func @qk(%a: !sage.ptr<i8>, %b: !sage.ptr<i8>, %n: i64, %s: tensor<1x1xf32>,
              %scratch: !sage.ptr<i8>) -> tensor<64x64xf32>
    attributes {sage.global_scratch = 256 : i64} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %mb = sage.make_tensor_map %b strides [%n, %c1] bounds [%n, %n] box [64, 128] inner 1 scratch %scratch[1] : !sage.ptr<i8>, !sage.ptr<i8>
  %ma = sage.make_tensor_map %a strides [%n, %c1] bounds [%n, %n] box [64, 128] inner 1 scratch %scratch[0] : !sage.ptr<i8>, !sage.ptr<i8>
  %row = sage.program_id 0
  %r = arith.extsi %row : i32 to i64
  %at = sage.load %a[%r, %c0] strides [%n, %c1] bounds [%n, %n] via tma map %ma : !sage.ptr<i8> -> tensor<64x128xi8>
  %bt = sage.load %b[%c0, %c0] strides [%n, %c1] bounds [%n, %n] via tma map %mb : !sage.ptr<i8> -> tensor<64x128xi8>
  %p = sage.qmatmul %at[%s], %bt[%s] contract(1, 1) using wgmma : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  return %p : tensor<64x64xf32>
}
}

