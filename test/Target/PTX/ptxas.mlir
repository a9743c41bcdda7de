// ptxas accepts the PTX of every example for sm_90a and sm_80, with no
// spills, on every path (both wgmma forms, TMA and cp.async copies).
// REQUIRES: ptxas
// RUN: sage-translate %S/../../../examples/quant_matmul.mlir --arch=sm_90a -o %t.sm90.ptx
// RUN: %ptxas -arch=sm_90a -v %t.sm90.ptx -o %t.sm90.cubin 2>&1 | FileCheck %s
// RUN: sage-translate %S/../../../examples/quant_matmul.mlir --arch=sm_80 -o %t.sm80.ptx
// RUN: %ptxas -arch=sm_80 -v %t.sm80.ptx -o %t.sm80.cubin 2>&1 | FileCheck %s
// RUN: sage-translate %S/../../../examples/sagebwd_forward.mlir --arch=sm_90a -o %t.fwd.ptx
// RUN: %ptxas -arch=sm_90a -v %t.fwd.ptx -o %t.fwd.cubin 2>&1 | FileCheck %s
// RUN: sage-translate %S/../../../examples/sagebwd_forward.mlir --arch=sm_80 -o %t.fwd80.ptx
// RUN: %ptxas -arch=sm_80 -v %t.fwd80.ptx -o %t.fwd80.cubin 2>&1 | FileCheck %s
// RUN: sage-translate %S/../../../examples/quantize_tile.mlir --arch=sm_90a -o %t.qt.ptx
// RUN: %ptxas -arch=sm_90a -v %t.qt.ptx -o %t.qt.cubin 2>&1 | FileCheck %s
// RUN: sage-translate %S/../../../examples/quantize_tile.mlir --arch=sm_80 -o %t.qt80.ptx
// RUN: %ptxas -arch=sm_80 -v %t.qt80.ptx -o %t.qt80.cubin 2>&1 | FileCheck %s
// RUN: sage-translate %S/../../../examples/half_matmul.mlir --arch=sm_90a -o %t.hm.ptx
// RUN: %ptxas -arch=sm_90a -v %t.hm.ptx -o %t.hm.cubin 2>&1 | FileCheck %s
// RUN: sage-translate %S/../../../examples/half_matmul.mlir --arch=sm_80 -o %t.hm80.ptx
// RUN: %ptxas -arch=sm_80 -v %t.hm80.ptx -o %t.hm80.cubin 2>&1 | FileCheck %s

// Each wgmma form on sm_90a: quant_matmul's A is quantized in the kernel
// (register A, chosen by sage-select-mma), half_matmul's is loaded
// (descriptors); the other form of each is forced.
// RUN: FileCheck %s --check-prefix=REGA --input-file=%t.sm90.ptx
// RUN: FileCheck %s --check-prefix=DESC --input-file=%t.hm.ptx
// RUN: sed -E 's/(sage\.qmatmul [^:]*contract\(1, 1\))/\1 using wgmma/' %S/../../../examples/quant_matmul.mlir | sage-translate - --arch=sm_90a -o %t.qdesc.ptx
// RUN: FileCheck %s --check-prefix=DESC --input-file=%t.qdesc.ptx
// RUN: %ptxas -arch=sm_90a -v %t.qdesc.ptx -o %t.qdesc.cubin 2>&1 | FileCheck %s
// RUN: sed -E 's/(sage\.matmul [^:]*contract\(1, 1\))/\1 using wgmma_reg_a/' %S/../../../examples/half_matmul.mlir | sage-translate - --arch=sm_90a -o %t.hrega.ptx
// RUN: FileCheck %s --check-prefix=REGA --input-file=%t.hrega.ptx
// RUN: %ptxas -arch=sm_90a -v %t.hrega.ptx -o %t.hrega.cubin 2>&1 | FileCheck %s
// REGA: wgmma.mma_async.sync.aligned.m64n64k{{16|32}}.{{[a-z0-9.]+}} {{[{]}}{{[^}]*}}}, {{[{]}}%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}}, %rd{{[0-9]+}}, p
// DESC: wgmma.mma_async.sync.aligned.m64n64k{{16|32}}.{{[a-z0-9.]+}} {{[{]}}{{[^}]*}}}, %rd{{[0-9]+}}, %rd{{[0-9]+}}, p

// CHECK-NOT: error
// CHECK: 0 bytes spill stores, 0 bytes spill loads

// Operands copied by the copy engine (examples/int8_matmul.mlir on sm_90a
// with PTX 8.3: tensor maps encoded by the launcher, or with
// sage.tensor_maps = "device" built on the device; an mbarrier per
// matmul), with cp.async on sm_90a under PTX 8.0 and on sm_80.
// RUN: sage-translate %S/../../../examples/int8_matmul.mlir --arch=sm_90a -o %t.i8.sm90.ptx
// RUN: FileCheck %s --check-prefix=HOST90 --input-file=%t.i8.sm90.ptx
// RUN: %ptxas -arch=sm_90a -v %t.i8.sm90.ptx -o %t.i8.sm90.cubin 2>&1 | FileCheck %s
// RUN: sed 's/module attributes {/module attributes {sage.tensor_maps = "device", /' %S/../../../examples/int8_matmul.mlir | sage-translate - --arch=sm_90a -o %t.i8.dev.ptx
// RUN: FileCheck %s --check-prefix=TMA90 --input-file=%t.i8.dev.ptx
// RUN: %ptxas -arch=sm_90a -v %t.i8.dev.ptx -o %t.i8.dev.cubin 2>&1 | FileCheck %s
// RUN: sage-translate %S/../../../examples/int8_matmul.mlir --arch=sm_90a --ptx-version=80 -o %t.i8.sm90.ptx80.ptx
// RUN: FileCheck %s --check-prefix=ASYNC90 --input-file=%t.i8.sm90.ptx80.ptx
// RUN: %ptxas -arch=sm_90a -v %t.i8.sm90.ptx80.ptx -o %t.i8.sm90.ptx80.cubin 2>&1 | FileCheck %s
// RUN: sage-translate %S/../../../examples/int8_matmul.mlir --arch=sm_80 -o %t.i8.sm80.ptx
// RUN: FileCheck %s --check-prefix=ASYNC80 --input-file=%t.i8.sm80.ptx
// RUN: %ptxas -arch=sm_80 -v %t.i8.sm80.ptx -o %t.i8.sm80.cubin 2>&1 | FileCheck %s
// Host maps: no scratch; one 128-byte, 64-byte aligned parameter per map
// after the others, its fields as expressions of the arguments (B's, then
// A's: K bytes by N or M rows, rows K bytes apart), read in place.
// HOST90: // sage.kernel name=int8_matmul threads=128 shared_memory={{[0-9]+}} global_scratch=0
// HOST90-NEXT: // sage.tensor_map kernel=int8_matmul param=7 address=a1 dims=a6;a5 strides=a6 box=128,64 element_type=0 swizzle=3
// HOST90-NEXT: // sage.tensor_map kernel=int8_matmul param=8 address=a0 dims=a6;a4 strides=a6 box=128,64 element_type=0 swizzle=3
// HOST90: .param .align 64 .b8 int8_matmul_param_7[128],
// HOST90-NEXT: .param .align 64 .b8 int8_matmul_param_8[128]
// HOST90-NOT: tensormap.replace
// HOST90: cvta.param.u64
// HOST90: prefetch.tensormap
// HOST90-NOT: tensormap.replace
// HOST90-COUNT-2: cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// TMA90: // sage.kernel name=int8_matmul threads=128 shared_memory={{[0-9]+}} global_scratch=256
// TMA90-NOT: sage.tensor_map
// TMA90: .version 8.4
// Both maps (64 x 128 INT8 boxes) in the 128-byte swizzle mode (3).
// TMA90: tensormap.replace.tile.swizzle_mode.shared::cta.b1024.b32 [{{.*}}], 3;
// TMA90: tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned
// TMA90: tensormap.replace.tile.swizzle_mode.shared::cta.b1024.b32 [{{.*}}], 3;
// TMA90: tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned
// TMA90: mbarrier.init.shared::cta.b64
// TMA90: mbarrier.arrive.expect_tx.shared::cta.b64 _,
// TMA90-COUNT-2: cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// TMA90: mbarrier.try_wait.parity.shared::cta.b64
// TMA90: wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8
// TMA90: mbarrier.inval.shared::cta.b64
// ASYNC90: global_scratch=0
// ASYNC90: cp.async.cg.shared.global
// ASYNC90: cp.async.commit_group
// ASYNC90: cp.async.wait_group 0
// ASYNC90: wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8
// ASYNC80: cp.async.cg.shared.global
// ASYNC80: cp.async.wait_group 0
// ASYNC80: mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32
