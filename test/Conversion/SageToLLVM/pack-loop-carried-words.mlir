// After the tile conversion, consecutive 16-bit float scalars a loop carries
// travel as vector<2xT> pairs and consecutive i8 scalars as vector<4xi8>
// (one 32-bit register across the back edge, not one per part); the body
// and the results see the parts again (bf16 halves widened to f32 straight
// from the pair's word). Other scalars are carried as they are.
// RUN: sage-opt %s --sagegpu-assign-layouts --convert-sage-to-llvm --canonicalize --cse | FileCheck %s

module attributes {sage.num_warps = 4 : i32} {
// A 16x32 bf16 tile: 4 halves a thread, carried as 2 pairs; the f32 tile
// beside it stays 4 scalars.
// CHECK-LABEL: func.func @halves_in_pairs
// CHECK-SAME: (%[[H0:[^:]*]]: bf16, %[[H1:[^:]*]]: bf16, %[[H2:[^:]*]]: bf16, %[[H3:[^:]*]]: bf16
// CHECK: %[[P0:.*]] = llvm.insertelement %[[H1]], %{{.*}}[%{{.*}} : i32] : vector<2xbf16>
// CHECK: %[[P1:.*]] = llvm.insertelement %[[H3]], %{{.*}}[%{{.*}} : i32] : vector<2xbf16>
// CHECK: %[[R:.*]]:6 = scf.for {{.*}} iter_args(%[[V0:.*]] = %[[P0]], %[[V1:.*]] = %[[P1]], {{.*}}) -> (vector<2xbf16>, vector<2xbf16>, f32, f32, f32, f32)
// CHECK-DAG: llvm.bitcast %[[V0]] : vector<2xbf16> to vector<1xi32>
// CHECK-DAG: llvm.bitcast %[[V1]] : vector<2xbf16> to vector<1xi32>
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

// A 16x32 i8 tile: 4 bytes a thread, carried as one word (SageBwd's P^,
// carried to the next trip's P·V).
// CHECK-LABEL: func.func @bytes_in_words
// CHECK-SAME: (%[[B0:[^:]*]]: i8, %[[B1:[^:]*]]: i8, %[[B2:[^:]*]]: i8, %[[B3:[^:]*]]: i8
// CHECK: %[[W:.*]] = llvm.insertelement %[[B3]], %{{.*}}[%{{.*}} : i32] : vector<4xi8>
// CHECK: %[[R:.*]]:5 = scf.for {{.*}} iter_args(%[[V:.*]] = %[[W]], {{.*}}) -> (vector<4xi8>, i32, i32, i32, i32)
// CHECK-COUNT-4: llvm.extractelement %[[V]][%{{.*}} : i32] : vector<4xi8>
// CHECK: scf.yield %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : vector<4xi8>, i32, i32, i32, i32
// CHECK-COUNT-4: llvm.extractelement %[[R]]#0
func.func @bytes_in_words(%b: tensor<16x32xi8>, %x: tensor<16x32xi32>, %n: index)
    -> (tensor<16x32xi8>, tensor<16x32xi32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%p = %b, %acc = %x)
      -> (tensor<16x32xi8>, tensor<16x32xi32>) {
    %w = arith.extsi %p : tensor<16x32xi8> to tensor<16x32xi32>
    %y = arith.addi %acc, %w : tensor<16x32xi32>
    %q = arith.trunci %y : tensor<16x32xi32> to tensor<16x32xi8>
    scf.yield %q, %y : tensor<16x32xi8>, tensor<16x32xi32>
  }
  return %r#0, %r#1 : tensor<16x32xi8>, tensor<16x32xi32>
}

// Fewer than four i8 scalars in a run (two 1x1 tiles) do not fill a word:
// carried as they are.
// CHECK-LABEL: func.func @bytes_short_of_a_word
// CHECK: scf.for {{.*}} -> (i8, i8, f32)
func.func @bytes_short_of_a_word(%a: tensor<1x1xi8>, %b: tensor<1x1xi8>, %x: tensor<1x1xf32>,
                                 %n: index) -> (tensor<1x1xi8>, tensor<1x1xi8>, tensor<1x1xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r:3 = scf.for %i = %c0 to %n step %c1 iter_args(%p = %a, %q = %b, %acc = %x)
      -> (tensor<1x1xi8>, tensor<1x1xi8>, tensor<1x1xf32>) {
    %s = arith.addi %p, %q : tensor<1x1xi8>
    %w = arith.sitofp %s : tensor<1x1xi8> to tensor<1x1xf32>
    %y = arith.addf %acc, %w : tensor<1x1xf32>
    scf.yield %q, %s, %y : tensor<1x1xi8>, tensor<1x1xi8>, tensor<1x1xf32>
  }
  return %r#0, %r#1, %r#2 : tensor<1x1xi8>, tensor<1x1xi8>, tensor<1x1xf32>
}
}
