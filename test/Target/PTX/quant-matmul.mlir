// The quant_matmul example all the way to PTX for both targets, and through
// ptxas with no register spills.
// RUN: sage-translate %S/../../../examples/quant_matmul.mlir --arch=sm_90a | FileCheck %s --check-prefixes=CHECK,SM90
// RUN: sage-translate %S/../../../examples/quant_matmul.mlir --arch=sm_80 | FileCheck %s --check-prefixes=CHECK,SM80

// CHECK: // sage.kernel name=quant_matmul threads=128 shared_memory={{[0-9]+}}
// SM90: .target sm_90a
// SM80: .target sm_80
// CHECK: .extern .shared .align 128 .b8 sage_scratch[];
// CHECK: .entry quant_matmul(
// CHECK: .maxntid 128, 1, 1
// Masked loads of the f16 operands.
// CHECK: @%p{{[0-9]+}} ld.global.b16
// Per-block absmax: shuffles across lanes, then across warps.
// CHECK: shfl.sync.bfly.b32
// CHECK: bar.sync 0;
// Round to nearest even, then the INT8 tensor-core product: wgmma from
// shared-memory descriptors on sm_90a, mma.sync elsewhere.
// CHECK-NOT: cvt.rni
// CHECK: mov.b32 %r[[MAGIC:[0-9]+]], 0f4B400000;
// CHECK: add.rn.f32 %r{{[0-9]+}}, %r{{[0-9]+}}, %r[[MAGIC]];
// SM90: fence.proxy.async.shared::cta
// SM90: wgmma.fence.sync.aligned
// SM90: wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8
// SM90: wgmma.commit_group.sync.aligned
// SM90: wgmma.wait_group.sync.aligned 0
// SM80: mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32
// CHECK: @%p{{[0-9]+}} st.global.f32
