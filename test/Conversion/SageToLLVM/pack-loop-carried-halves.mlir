// After the tile conversion, consecutive 16-bit float scalars a loop carries
// travel as vector<2xT> pairs (one 32-bit register across the back edge,
// not one per half); the body and the results see the halves again. Other
// scalars are carried as they are.
// RUN: sage-opt %s --sagegpu-assign-layouts --convert-sage-to-llvm --canonicalize --cse | FileCheck %s

module attributes {sage.num_warps = 4 : i32} {
// A 16x32 bf16 tile: 4 halves a thread, carried as 2 pairs; the f32 tile
// beside it stays 4 scalars.
// CHECK-LABEL: func.func @halves_in_pairs
// CHECK-SAME: (%[[H0:[^:]*]]: bf16, %[[H1:[^:]*]]: bf16, %[[H2:[^:]*]]: bf16, %[[H3:[^:]*]]: bf16
// CHECK: %[[P0:.*]] = llvm.insertelement %[[H1]], %{{.*}}[%{{.*}} : i32] : vector<2xbf16>
// CHECK: %[[P1:.*]] = llvm.insertelement %[[H3]], %{{.*}}[%{{.*}} : i32] : vector<2xbf16>
// CHECK: %[[R:.*]]:6 = scf.for {{.*}} iter_args(%[[V0:.*]] = %[[P0]], %[[V1:.*]] = %[[P1]], {{.*}}) -> (vector<2xbf16>, vector<2xbf16>, f32, f32, f32, f32)
// CHECK-DAG: llvm.extractelement %[[V0]][%{{.*}} : i32] : vector<2xbf16>
// CHECK-DAG: llvm.extractelement %[[V1]][%{{.*}} : i32] : vector<2xbf16>
// CHECK: scf.yield %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : vector<2xbf16>, vector<2xbf16>, f32, f32, f32, f32
// CHECK: llvm.extractelement %[[R]]#0
// CHECK: llvm.extractelement %[[R]]#1
func.func @halves_in_pairs(%h: tensor<16x32xbf16>, %x: tensor<16x32xf32>, %n: index)
    -> (tensor<16x32xbf16>, tensor<16x32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%p = %h, %acc = %x)
      -> (tensor<16x32xbf16>, tensor<16x32xf32>) {
    %w = arith.extf %p : tensor<16x32xbf16> to tensor<16x32xf32>
    %y = arith.addf %acc, %w : tensor<16x32xf32>
    %q = arith.truncf %y : tensor<16x32xf32> to tensor<16x32xbf16>
    scf.yield %q, %y : tensor<16x32xbf16>, tensor<16x32xf32>
  }
  return %r#0, %r#1 : tensor<16x32xbf16>, tensor<16x32xf32>
}

// A lone 16-bit scalar (a 1x1 tile among others) has no partner: carried as
// it is.
// CHECK-LABEL: func.func @lone_half
// CHECK: scf.for {{.*}} -> (f16, f32)
func.func @lone_half(%h: tensor<1x1xf16>, %x: tensor<1x1xf32>, %n: index)
    -> (tensor<1x1xf16>, tensor<1x1xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%p = %h, %acc = %x)
      -> (tensor<1x1xf16>, tensor<1x1xf32>) {
    %w = arith.extf %p : tensor<1x1xf16> to tensor<1x1xf32>
    %y = arith.addf %acc, %w : tensor<1x1xf32>
    %q = arith.truncf %y : tensor<1x1xf32> to tensor<1x1xf16>
    scf.yield %q, %y : tensor<1x1xf16>, tensor<1x1xf32>
  }
  return %r#0, %r#1 : tensor<1x1xf16>, tensor<1x1xf32>
}
}
