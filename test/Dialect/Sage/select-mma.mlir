// sage-select-mma records the instruction family of every matmul.
// RUN: sage-opt %s --split-input-file --sage-select-mma | FileCheck %s

// sm_90a: wgmma when 64-row blocks split evenly over the warpgroups, with
// A from registers when the program computed it (here: an argument, not a
// load) and from shared memory when it is loaded.
// CHECK-LABEL: func.func @hopper
module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
func.func @hopper(%q: tensor<64x128xi8>, %s: tensor<1x1xf32>, %small: tensor<16x128xi8>,
                  %r40: tensor<40x128xi8>, %h: tensor<128x64xf16>,
                  %p: !sage.ptr<f16>, %n: i64) {
  // CHECK: contract(1, 1) using wgmma_reg_a
  %0 = sage.qmatmul %q[%s], %q[%s] contract(1, 1) : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  // 16 output rows are too few for a warpgroup: mma.sync.
  // CHECK: contract(1, 1) using mma_sync
  %1 = sage.qmatmul %small[%s], %q[%s] contract(1, 1) : tensor<16x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<16x64xf32>
  // INT8 wgmma has no N = 40: mma.sync.
  // CHECK: contract(1, 1) using mma_sync
  %2 = sage.qmatmul %q[%s], %r40[%s] contract(1, 1) : tensor<64x128xi8>, tensor<1x1xf32>, tensor<40x128xi8>, tensor<1x1xf32> -> tensor<64x40xf32>
  // CHECK: sage.matmul {{.*}} contract(1, 1) using wgmma_reg_a
  %3 = sage.matmul %h, %h contract(1, 1) : tensor<128x64xf16>, tensor<128x64xf16> -> tensor<128x128xf32>
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %loaded = sage.load %p[%c0, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<f16> -> tensor<128x64xf16>
  // CHECK: sage.matmul {{.*}} contract(1, 1) using wgmma :
  %5 = sage.matmul %loaded, %h contract(1, 1) : tensor<128x64xf16>, tensor<128x64xf16> -> tensor<128x128xf32>
  // A computed but contracted over its rows (dV = P^T dO): a register
  // fragment cannot be transposed, so A goes through shared memory.
  // CHECK: contract(0, 0) using wgmma :
  %6 = sage.qmatmul %q[%s], %q[%s] contract(0, 0) : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<128x128xf32>
  // An existing choice is kept.
  // CHECK: contract(1, 1) using mma_sync
  %4 = sage.qmatmul %q[%s], %q[%s] contract(1, 1) using mma_sync : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  return
}
}

// -----

// Other targets, or no target: mma.sync.
// CHECK-LABEL: func.func @ampere
module attributes {sage.target = "sm_90", sage.num_warps = 4 : i32} {
func.func @ampere(%q: tensor<64x128xi8>, %s: tensor<1x1xf32>) {
  // CHECK: using mma_sync
  %0 = sage.qmatmul %q[%s], %q[%s] contract(1, 1) : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  return
}
}

// -----

// Two warps cannot form a warpgroup.
// CHECK-LABEL: func.func @two_warps
module attributes {sage.target = "sm_90a", sage.num_warps = 2 : i32} {
func.func @two_warps(%q: tensor<64x128xi8>, %s: tensor<1x1xf32>) {
  // CHECK: using mma_sync
  %0 = sage.qmatmul %q[%s], %q[%s] contract(1, 1) : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  return
}
}

// -----

// A rhs in sigma16 order needs A in registers, even a loaded A.
module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
// CHECK-LABEL: func.func @sigma16_loaded_a
// CHECK: contract(1, 1) rhs_sigma16 using wgmma_reg_a
func.func @sigma16_loaded_a(%a: !sage.ptr<i8>, %n: i64, %b: tensor<64x64xi8>, %s: tensor<1x1xf32>) -> tensor<64x64xf32> {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %at = sage.load %a[%c0, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x64xi8>
  %o = sage.qmatmul %at[%s], %b[%s] contract(1, 1) rhs_sigma16 : tensor<64x64xi8>, tensor<1x1xf32>, tensor<64x64xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  return %o : tensor<64x64xf32>
}
}

// -----

// A computed outside the loop that runs the matmul goes through shared
// memory (stored once, it holds no registers across the loop); one computed
// in the loop stays in registers.
module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
// CHECK-LABEL: func.func @loop_invariant_a
func.func @loop_invariant_a(%q: tensor<64x128xi8>, %k: tensor<64x128xi8>, %s: tensor<1x1xf32>,
                            %n: index) -> tensor<64x64xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %out = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (tensor<64x64xf32>) {
    // CHECK: contract(1, 1) using wgmma :
    %s0 = sage.qmatmul %q[%s], %k[%s] contract(1, 1) : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
    %inner = arith.addi %q, %k : tensor<64x128xi8>
    // CHECK: contract(1, 1) using wgmma_reg_a
    %s1 = sage.qmatmul %inner[%s], %k[%s] contract(1, 1) : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
    %sum = arith.addf %s0, %s1 : tensor<64x64xf32>
    %next = arith.addf %acc, %sum : tensor<64x64xf32>
    scf.yield %next : tensor<64x64xf32>
  }
  return %out : tensor<64x64xf32>
}
}
