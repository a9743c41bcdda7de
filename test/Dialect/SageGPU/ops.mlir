// The sagegpu encodings and ops print and parse back unchanged.
// RUN: sage-opt %s | sage-opt | FileCheck %s

// CHECK-DAG: #[[$BLOCKED:.*]] = #sagegpu.blocked<size = [1, 4], threads = [4, 8], warps = [4, 1]>
// CHECK-DAG: #[[$MMA:.*]] = #sagegpu.mma<mma_sync, warps = [4, 1]>
// CHECK-DAG: #[[$WGMMA:.*]] = #sagegpu.mma<wgmma, warps = [8, 1], n = 64>
// CHECK-DAG: #[[$SLICE:.*]] = #sagegpu.slice<dim = 1, parent = #[[$MMA]]>
// CHECK-DAG: #[[$SH:.*]] = #sagegpu.shared<swizzle = 128, bits = 8>
// CHECK-DAG: #[[$SH0:.*]] = #sagegpu.shared<swizzle = 0, bits = 16, inner = 0>
// CHECK-DAG: #[[$A:.*]] = #sagegpu.dot_op<0, parent = #[[$WGMMA]], bits = 8, sigma16 = true>
// CHECK-DAG: #[[$B:.*]] = #sagegpu.dot_op<1, parent = #[[$MMA]], bits = 16>
#blocked = #sagegpu.blocked<size = [1, 4], threads = [4, 8], warps = [4, 1]>
#mma = #sagegpu.mma<mma_sync, warps = [4, 1]>
#wgmma = #sagegpu.mma<wgmma, warps = [8, 1], n = 64>
#slice = #sagegpu.slice<dim = 1, parent = #mma>

// CHECK-LABEL: func.func @convert
// CHECK: sagegpu.convert_layout %{{.*}} : tensor<64x64xf32, #[[$MMA]]> -> tensor<64x64xf32, #[[$BLOCKED]]>
// CHECK: sagegpu.convert_layout %{{.*}} : tensor<128x64xf32, #[[$WGMMA]]> -> tensor<128x64xf32, #[[$BLOCKED]]>
// CHECK: sagegpu.convert_layout %{{.*}} : tensor<64x1xf32, #[[$SLICE]]> -> tensor<64x1xf32, #[[$BLOCKED]]>
func.func @convert(%a: tensor<64x64xf32, #mma>, %b: tensor<128x64xf32, #wgmma>,
                   %c: tensor<64x1xf32, #slice>)
    -> (tensor<64x64xf32, #blocked>, tensor<128x64xf32, #blocked>, tensor<64x1xf32, #blocked>) {
  %0 = sagegpu.convert_layout %a : tensor<64x64xf32, #mma> -> tensor<64x64xf32, #blocked>
  %1 = sagegpu.convert_layout %b : tensor<128x64xf32, #wgmma> -> tensor<128x64xf32, #blocked>
  %2 = sagegpu.convert_layout %c : tensor<64x1xf32, #slice> -> tensor<64x1xf32, #blocked>
  return %0, %1, %2 : tensor<64x64xf32, #blocked>, tensor<128x64xf32, #blocked>, tensor<64x1xf32, #blocked>
}

// Converting to the same type folds away; two conversions fold into one.
// RUN: sage-opt %s --canonicalize | FileCheck %s --check-prefix=FOLD
// FOLD-LABEL: func.func @folds
// FOLD-NEXT: %[[X:.*]] = sagegpu.convert_layout %arg0 : tensor<64x64xf32, #{{.*}}> -> tensor<64x64xf32, #{{.*}}>
// FOLD-NEXT: return %arg0, %[[X]]
#wide = #sagegpu.blocked<size = [1, 1], threads = [1, 32], warps = [2, 2]>
func.func @folds(%a: tensor<64x64xf32, #mma>) -> (tensor<64x64xf32, #mma>, tensor<64x64xf32, #blocked>) {
  %0 = sagegpu.convert_layout %a : tensor<64x64xf32, #mma> -> tensor<64x64xf32, #mma>
  %1 = sagegpu.convert_layout %0 : tensor<64x64xf32, #mma> -> tensor<64x64xf32, #wide>
  %2 = sagegpu.convert_layout %1 : tensor<64x64xf32, #wide> -> tensor<64x64xf32, #blocked>
  return %0, %2 : tensor<64x64xf32, #mma>, tensor<64x64xf32, #blocked>
}

// A conversion or a transpose of a load used once is the load itself, in
// the new encoding or of the transposed view.
// FOLD-LABEL: func.func @loads
// FOLD-NEXT: %[[C:.*]] = sage.load %arg0[%arg1, %arg2] strides[%arg1, %arg2] bounds[%arg1, %arg2] : !sage.ptr<f32> -> tensor<64x1xf32, #{{.*}}>
// FOLD-NEXT: %[[T:.*]] = sage.load %arg0[%arg2, %arg1] strides[%arg2, %arg1] bounds[%arg2, %arg1] : !sage.ptr<f32> -> tensor<1x64xf32, #{{.*}}>
// FOLD-NEXT: return %[[C]], %[[T]]
func.func @loads(%p: !sage.ptr<f32>, %i: i64, %j: i64) -> (tensor<64x1xf32, #slice>, tensor<1x64xf32, #blocked>) {
  %0 = sage.load %p[%i, %j] strides [%i, %j] bounds [%i, %j] : !sage.ptr<f32> -> tensor<64x1xf32, #blocked>
  %1 = sagegpu.convert_layout %0 : tensor<64x1xf32, #blocked> -> tensor<64x1xf32, #slice>
  %2 = sage.load %p[%i, %j] strides [%i, %j] bounds [%i, %j] : !sage.ptr<f32> -> tensor<64x1xf32, #blocked>
  %3 = sagegpu.trans %2 : tensor<64x1xf32, #blocked> -> tensor<1x64xf32, #blocked>
  return %1, %3 : tensor<64x1xf32, #slice>, tensor<1x64xf32, #blocked>
}

// The rebuilt load issues where the kernel issued the old one (before the
// barrier here), not at the transpose; a load outside the loop moves to its
// user inside it instead, so that no registers hold it across the loop.
// FOLD-LABEL: func.func @load_order
// FOLD: %[[EARLY:.*]] = sage.load %arg0[%arg2, %arg1]
// FOLD-NEXT: sagegpu.barrier
// FOLD-NEXT: scf.for
// FOLD-NEXT: %[[INNER:.*]] = sage.load %arg0[%arg2, %arg1]
// FOLD-NEXT: sage.store %[[INNER]]
// FOLD: return %[[EARLY]]
func.func @load_order(%p: !sage.ptr<f32>, %i: i64, %j: i64, %n: index) -> tensor<1x64xf32, #blocked> {
  %0 = sage.load %p[%i, %j] strides [%i, %j] bounds [%i, %j] : !sage.ptr<f32> -> tensor<64x1xf32, #blocked>
  sagegpu.barrier
  %1 = sagegpu.trans %0 : tensor<64x1xf32, #blocked> -> tensor<1x64xf32, #blocked>
  %2 = sage.load %p[%i, %j] strides [%i, %j] bounds [%i, %j] : !sage.ptr<f32> -> tensor<64x1xf32, #blocked>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %k = %c0 to %n step %c1 {
    %3 = sagegpu.trans %2 : tensor<64x1xf32, #blocked> -> tensor<1x64xf32, #blocked>
    sage.store %3, %p[%j, %i] strides [%j, %i] bounds [%j, %i] : tensor<1x64xf32, #blocked>, !sage.ptr<f32>
  }
  return %1 : tensor<1x64xf32, #blocked>
}

// Operand and shared encodings.
// CHECK-LABEL: func.func @operands
// CHECK-SAME: tensor<64x64xi8, #[[$A]]>, %{{.*}}: tensor<64x32xf16, #[[$B]]>
// CHECK-SAME: !sagegpu.smem<64x128xi8, #[[$SH]]>, %{{.*}}: !sagegpu.smem<128x64xf16, #[[$SH0]]>
func.func @operands(%a: tensor<64x64xi8, #sagegpu.dot_op<0, parent = #wgmma, bits = 8, sigma16 = true>>,
                    %b: tensor<64x32xf16, #sagegpu.dot_op<1, parent = #mma, bits = 16>>,
                    %s: !sagegpu.smem<64x128xi8, #sagegpu.shared<swizzle = 128, bits = 8>>,
                    %t: !sagegpu.smem<128x64xf16, #sagegpu.shared<swizzle = 0, bits = 16, inner = 0>>) {
  return
}

// Shared memory and the tensor-core op print and parse back unchanged.
// CHECK-LABEL: func.func @shared_memory
// CHECK: %[[A:.*]] = sagegpu.local_alloc %{{.*}} : tensor<64x128xi8, #[[$BLOCKED]]> -> {offset = 0 : i64} !sagegpu.smem<64x128xi8, #{{.*}}>
// CHECK: %[[B:.*]] = sagegpu.local_alloc !sagegpu.smem<64x128xi8, #{{.*}}>
// CHECK: sagegpu.async_copy %{{.*}}[%{{.*}}, %{{.*}}] strides[%{{.*}}, %{{.*}}] bounds[%{{.*}}, %{{.*}}] into %[[B]] : !sage.ptr<i8> -> !sagegpu.smem<64x128xi8, #{{.*}}>
// CHECK: sagegpu.async_commit_group
// CHECK: sagegpu.async_wait 0
// CHECK: %[[BAR:.*]] = sagegpu.local_alloc !sagegpu.smem<1xi64>
// CHECK: sagegpu.mbarrier_init %[[BAR]], 1 : !sagegpu.smem<1xi64>
// CHECK: sagegpu.tma_load %{{.*}}[%{{.*}}, %{{.*}}], %[[BAR]] into %[[B]]
// CHECK: sagegpu.mbarrier_wait %[[BAR]], %{{.*}} : !sagegpu.smem<1xi64>
// CHECK: sagegpu.mbarrier_inval %[[BAR]]
// CHECK: sagegpu.bulk_load %{{.*}}[%{{.*}}], %[[BAR]] into %{{.*}} : !sage.ptr<f32>, !sagegpu.smem<1xi64>, !sagegpu.smem<1x128xf32, #{{.*}}>
// CHECK: sagegpu.barrier {fence_async}
// CHECK: sagegpu.dot %[[A]], %[[B]], %{{.*}} contract(1, 1) : !sagegpu.smem<64x128xi8, #{{.*}}>, !sagegpu.smem<64x128xi8, #{{.*}}> -> tensor<64x64xi32, #[[$MMA]]>
// CHECK: sagegpu.local_load %[[A]] : !sagegpu.smem<64x128xi8, #{{.*}}> -> tensor<64x128xi8, #[[$BLOCKED]]>
// CHECK: sagegpu.local_store %{{.*}}, %[[A]] : tensor<64x128xi8, #[[$BLOCKED]]> -> !sagegpu.smem<64x128xi8, #{{.*}}>
// CHECK: sagegpu.trans %{{.*}} : tensor<64x1xf32, #[[$BLOCKED]]> -> tensor<1x64xf32, #[[$BLOCKED]]>
#kmajor = #sagegpu.shared<swizzle = 128, bits = 8>
func.func @shared_memory(%t: tensor<64x128xi8, #blocked>, %p: !sage.ptr<i8>, %i: i64,
                         %fp: !sage.ptr<f32>,
                         %map: !sage.tensor_map, %z: tensor<64x64xi32, #mma>,
                         %s: tensor<64x1xf32, #blocked>) {
  %a = sagegpu.local_alloc %t : tensor<64x128xi8, #blocked> -> {offset = 0 : i64} !sagegpu.smem<64x128xi8, #kmajor>
  %b = sagegpu.local_alloc !sagegpu.smem<64x128xi8, #kmajor>
  sagegpu.async_copy %p[%i, %i] strides [%i, %i] bounds [%i, %i] into %b : !sage.ptr<i8> -> !sagegpu.smem<64x128xi8, #kmajor>
  sagegpu.async_commit_group
  sagegpu.async_wait 0
  %bar = sagegpu.local_alloc !sagegpu.smem<1xi64>
  sagegpu.mbarrier_init %bar, 1 : !sagegpu.smem<1xi64>
  sagegpu.tma_load %map[%i, %i], %bar into %b : !sagegpu.smem<1xi64>, !sagegpu.smem<64x128xi8, #kmajor>
  %phase = arith.constant 0 : i32
  sagegpu.mbarrier_wait %bar, %phase : !sagegpu.smem<1xi64>
  sagegpu.mbarrier_inval %bar : !sagegpu.smem<1xi64>
  %sc = sagegpu.local_alloc !sagegpu.smem<1x128xf32, #sagegpu.shared<swizzle = 0, bits = 32, inner = 1>>
  sagegpu.bulk_load %fp[%i], %bar into %sc : !sage.ptr<f32>, !sagegpu.smem<1xi64>, !sagegpu.smem<1x128xf32, #sagegpu.shared<swizzle = 0, bits = 32, inner = 1>>
  sagegpu.barrier {fence_async}
  %d = sagegpu.dot %a, %b, %z contract(1, 1) : !sagegpu.smem<64x128xi8, #kmajor>, !sagegpu.smem<64x128xi8, #kmajor> -> tensor<64x64xi32, #mma>
  %r = sagegpu.local_load %a : !sagegpu.smem<64x128xi8, #kmajor> -> tensor<64x128xi8, #blocked>
  sagegpu.local_store %r, %a : tensor<64x128xi8, #blocked> -> !sagegpu.smem<64x128xi8, #kmajor>
  %st = sagegpu.trans %s : tensor<64x1xf32, #blocked> -> tensor<1x64xf32, #blocked>
  return
}

// A wgmma dot's results become readable through sagegpu.dot_wait.
// CHECK-LABEL: func.func @dot_wait
// CHECK: %[[D:.*]] = sagegpu.dot %{{.*}}, %{{.*}}, %{{.*}} contract(1, 1) : !sagegpu.smem<128x128xi8, #{{.*}}>, !sagegpu.smem<64x128xi8, #{{.*}}> -> tensor<128x64xi32, #[[$WGMMA]]>
// CHECK: %[[E:.*]] = sagegpu.dot
// CHECK: %[[W:.*]] = sagegpu.dot_wait %[[D]] {pendings = 1 : i32} : tensor<128x64xi32, #[[$WGMMA]]>
// CHECK: %[[X:.*]]:2 = sagegpu.dot_wait %[[E]], %[[E]] {pendings = 0 : i32} : tensor<128x64xi32, #[[$WGMMA]]>, tensor<128x64xi32, #[[$WGMMA]]>
// CHECK: return %[[W]], %[[X]]#1
func.func @dot_wait(%a: !sagegpu.smem<128x128xi8, #kmajor>, %b: !sagegpu.smem<64x128xi8, #kmajor>,
                    %z: tensor<128x64xi32, #wgmma>) -> (tensor<128x64xi32, #wgmma>, tensor<128x64xi32, #wgmma>) {
  %d = sagegpu.dot %a, %b, %z contract(1, 1) : !sagegpu.smem<128x128xi8, #kmajor>, !sagegpu.smem<64x128xi8, #kmajor> -> tensor<128x64xi32, #wgmma>
  %e = sagegpu.dot %a, %b, %z contract(1, 1) : !sagegpu.smem<128x128xi8, #kmajor>, !sagegpu.smem<64x128xi8, #kmajor> -> tensor<128x64xi32, #wgmma>
  %w = sagegpu.dot_wait %d {pendings = 1 : i32} : tensor<128x64xi32, #wgmma>
  %x:2 = sagegpu.dot_wait %e, %e {pendings = 0 : i32} : tensor<128x64xi32, #wgmma>, tensor<128x64xi32, #wgmma>
  return %w, %x#1 : tensor<128x64xi32, #wgmma>, tensor<128x64xi32, #wgmma>
}

// A ring of tiles and one of mbarriers, and a slot of each.
// CHECK-LABEL: func.func @rings
// CHECK: %[[R:.*]] = sagegpu.local_alloc !sagegpu.smem<2x64x128xi8, #[[$SH]]>
// CHECK: %[[B:.*]] = sagegpu.local_alloc !sagegpu.smem<2xi64>
// CHECK: sagegpu.ring_slot %[[R]][%{{.*}}] : !sagegpu.smem<2x64x128xi8, #[[$SH]]> -> !sagegpu.smem<64x128xi8, #[[$SH]]>
// CHECK: sagegpu.ring_slot %[[B]][%{{.*}}] : !sagegpu.smem<2xi64> -> !sagegpu.smem<1xi64>
func.func @rings(%i: i32) {
  %r = sagegpu.local_alloc !sagegpu.smem<2x64x128xi8, #kmajor>
  %b = sagegpu.local_alloc !sagegpu.smem<2xi64>
  %t = sagegpu.ring_slot %r[%i] : !sagegpu.smem<2x64x128xi8, #kmajor> -> !sagegpu.smem<64x128xi8, #kmajor>
  %m = sagegpu.ring_slot %b[%i] : !sagegpu.smem<2xi64> -> !sagegpu.smem<1xi64>
  sagegpu.mbarrier_init %m, 1 : !sagegpu.smem<1xi64>
  return
}
