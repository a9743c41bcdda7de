// Elementwise ops run per held slot; broadcasts from a slice move no data.
// RUN: sage-opt %s --sagegpu-assign-layouts --convert-sage-to-llvm --canonicalize --cse | FileCheck %s

module attributes {sage.num_warps = 4 : i32} {
// 16x32 tiles: 4 elements a thread; a 16x1 column: 1 element a thread.
// CHECK-LABEL: func.func @rescale
// CHECK-SAME: (%[[A0:[^:]*]]: f32, %[[A1:[^:]*]]: f32, %[[A2:[^:]*]]: f32, %[[A3:[^:]*]]: f32, %[[C:[^:]*]]: f32)
// CHECK-SAME: -> (f32, f32, f32, f32)
func.func @rescale(%x: tensor<16x32xf32>, %col: tensor<16x1xf32>) -> tensor<16x32xf32> {
  // CHECK-DAG: %[[E0:.*]] = llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"(%[[C]]) : (f32) -> f32
  %e = math.exp2 %col : tensor<16x1xf32>
  %b = sage.broadcast %e : tensor<16x1xf32> -> tensor<16x32xf32>
  // CHECK-DAG: %[[M0:.*]] = arith.mulf %[[A0]], %[[E0]] : f32
  // CHECK-DAG: %[[M3:.*]] = arith.mulf %[[A3]], %[[E0]] : f32
  %m = arith.mulf %x, %b : tensor<16x32xf32>
  // CHECK-DAG: %[[K:.*]] = arith.constant 2.000000e+00 : f32
  %two = arith.constant dense<2.0> : tensor<16x32xf32>
  // CHECK-DAG: arith.addf %[[M0]], %[[K]] : f32
  %r = arith.addf %m, %two : tensor<16x32xf32>
  // CHECK: return
  return %r : tensor<16x32xf32>
}

// Iota gives each held element its column: the lane's field of the layout
// (lane % 8, times 4) XOR the slot's offset 0..3 for size [1, 4].
// CHECK-LABEL: func.func @columns
// CHECK: %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x
// CHECK: %[[LANE:.*]] = arith.andi %[[TID]], %c31_i32 : i32
// CHECK: %[[FIELD:.*]] = arith.andi %[[LANE]], %c7_i32 : i32
// CHECK: %[[BASE:.*]] = arith.muli %[[FIELD]], %c4_i32 : i32
// CHECK: %[[C1:.*]] = arith.xori %[[BASE]], %c1_i32
// CHECK: %[[C2:.*]] = arith.xori %[[BASE]], %c2_i32
// CHECK: %[[C3:.*]] = arith.xori %[[BASE]], %c3_i32
// CHECK: return %[[BASE]], %[[C1]], %[[C2]], %[[C3]]
func.func @columns() -> tensor<16x32xi32> {
  %i = sage.iota 1 : tensor<16x32xi32>
  return %i : tensor<16x32xi32>
}

// CHECK-LABEL: func.func @select_and_splat
// CHECK-COUNT-4: arith.select %{{.*}}, %{{.*}}, %{{.*}} : f32
func.func @select_and_splat(%x: tensor<16x32xf32>, %limit: i32) -> tensor<16x32xf32> {
  %i = sage.iota 1 : tensor<16x32xi32>
  %l = sage.splat %limit : i32 -> tensor<16x32xi32>
  %ok = arith.cmpi slt, %i, %l : tensor<16x32xi32>
  %ninf = arith.constant dense<0xFF800000> : tensor<16x32xf32>
  %r = arith.select %ok, %x, %ninf : tensor<16x32xi1>, tensor<16x32xf32>
  return %r : tensor<16x32xf32>
}

// Loops carry per-thread scalars.
// CHECK-LABEL: func.func @loop
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32)
func.func @loop(%x: tensor<16x32xf32>, %n: index) -> tensor<16x32xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %x) -> (tensor<16x32xf32>) {
    %y = arith.addf %acc, %x : tensor<16x32xf32>
    scf.yield %y : tensor<16x32xf32>
  }
  return %r : tensor<16x32xf32>
}

// math.fma (sl.fma) runs per held slot and stays one instruction.
// CHECK-LABEL: func.func @fused
// CHECK-COUNT-4: math.fma %{{.*}}, %{{.*}}, %{{.*}} : f32
func.func @fused(%a: tensor<16x32xf32>, %b: tensor<16x32xf32>, %c: tensor<16x32xf32>) -> tensor<16x32xf32> {
  %r = math.fma %a, %b, %c : tensor<16x32xf32>
  return %r : tensor<16x32xf32>
}
}
