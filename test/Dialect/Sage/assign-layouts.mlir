// sage-assign-layouts gives every tile the program's blocked layout.
// RUN: sage-opt %s --split-input-file --sage-assign-layouts | FileCheck %s

// CHECK: #blocked = #sage.blocked<size = [1, 4], threads = [4, 8], warps = [8, 1]>
// CHECK-LABEL: func.func @everything
// CHECK-SAME: (%{{.*}}: tensor<64x32xf32, #blocked>, %{{.*}}: index) -> tensor<64x1xf32, #blocked>
module attributes {sage.num_warps = 8 : i32} {
func.func @everything(%x: tensor<64x32xf32>, %n: index) -> tensor<64x1xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // CHECK: arith.constant dense<1.000000e+00> : tensor<64x32xf32, #blocked>
  %one = arith.constant dense<1.0> : tensor<64x32xf32>
  // CHECK: scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}) -> (tensor<64x32xf32, #blocked>)
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %x) -> (tensor<64x32xf32>) {
    // CHECK: arith.addf %{{.*}}, %{{.*}} : tensor<64x32xf32, #blocked>
    %y = arith.addf %acc, %one : tensor<64x32xf32>
    scf.yield %y : tensor<64x32xf32>
  }
  // CHECK: sage.reduce max %{{.*}} axis 1 : tensor<64x32xf32, #blocked> -> tensor<64x1xf32, #blocked>
  %m = sage.reduce max %r axis 1 : tensor<64x32xf32> -> tensor<64x1xf32>
  return %m : tensor<64x1xf32>
}
}

// -----

// Without sage.num_warps the program has 4 warps; scalars are untouched.
// CHECK: #sage.blocked<size = [1, 4], threads = [4, 8], warps = [4, 1]>
// CHECK-LABEL: func.func @default
// CHECK-SAME: (%{{.*}}: i64, %{{.*}}: !sage.ptr<f16>)
func.func @default(%n: i64, %p: !sage.ptr<f16>) -> tensor<16x16xf16> {
  %c1 = arith.constant 1 : i64
  %t = sage.load %p[%n, %n] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<f16> -> tensor<16x16xf16>
  return %t : tensor<16x16xf16>
}
