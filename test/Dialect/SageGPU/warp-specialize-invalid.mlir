// Every sagegpu-warp-specialize diagnostic: what keeps a marked loop from
// getting a producer warpgroup.
// RUN: sage-opt %s --split-input-file --sage-select-mma --sagegpu-assign-layouts --loop-invariant-code-motion --sagegpu-promote-operands --loop-invariant-code-motion --canonicalize --cse --sagegpu-warp-specialize -verify-diagnostics
// RUN: not sage-opt %s --split-input-file --sagegpu-warp-specialize="producer-registers=36" 2>&1 | FileCheck %s --check-prefix=OPTION
// OPTION: producer-registers must be a multiple of 8 from 24 to 256, got 36

module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
func.func @unstaged(%a: !sage.ptr<i8> {sage.alignment = 16 : i64}, %k: i32,
                    %n: i64 {sage.divisibility = 16 : i64}) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i32
  %c0l = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c128 = arith.constant 128 : i32
  // expected-error @+1 {{marked sage.warp_specialize needs sage.num_stages >= 2}}
  scf.for %j = %c0 to %k step %c128 : i32 {
    %jj = arith.extsi %j : i32 to i64
    %at = sage.load %a[%c0l, %jj] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    sage.store %at, %a[%c0l, %c0l] strides [%n, %c1] bounds [%n, %n] : tensor<64x128xi8>, !sage.ptr<i8>
  } {sage.warp_specialize}
  return
}
}

// -----

module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
func.func @in_a_branch(%a: !sage.ptr<i8> {sage.alignment = 16 : i64}, %n: i64 {sage.divisibility = 16 : i64}, %k: i32, %p: i1) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i32
  %c128 = arith.constant 128 : i32
  %c0l = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  scf.if %p {
    // expected-error @+1 {{must be in the kernel body or in scf.for loops there, not in scf.if}}
    scf.for %j = %c0 to %k step %c128 : i32 {
      %jj = arith.extsi %j : i32 to i64
      %t = sage.load %a[%c0l, %jj] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
      sage.store %t, %a[%c0l, %c0l] strides [%n, %c1] bounds [%n, %n] : tensor<64x128xi8>, !sage.ptr<i8>
    } {sage.num_stages = 2 : i32, sage.warp_specialize}
  }
  return
}
}

// -----

module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
func.func @loops_in_two_blocks(%a: !sage.ptr<i8> {sage.alignment = 16 : i64}, %n: i64 {sage.divisibility = 16 : i64}, %k: i32) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i32
  %c128 = arith.constant 128 : i32
  %c0l = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %z = arith.constant dense<0> : tensor<64x128xi32>
  %r = scf.for %j = %c0 to %k step %c128 iter_args(%acc = %z) -> (tensor<64x128xi32>) : i32 {
    %jj = arith.extsi %j : i32 to i64
    %at = sage.load %a[%c0l, %jj] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    %bt = sage.load %a[%c0l, %jj] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<128x128xi8>
    %p = sage.matmul %at, %bt contract(1, 1) : tensor<64x128xi8>, tensor<128x128xi8> -> tensor<64x128xi32>
    %s = arith.addi %acc, %p : tensor<64x128xi32>
    scf.yield %s : tensor<64x128xi32>
  } {sage.num_stages = 2 : i32, sage.warp_specialize}
  scf.for %t = %c0 to %k step %c128 : i32 {
    // expected-error @+1 {{is a loop marked sage.warp_specialize outside the block of the first marked loop}}
    %r2 = scf.for %j = %c0 to %k step %c128 iter_args(%acc = %z) -> (tensor<64x128xi32>) : i32 {
      %jj = arith.extsi %j : i32 to i64
      %at = sage.load %a[%c0l, %jj] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
      %bt = sage.load %a[%c0l, %jj] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<128x128xi8>
      %p = sage.matmul %at, %bt contract(1, 1) : tensor<64x128xi8>, tensor<128x128xi8> -> tensor<64x128xi32>
      %s = arith.addi %acc, %p : tensor<64x128xi32>
      scf.yield %s : tensor<64x128xi32>
    } {sage.num_stages = 2 : i32, sage.warp_specialize}

  }
  return
}
}

// -----

module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
func.func @loops_with_other_stages(%a: !sage.ptr<i8> {sage.alignment = 16 : i64}, %n: i64 {sage.divisibility = 16 : i64}, %k: i32) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i32
  %c128 = arith.constant 128 : i32
  %c0l = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %z = arith.constant dense<0> : tensor<64x128xi32>
  %r = scf.for %j = %c0 to %k step %c128 iter_args(%acc = %z) -> (tensor<64x128xi32>) : i32 {
    %jj = arith.extsi %j : i32 to i64
    %at = sage.load %a[%c0l, %jj] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    %bt = sage.load %a[%c0l, %jj] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<128x128xi8>
    %p = sage.matmul %at, %bt contract(1, 1) : tensor<64x128xi8>, tensor<128x128xi8> -> tensor<64x128xi32>
    %s = arith.addi %acc, %p : tensor<64x128xi32>
    scf.yield %s : tensor<64x128xi32>
  } {sage.num_stages = 2 : i32, sage.warp_specialize}
  // expected-error @+1 {{has other sage.num_stages than the first loop marked sage.warp_specialize}}
  %r2 = scf.for %j = %c0 to %k step %c128 iter_args(%acc = %r) -> (tensor<64x128xi32>) : i32 {
    %jj = arith.extsi %j : i32 to i64
    %at = sage.load %a[%c0l, %jj] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    %bt = sage.load %a[%c0l, %jj] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<128x128xi8>
    %p = sage.matmul %at, %bt contract(1, 1) : tensor<64x128xi8>, tensor<128x128xi8> -> tensor<64x128xi32>
    %s = arith.addi %acc, %p : tensor<64x128xi32>
    scf.yield %s : tensor<64x128xi32>
  } {sage.num_stages = 3 : i32, sage.warp_specialize}
  return
}
}

// -----

module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
func.func @loops_with_other_copies(%a: !sage.ptr<i8> {sage.alignment = 16 : i64}, %n: i64 {sage.divisibility = 16 : i64}, %k: i32) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i32
  %c128 = arith.constant 128 : i32
  %c0l = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %z = arith.constant dense<0> : tensor<64x128xi32>
  %r = scf.for %j = %c0 to %k step %c128 iter_args(%acc = %z) -> (tensor<64x128xi32>) : i32 {
    %jj = arith.extsi %j : i32 to i64
    %at = sage.load %a[%c0l, %jj] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    %bt = sage.load %a[%c0l, %jj] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<128x128xi8>
    %p = sage.matmul %at, %bt contract(1, 1) : tensor<64x128xi8>, tensor<128x128xi8> -> tensor<64x128xi32>
    %s = arith.addi %acc, %p : tensor<64x128xi32>
    scf.yield %s : tensor<64x128xi32>
  } {sage.num_stages = 2 : i32, sage.warp_specialize}
  // expected-error @+1 {{is a warp-specialised loop whose copies differ from those of the first marked loop of its block}}
  %r2 = scf.for %j = %c0 to %k step %c128 iter_args(%acc = %r) -> (tensor<64x128xi32>) : i32 {
    %jj = arith.extsi %j : i32 to i64
    %at = sage.load %a[%c0l, %jj] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    %bt = sage.load %a[%c0l, %jj] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    %p = sage.matmul %at, %bt contract(1, 1) : tensor<64x128xi8>, tensor<64x128xi8> -> tensor<64x64xi32>
    %s = arith.addi %acc, %z : tensor<64x128xi32>
    scf.yield %s : tensor<64x128xi32>
  } {sage.num_stages = 2 : i32, sage.warp_specialize}
  return
}
}

// -----

module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
func.func @no_copies(%a: !sage.ptr<i8> {sage.alignment = 16 : i64}, %n: i64 {sage.divisibility = 16 : i64}, %k: i32) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i32
  %c128 = arith.constant 128 : i32
  %c0l = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  // expected-error @+1 {{has no TMA copies for a producer to issue}}
  scf.for %j = %c0 to %k step %c128 : i32 {
    %jj = arith.extsi %j : i32 to i64
    %t = sage.load %a[%c0l, %jj] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    sage.store %t, %a[%c0l, %c0l] strides [%n, %c1] bounds [%n, %n] : tensor<64x128xi8>, !sage.ptr<i8>
  } {sage.num_stages = 2 : i32, sage.warp_specialize}
  return
}
}

// -----

module attributes {sage.target = "sm_90a", sage.num_warps = 2 : i32} {
func.func @half_a_warpgroup(%a: !sage.ptr<i8> {sage.alignment = 16 : i64}, %n: i64 {sage.divisibility = 16 : i64}, %k: i32) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i32
  %c128 = arith.constant 128 : i32
  %c0l = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  // expected-error @+1 {{needs whole consumer warpgroups: the kernel has 2 warps}}
  scf.for %j = %c0 to %k step %c128 : i32 {
    %jj = arith.extsi %j : i32 to i64
    %t = sage.load %a[%c0l, %jj] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    sage.store %t, %a[%c0l, %c0l] strides [%n, %c1] bounds [%n, %n] : tensor<64x128xi8>, !sage.ptr<i8>
  } {sage.num_stages = 2 : i32, sage.warp_specialize}
  return
}
}

// -----

module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
func.func @carried_row(%a: !sage.ptr<i8> {sage.alignment = 16 : i64},
                       %b: !sage.ptr<i8> {sage.alignment = 16 : i64},
                       %c: !sage.ptr<i32> {sage.alignment = 16 : i64}, %k: i32,
                       %n: i64 {sage.divisibility = 16 : i64}) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i32
  %c0l = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c64l = arith.constant 64 : i64
  %c128 = arith.constant 128 : i32
  %z = arith.constant dense<0> : tensor<64x64xi32>
  // The row advances with a value the outer loop carries: the producer
  // cannot follow it.
  // expected-error @+1 {{the producer of a warp-specialised loop needs a value carried by an enclosing loop}}
  %last = scf.for %t = %c0 to %k step %c128 iter_args(%row = %c0l) -> (i64) : i32 {
    %r = scf.for %j = %c0 to %k step %c128 iter_args(%acc = %z) -> (tensor<64x64xi32>) : i32 {
      %jj = arith.extsi %j : i32 to i64
      %at = sage.load %a[%row, %jj] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
      %bt = sage.load %b[%c0l, %jj] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
      %p = sage.matmul %at, %bt acc %acc contract(1, 1) : tensor<64x128xi8>, tensor<64x128xi8> -> tensor<64x64xi32>
      scf.yield %p : tensor<64x64xi32>
    } {sage.num_stages = 2 : i32, sage.warp_specialize}
    sage.store %r, %c[%row, %c0l] strides [%n, %c1] bounds [%n, %n] : tensor<64x64xi32>, !sage.ptr<i32>
    %next = arith.addi %row, %c64l : i64
    scf.yield %next : i64
  }
  return
}
}

// -----

module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32, sage.maxnreg = 128 : i32} {
func.func @capped(%a: !sage.ptr<i8> {sage.alignment = 16 : i64}, %n: i64 {sage.divisibility = 16 : i64}, %k: i32) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i32
  %c128 = arith.constant 128 : i32
  %c0l = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  // expected-error @+1 {{in a kernel with a register cap (sage.maxnreg)}}
  scf.for %j = %c0 to %k step %c128 : i32 {
    %jj = arith.extsi %j : i32 to i64
    %t = sage.load %a[%c0l, %jj] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    sage.store %t, %a[%c0l, %c0l] strides [%n, %c1] bounds [%n, %n] : tensor<64x128xi8>, !sage.ptr<i8>
  } {sage.num_stages = 2 : i32, sage.warp_specialize}
  return
}
}

// -----

module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
func.func @ping_pong_alone(%a: !sage.ptr<i8> {sage.alignment = 16 : i64}, %n: i64 {sage.divisibility = 16 : i64}, %k: i32) attributes {sage.kernel} {
  %c0 = arith.constant 0 : i32
  %c128 = arith.constant 128 : i32
  %c0l = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %z = arith.constant dense<0> : tensor<64x128xi32>
  // expected-error @+1 {{marked sage.ping_pong needs 2 to 4 consumer warpgroups to take turns, the kernel has 1}}
  %r = scf.for %j = %c0 to %k step %c128 iter_args(%acc = %z) -> (tensor<64x128xi32>) : i32 {
    %jj = arith.extsi %j : i32 to i64
    %at = sage.load %a[%c0l, %jj] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x128xi8>
    %bt = sage.load %a[%c0l, %jj] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<128x128xi8>
    %p = sage.matmul %at, %bt contract(1, 1) : tensor<64x128xi8>, tensor<128x128xi8> -> tensor<64x128xi32>
    %s = arith.addi %acc, %p : tensor<64x128xi32>
    scf.yield %s : tensor<64x128xi32>
  } {sage.num_stages = 2 : i32, sage.warp_specialize, sage.ping_pong}
  return
}
}
