// The mma.sync path on sm_90a (a matmul too narrow for wgmma, and one pinned
// to mma_sync) goes through ptxas without spills, as the wgmma path does.
// REQUIRES: ptxas
// RUN: sage-translate %s --arch=sm_90a -o %t.ptx
// RUN: FileCheck %s --input-file=%t.ptx
// RUN: %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// CHECK: mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32
// CHECK: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// CHECK-NOT: wgmma
// PTXAS-NOT: error
// PTXAS: 0 bytes spill stores, 0 bytes spill loads

module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
  func.func @narrow(%a: !sage.ptr<i8>, %h: !sage.ptr<f16>, %c: !sage.ptr<f32>, %n: i64)
      attributes {sage.kernel} {
    %c0 = arith.constant 0 : i64
    %c1 = arith.constant 1 : i64
    %c64 = arith.constant 64 : i64
    %one = arith.constant dense<1.0> : tensor<1x1xf32>
    %q = sage.load %a[%c0, %c0] strides [%c64, %c1] bounds [%n, %c64] : !sage.ptr<i8> -> tensor<16x64xi8>
    %k = sage.load %a[%c0, %c0] strides [%c64, %c1] bounds [%n, %c64] : !sage.ptr<i8> -> tensor<32x64xi8>
    %s = sage.qmatmul %q[%one], %k[%one] contract(1, 1) : tensor<16x64xi8>, tensor<1x1xf32>, tensor<32x64xi8>, tensor<1x1xf32> -> tensor<16x32xf32>
    sage.store %s, %c[%c0, %c0] strides [%c64, %c1] bounds [%n, %n] : tensor<16x32xf32>, !sage.ptr<f32>
    %x = sage.load %h[%c0, %c0] strides [%c64, %c1] bounds [%n, %c64] : !sage.ptr<f16> -> tensor<64x64xf16>
    %d = sage.matmul %x, %x contract(1, 1) using mma_sync : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
    sage.store %d, %c[%c0, %c0] strides [%c64, %c1] bounds [%n, %n] : tensor<64x64xf32>, !sage.ptr<f32>
    return
  }
}
