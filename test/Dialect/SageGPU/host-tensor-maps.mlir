// RUN: sage-opt %s -split-input-file -sagegpu-host-tensor-maps | FileCheck %s

// Both maps are functions of the arguments: each becomes a last argument
// whose sage.host_tensor_map gives its fields (extents innermost first:
// bytes, rows, then the leading dimensions; byte strides of dimensions 1
// and up) as host expressions; the scratch argument and its size go.
// Identical maps share an argument.
// CHECK-LABEL: func.func @args
// CHECK-SAME: %arg4: i64, %arg5: !sage.tensor_map {sage.host_tensor_map = {address = "a0", box = array<i64: 128, 64, 1>, dims = ["mul64(trunc32(a4),2)", "div32(a2,2)", "a3"], element_type = 0 : i64, strides = ["mul64(zext32(a2),2)", "mul64(sub64(a4,1),2)"], swizzle = 3 : i64}
// CHECK-SAME: %arg6: !sage.tensor_map {sage.host_tensor_map = {address = "add64(a1,mul64(mul64(max64(a4,8),3),4))", box = array<i64: 32, 64>, dims = ["a4", "min64(a4,128)"], element_type = 7 : i64, strides = ["mul64(rem64(a4,64),4)"], swizzle = 3 : i64}
// CHECK-SAME: attributes {sage.kernel} {
// CHECK-NOT: sage.make_tensor_map
// CHECK-COUNT-2: sagegpu.tma_load %arg5
// CHECK: sagegpu.tma_store add %{{.*}} into %arg6
#shared = #sagegpu.shared<swizzle = 128, bits = 16>
#shared32 = #sagegpu.shared<swizzle = 128, bits = 32>
func.func @args(%q: !sage.ptr<bf16>, %o: !sage.ptr<f32>, %n: i32, %b: i32, %k: i64,
                %s: !sage.ptr<i8>) attributes {sage.kernel, sage.global_scratch = 384 : i64} {
  %c1 = arith.constant 1 : i64
  %c2 = arith.constant 2 : i32
  %c3 = arith.constant 3 : i64
  %c8 = arith.constant 8 : i64
  %c64 = arith.constant 64 : i64
  %c128 = arith.constant 128 : i64
  %rows32 = arith.divsi %n, %c2 : i32
  %rows = arith.extsi %rows32 : i32 to i64
  %batch = arith.extsi %b : i32 to i64
  %inner32 = arith.trunci %k : i64 to i32
  %inner = arith.extsi %inner32 : i32 to i64
  %stride = arith.extui %n : i32 to i64
  %lead = arith.subi %k, %c1 : i64
  %m1 = sage.make_tensor_map %q strides [%lead, %stride, %c1] bounds [%batch, %rows, %inner] box [64, 128] inner 1 swizzle 128 scratch %s[0] : !sage.ptr<bf16>, !sage.ptr<i8>
  %m2 = sage.make_tensor_map %q strides [%lead, %stride, %c1] bounds [%batch, %rows, %inner] box [64, 128] inner 1 swizzle 128 scratch %s[1] : !sage.ptr<bf16>, !sage.ptr<i8>
  %big = arith.maxsi %k, %c8 : i64
  %off = arith.muli %big, %c3 : i64
  %base = sage.addptr %o, %off : !sage.ptr<f32>
  %r = arith.remsi %k, %c64 : i64
  %few = arith.minsi %k, %c128 : i64
  %m3 = sage.make_tensor_map %base strides [%r, %c1] bounds [%few, %k] box [64, 32] inner 1 swizzle 128 typed scratch %s[2] : !sage.ptr<f32>, !sage.ptr<i8>
  %t = sagegpu.local_alloc {offset = 0 : i64} !sagegpu.smem<64x128xbf16, #shared>
  %u = sagegpu.local_alloc {offset = 16384 : i64} !sagegpu.smem<64x32xf32, #shared32>
  %bar = sagegpu.local_alloc {offset = 32768 : i64} !sagegpu.smem<1xi64>
  %i = arith.constant 0 : i64
  sagegpu.tma_load %m1[%i, %i] leading [%i], %bar into %t : !sagegpu.smem<1xi64>, !sagegpu.smem<64x128xbf16, #shared>
  sagegpu.tma_load %m2[%i, %i] leading [%i], %bar into %t : !sagegpu.smem<1xi64>, !sagegpu.smem<64x128xbf16, #shared>
  sagegpu.tma_store add %u into %m3[%i, %i] : !sagegpu.smem<64x32xf32, #shared32>
  return
}

// -----

// A view that depends on the program keeps its device-built map, in slot 0
// of a scratch one map long; the other map moves to the host.
// CHECK-LABEL: func.func @program
// CHECK-SAME: %arg2: !sage.ptr<i8>, %arg3: !sage.tensor_map {sage.host_tensor_map = {address = "a0", box = array<i64: 128, 64>, dims = ["a1", "a1"]
// CHECK-SAME: sage.global_scratch = 128 : i64
// CHECK: %[[ROWS:.*]] = arith.muli
// CHECK: %[[MAP:.*]] = sage.make_tensor_map %arg0 strides[%arg1, %{{.*}}] bounds[%[[ROWS]], %arg1] box [64, 128] inner 1 swizzle 128 scratch %arg2[0]
// CHECK: sagegpu.tma_load %arg3
// CHECK: sagegpu.tma_load %[[MAP]]
#shared = #sagegpu.shared<swizzle = 128, bits = 8>
func.func @program(%p: !sage.ptr<i8>, %n: i64, %s: !sage.ptr<i8>) attributes {sage.kernel, sage.global_scratch = 256 : i64} {
  %c1 = arith.constant 1 : i64
  %pid = sage.program_id 0
  %pid64 = arith.extsi %pid : i32 to i64
  %rows = arith.muli %pid64, %n : i64
  %m1 = sage.make_tensor_map %p strides [%n, %c1] bounds [%n, %n] box [64, 128] inner 1 swizzle 128 scratch %s[0] : !sage.ptr<i8>, !sage.ptr<i8>
  %m2 = sage.make_tensor_map %p strides [%n, %c1] bounds [%rows, %n] box [64, 128] inner 1 swizzle 128 scratch %s[1] : !sage.ptr<i8>, !sage.ptr<i8>
  %t = sagegpu.local_alloc {offset = 0 : i64} !sagegpu.smem<64x128xi8, #shared>
  %bar = sagegpu.local_alloc {offset = 8192 : i64} !sagegpu.smem<1xi64>
  %i = arith.constant 0 : i64
  sagegpu.tma_load %m1[%i, %i], %bar into %t : !sagegpu.smem<1xi64>, !sagegpu.smem<64x128xi8, #shared>
  sagegpu.tma_load %m2[%i, %i], %bar into %t : !sagegpu.smem<1xi64>, !sagegpu.smem<64x128xi8, #shared>
  return
}

// -----

// sage.tensor_maps = "device": every map stays on the device.
// CHECK-LABEL: func.func @device
// CHECK-SAME: (%arg0: !sage.ptr<i8>, %arg1: i64, %arg2: !sage.ptr<i8>) attributes {sage.global_scratch = 128 : i64
// CHECK: sage.make_tensor_map
#shared = #sagegpu.shared<swizzle = 128, bits = 8>
module attributes {sage.tensor_maps = "device"} {
  func.func @device(%p: !sage.ptr<i8>, %n: i64, %s: !sage.ptr<i8>) attributes {sage.kernel, sage.global_scratch = 128 : i64} {
    %c1 = arith.constant 1 : i64
    %m = sage.make_tensor_map %p strides [%n, %c1] bounds [%n, %n] box [64, 128] inner 1 swizzle 128 scratch %s[0] : !sage.ptr<i8>, !sage.ptr<i8>
    %t = sagegpu.local_alloc {offset = 0 : i64} !sagegpu.smem<64x128xi8, #shared>
    %bar = sagegpu.local_alloc {offset = 8192 : i64} !sagegpu.smem<1xi64>
    %i = arith.constant 0 : i64
    sagegpu.tma_load %m[%i, %i], %bar into %t : !sagegpu.smem<1xi64>, !sagegpu.smem<64x128xi8, #shared>
    return
  }
}
