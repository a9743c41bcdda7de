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
