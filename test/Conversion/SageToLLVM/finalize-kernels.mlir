// Lowered sage kernels become NVVM kernels sized by sage.num_warps.
// RUN: sage-opt %s --split-input-file --sage-finalize-kernels | FileCheck %s

module attributes {sage.num_warps = 8 : i32} {
  // CHECK: llvm.func @k() attributes {nvvm.kernel, nvvm.maxntid = array<i32: 256, 1, 1>, nvvm.minctasm = 1 : i32, sage.kernel, sage.shared_memory = 64 : i64}
  llvm.func @k() attributes {sage.kernel, sage.shared_memory = 64 : i64} {
    llvm.return
  }
  // CHECK: llvm.func @helper()
  // CHECK-NOT: nvvm.kernel
  llvm.func @helper() {
    llvm.return
  }
}

// -----

// A register cap (sage.maxnreg) replaces the one-program floor.
module attributes {sage.num_warps = 4 : i32, sage.maxnreg = 128 : i32} {
  // CHECK: llvm.func @capped() attributes {nvvm.kernel, nvvm.maxnreg = 128 : i32, nvvm.maxntid = array<i32: 128, 1, 1>, sage.kernel}
  llvm.func @capped() attributes {sage.kernel} {
    llvm.return
  }
}

// -----

// Programs in clusters of sage.num_ctas along axis 0 (.reqnctapercluster).
module attributes {sage.num_warps = 4 : i32, sage.num_ctas = 8 : i32} {
  // CHECK: llvm.func @clustered() attributes {nvvm.cluster_dim = array<i32: 8, 1, 1>, nvvm.kernel, nvvm.maxntid = array<i32: 128, 1, 1>, nvvm.minctasm = 1 : i32, sage.kernel}
  llvm.func @clustered() attributes {sage.kernel} {
    llvm.return
  }
}

// -----

// A host-encoded tensor map is a 128-byte parameter, 64-byte aligned, read
// in place (grid constant); thread 0 prefetches it on entry.
module attributes {sage.num_warps = 4 : i32} {
  // CHECK-LABEL: llvm.func @mapped
  // CHECK-SAME: %arg1: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant, sage.host_tensor_map
  // CHECK: %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x
  // CHECK: %[[MAP:.*]] = llvm.ptrtoint %arg1
  // CHECK: llvm.inline_asm has_side_effects {{.*}}"{ .reg .pred p; setp.eq.u32 p, $1, 0; @p prefetch.tensormap [$0]; }", "l,r" %[[MAP]], %[[TID]]
  llvm.func @mapped(%n: i64, %m: !llvm.ptr {sage.host_tensor_map = {address = "a0", dims = ["a0", "a0"], strides = ["a0"], box = array<i64: 64, 64>, element_type = 0 : i64, swizzle = 3 : i64}}) attributes {sage.kernel} {
    llvm.return
  }
}
