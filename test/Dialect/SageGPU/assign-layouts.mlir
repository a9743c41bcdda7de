// sagegpu-assign-layouts: matmul results anchor their groups at the
// accumulator encoding, statistics take the slice of their parent, tiles
// stored through a transposed view the transposing blocked encoding, the
// rest the default blocked one; converts appear only where constraints
// disagree.
// RUN: sage-opt %s --split-input-file --sagegpu-assign-layouts | FileCheck %s

// No matmul: everything blocked; a reduction's result is the slice of its
// input; loop-carried values keep one encoding.
// CHECK-DAG: #[[$B:.*]] = #sagegpu.blocked<size = [1, 4], threads = [4, 8], warps = [8, 1]>
// CHECK-DAG: #[[$S:.*]] = #sagegpu.slice<dim = 1, parent = #[[$B]]>
// CHECK-LABEL: func.func @everything
// CHECK-SAME: (%{{.*}}: tensor<64x32xf32, #[[$B]]>, %{{.*}}: index) -> tensor<64x1xf32, #[[$S]]>
module attributes {sage.num_warps = 8 : i32} {
func.func @everything(%x: tensor<64x32xf32>, %n: index) -> tensor<64x1xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // CHECK: arith.constant dense<1.000000e+00> : tensor<64x32xf32, #[[$B]]>
  %one = arith.constant dense<1.0> : tensor<64x32xf32>
  // CHECK: scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}) -> (tensor<64x32xf32, #[[$B]]>)
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %x) -> (tensor<64x32xf32>) {
    // CHECK: arith.addf %{{.*}}, %{{.*}} : tensor<64x32xf32, #[[$B]]>
    %y = arith.addf %acc, %one : tensor<64x32xf32>
    scf.yield %y : tensor<64x32xf32>
  }
  // CHECK: sage.reduce max %{{.*}} axis 1 : tensor<64x32xf32, #[[$B]]> -> tensor<64x1xf32, #[[$S]]>
  // CHECK-NOT: sagegpu.convert_layout
  %m = sage.reduce max %r axis 1 : tensor<64x32xf32> -> tensor<64x1xf32>
  return %m : tensor<64x1xf32>
}
}

// -----

// Without sage.num_warps the program has 4 warps; scalars are untouched.
// CHECK: #sagegpu.blocked<size = [1, 4], threads = [4, 8], warps = [4, 1]>
// CHECK-LABEL: func.func @default
// CHECK-SAME: (%{{.*}}: i64, %{{.*}}: !sage.ptr<f16>)
func.func @default(%n: i64, %p: !sage.ptr<f16>) -> tensor<16x16xf16> {
  %c1 = arith.constant 1 : i64
  %t = sage.load %p[%n, %n] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<f16> -> tensor<16x16xf16>
  return %t : tensor<16x16xf16>
}

// -----

// The online-softmax shape of the forward: S stays in the QK^T accumulator,
// its row statistics are slices of it, and the O accumulator, carried by
// the loop, stays in the PV accumulator; operands and loads stay blocked.
// CHECK-DAG: #[[$B:.*]] = #sagegpu.blocked<size = [1, 4], threads = [4, 8], warps = [4, 1]>
// CHECK-DAG: #[[$MMA:.*]] = #sagegpu.mma<mma_sync, warps = [4, 1]>
// CHECK-DAG: #[[$ROW:.*]] = #sagegpu.slice<dim = 1, parent = #[[$MMA]]>
// CHECK-LABEL: func.func @attention_step
// CHECK: scf.for {{.*}} -> (tensor<64x64xf32, #[[$MMA]]>, tensor<64x1xf32, #[[$ROW]]>)
// CHECK: sage.qmatmul {{.*}} -> tensor<64x64xf32, #[[$MMA]]>
// CHECK: sage.reduce max {{.*}} : tensor<64x64xf32, #[[$MMA]]> -> tensor<64x1xf32, #[[$ROW]]>
// CHECK: sage.broadcast {{.*}} : tensor<64x1xf32, #[[$ROW]]> -> tensor<64x64xf32, #[[$MMA]]>
// CHECK: math.exp2 {{.*}} : tensor<64x64xf32, #[[$MMA]]>
// CHECK: arith.fptosi {{.*}} : tensor<64x64xf32, #[[$MMA]]> to tensor<64x64xi8, #[[$MMA]]>
// CHECK: sage.qmatmul {{.*}} acc {{.*}} -> tensor<64x64xf32, #[[$MMA]]>
// CHECK-NOT: sagegpu.convert_layout
module attributes {sage.num_warps = 4 : i32, sage.target = "sm_80"} {
func.func @attention_step(%q: tensor<64x64xi8>, %k: tensor<64x64xi8>, %v: tensor<64x64xi8>,
                          %s1: tensor<1x1xf32>, %n: index) -> tensor<64x64xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %ninf = arith.constant dense<0xFF800000> : tensor<64x1xf32>
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%o = %zero, %m = %ninf) -> (tensor<64x64xf32>, tensor<64x1xf32>) {
    %s = sage.qmatmul %q[%s1], %k[%s1] contract(1, 1) using mma_sync : tensor<64x64xi8>, tensor<1x1xf32>, tensor<64x64xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
    %rowmax = sage.reduce max %s axis 1 : tensor<64x64xf32> -> tensor<64x1xf32>
    %newmax = arith.maximumf %m, %rowmax : tensor<64x1xf32>
    %b = sage.broadcast %newmax : tensor<64x1xf32> -> tensor<64x64xf32>
    %d = arith.subf %s, %b : tensor<64x64xf32>
    %p = math.exp2 %d : tensor<64x64xf32>
    %pq = arith.fptosi %p : tensor<64x64xf32> to tensor<64x64xi8>
    %o2 = sage.qmatmul %pq[%s1], %v[%s1] acc %o contract(1, 0) using mma_sync : tensor<64x64xi8>, tensor<1x1xf32>, tensor<64x64xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
    scf.yield %o2, %newmax : tensor<64x64xf32>, tensor<64x1xf32>
  }
  return %r#0 : tensor<64x64xf32>
}
}

// -----

// Two matmuls with different accumulators meet in one group: the second
// computes in its own and converts, its accumulator operand converts in.
// (With 8 warps a 64-row mma.sync tile splits its warps 4 x 2, while a
// wgmma accumulator stacks them along M.)
// CHECK-DAG: #[[$A:.*]] = #sagegpu.mma<mma_sync, warps = [4, 2]>
// CHECK-DAG: #[[$W:.*]] = #sagegpu.mma<wgmma, warps = [8, 1], n = 64>
// CHECK-LABEL: func.func @conflict
// CHECK: %[[X:.*]] = sage.qmatmul {{.*}} -> tensor<64x64xf32, #[[$A]]>
// CHECK: %[[IN:.*]] = sagegpu.convert_layout %[[X]] : tensor<64x64xf32, #[[$A]]> -> tensor<64x64xf32, #[[$W]]>
// CHECK: %[[Y:.*]] = sage.qmatmul {{.*}} acc %[[IN]] {{.*}} -> tensor<64x64xf32, #[[$W]]>
// CHECK: %[[OUT:.*]] = sagegpu.convert_layout %[[Y]] : tensor<64x64xf32, #[[$W]]> -> tensor<64x64xf32, #[[$A]]>
// CHECK: return %[[OUT]]
module attributes {sage.num_warps = 8 : i32} {
func.func @conflict(%a: tensor<64x64xi8>, %s: tensor<1x1xf32>) -> tensor<64x64xf32> {
  %x = sage.qmatmul %a[%s], %a[%s] contract(1, 1) using mma_sync : tensor<64x64xi8>, tensor<1x1xf32>, tensor<64x64xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  %y = sage.qmatmul %a[%s], %a[%s] acc %x contract(1, 1) using wgmma : tensor<64x64xi8>, tensor<1x1xf32>, tensor<64x64xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  return %y : tensor<64x64xf32>
}
}

// -----

// With warps along M only, the mma.sync and wgmma accumulators of a tile are
// one linear layout: they share a group without any conversion.
// CHECK-LABEL: func.func @agree
// CHECK-NOT: sagegpu.convert_layout
// CHECK: return
func.func @agree(%a: tensor<64x64xi8>, %s: tensor<1x1xf32>) -> tensor<64x64xf32> {
  %x = sage.qmatmul %a[%s], %a[%s] contract(1, 1) using mma_sync : tensor<64x64xi8>, tensor<1x1xf32>, tensor<64x64xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  %y = sage.qmatmul %a[%s], %a[%s] acc %x contract(1, 1) using wgmma : tensor<64x64xi8>, tensor<1x1xf32>, tensor<64x64xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  return %y : tensor<64x64xf32>
}

// -----

// A statistic broadcast into a tile whose encoding it is not a slice of
// converts first.
// CHECK-DAG: #[[$B:.*]] = #sagegpu.blocked<size = [1, 4], threads = [4, 8], warps = [4, 1]>
// CHECK-DAG: #[[$MMA:.*]] = #sagegpu.mma<mma_sync, warps = [4, 1]>
// CHECK-DAG: #[[$ROWB:.*]] = #sagegpu.slice<dim = 1, parent = #[[$B]]>
// CHECK-DAG: #[[$ROWM:.*]] = #sagegpu.slice<dim = 1, parent = #[[$MMA]]>
// CHECK-LABEL: func.func @mismatch
// CHECK: %[[M:.*]] = sage.reduce max %{{.*}} : tensor<64x64xf32, #[[$MMA]]> -> tensor<64x1xf32, #[[$ROWM]]>
// CHECK: %[[C:.*]] = sagegpu.convert_layout %[[M]] : tensor<64x1xf32, #[[$ROWM]]> -> tensor<64x1xf32, #[[$ROWB]]>
// CHECK: sage.broadcast %[[C]] : tensor<64x1xf32, #[[$ROWB]]> -> tensor<64x64xf32, #[[$B]]>
func.func @mismatch(%a: tensor<64x64xi8>, %s: tensor<1x1xf32>, %t: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %x = sage.qmatmul %a[%s], %a[%s] contract(1, 1) using mma_sync : tensor<64x64xi8>, tensor<1x1xf32>, tensor<64x64xi8>, tensor<1x1xf32> -> tensor<64x64xf32>
  %m = sage.reduce max %x axis 1 : tensor<64x64xf32> -> tensor<64x1xf32>
  %b = sage.broadcast %m : tensor<64x1xf32> -> tensor<64x64xf32>
  %y = arith.addf %b, %t : tensor<64x64xf32>
  return %y : tensor<64x64xf32>
}

// -----

// A tile no matmul reaches that is stored through a transposed view (unit
// stride along rows) takes the transposing layout: 8 rows of 4 columns a
// thread, vectors along its rows for the loads and along its columns for
// the transposed store, 4 lanes down the rows (a store fills 32-byte
// sectors), with no conversion. Row-major stores keep it too.
// CHECK-DAG: #[[$BOTH:.*]] = #sagegpu.blocked<size = [8, 4], threads = [4, 8], warps = [2, 2]>
// CHECK-LABEL: func.func @transposed_store
// CHECK: %[[T:.*]] = sage.load {{.*}} -> tensor<64x64xi8, #[[$BOTH]]>
// CHECK: sage.store %[[T]], {{.*}} : tensor<64x64xi8, #[[$BOTH]]>
// CHECK-NOT: sagegpu.convert_layout
// CHECK: sage.store %[[T]], {{.*}} strides[%{{.*}}, %{{.*}}] {{.*}} : tensor<64x64xi8, #[[$BOTH]]>
func.func @transposed_store(%src: !sage.ptr<i8>, %dst: !sage.ptr<i8>, %n: i64) {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %t = sage.load %src[%c0, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x64xi8>
  sage.store %t, %dst[%c0, %c0] strides [%n, %c1] bounds [%n, %n] : tensor<64x64xi8>, !sage.ptr<i8>
  sage.store %t, %dst[%c0, %c0] strides [%c1, %n] bounds [%n, %n] : tensor<64x64xi8>, !sage.ptr<i8>
  return
}

// -----

// A tile too short for the transposing layout (4 elements a thread: one
// row of 4 columns) stays row-wise blocked and converts to a column-wise blocked
// encoding for the transposed store: 4 bytes of a column a thread, lanes
// and warps across the columns.
// CHECK-DAG: #[[$ROWS:.*]] = #sagegpu.blocked<size = [1, 4], threads = [4, 8], warps = [4, 1]>
// CHECK-DAG: #[[$COLS:.*]] = #sagegpu.blocked<size = [4, 1], threads = [2, 16], warps = [1, 4]>
// CHECK-LABEL: func.func @transposed_short
// CHECK: %[[T:.*]] = sage.load {{.*}} -> tensor<8x64xi8, #[[$ROWS]]>
// CHECK: %[[C:.*]] = sagegpu.convert_layout %[[T]] : tensor<8x64xi8, #[[$ROWS]]> -> tensor<8x64xi8, #[[$COLS]]>
// CHECK: sage.store %[[C]], {{.*}} strides[%{{.*}}, %{{.*}}] {{.*}} : tensor<8x64xi8, #[[$COLS]]>
func.func @transposed_short(%src: !sage.ptr<i8>, %dst: !sage.ptr<i8>, %n: i64) {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %t = sage.load %src[%c0, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<8x64xi8>
  sage.store %t, %dst[%c0, %c0] strides [%c1, %n] bounds [%n, %n] : tensor<8x64xi8>, !sage.ptr<i8>
  return
}

// -----

// Grouped statistics (one value per row and column group) take the grouped
// slice of the accumulator; a 1xG scale broadcast onto them takes its slice,
// and the grouped broadcast back reads the grouped slice: no conversion.
// CHECK-DAG: #[[$W:.*]] = #sagegpu.mma<wgmma, warps = [4, 1], n = 128>
// CHECK-DAG: #[[$G:.*]] = #sagegpu.slice<dim = 1, parent = #[[$W]], groups = 6, extent = 128>
// CHECK-DAG: #[[$GS:.*]] = #sagegpu.slice<dim = 0, parent = #[[$G]]>
// CHECK-LABEL: func.func @column_groups
// CHECK-NOT: sagegpu.convert_layout
// CHECK: sage.reduce max %{{.*}} axis 1 groups 6 : tensor<64x128xf32, #[[$W]]> -> tensor<64x4xf32, #[[$G]]>
// CHECK: sage.broadcast %{{.*}} : tensor<1x4xf32, #[[$GS]]> -> tensor<64x4xf32, #[[$G]]>
// CHECK: sage.broadcast %{{.*}} groups 6 : tensor<64x4xf32, #[[$G]]> -> tensor<64x128xf32, #[[$W]]>
// CHECK-NOT: sagegpu.convert_layout
module attributes {sage.num_warps = 4 : i32} {
func.func @column_groups(%a: tensor<64x64xi8>, %b: tensor<128x64xi8>, %s: tensor<1x1xf32>, %k: tensor<1x4xf32>) -> tensor<64x128xf32> {
  %x = sage.qmatmul %a[%s], %b[%s] contract(1, 1) using wgmma : tensor<64x64xi8>, tensor<1x1xf32>, tensor<128x64xi8>, tensor<1x1xf32> -> tensor<64x128xf32>
  %m = sage.reduce max %x axis 1 groups 6 : tensor<64x128xf32> -> tensor<64x4xf32>
  %kb = sage.broadcast %k : tensor<1x4xf32> -> tensor<64x4xf32>
  %r = arith.mulf %m, %kb : tensor<64x4xf32>
  %e = sage.broadcast %r groups 6 : tensor<64x4xf32> -> tensor<64x128xf32>
  %y = arith.mulf %x, %e : tensor<64x128xf32>
  return %y : tensor<64x128xf32>
}
}
