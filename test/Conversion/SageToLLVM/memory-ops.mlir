// Masked loads and stores: each thread moves the elements it holds with
// predicated PTX; replicated copies do not store.
// RUN: sage-opt %s --sagegpu-assign-layouts --sagegpu-allocate-shared-memory --convert-sage-to-llvm --canonicalize | FileCheck %s
// RUN: sage-opt %s --sagegpu-assign-layouts --sagegpu-allocate-shared-memory --convert-sage-to-llvm="ptx-version=80" --canonicalize | FileCheck %s --check-prefix=PTX80

module attributes {sage.num_warps = 4 : i32, sage.target = "sm_90a"} {
// 16x32 f16 with the 4-warp layout (layout tile 16x32): 4 elements a thread.
// CHECK-LABEL: func.func @copy
func.func @copy(%src: !sage.ptr<f16>, %dst: !sage.ptr<f16>, %n: i64) {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  // CHECK: nvvm.read.ptx.sreg.tid.x
  // CHECK-COUNT-4: llvm.inline_asm has_side_effects asm_dialect = att "mov.b16 $0, 0;\0A\09@$2 ld.global.b16 $0, [$1];", "=h,l,b"
  %t = sage.load %src[%c0, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<f16> -> tensor<16x32xf16>
  // CHECK-COUNT-4: llvm.inline_asm has_side_effects asm_dialect = att "@$2 st.global.b16 [$0], $1;", "l,h,b"
  sage.store %t, %dst[%c0, %c0] strides [%n, %c1] bounds [%n, %n] : tensor<16x32xf16>, !sage.ptr<f16>
  return
}

// Rows in sigma16 order: the tile row index i reads view row
// (i & ~14) | ((i >> 1) & 6) | ((i << 2) & 8) (sigma16Token), the bounds
// checked on that row.
// CHECK-LABEL: func.func @sigma16_rows
// CHECK-DAG: %[[KEEP:.*]] = arith.constant -15 : i64
// CHECK-DAG: %[[SIX:.*]] = arith.constant 6 : i64
// CHECK-DAG: %[[EIGHT:.*]] = arith.constant 8 : i64
// CHECK: arith.andi %{{.*}}, %[[KEEP]] : i64
// CHECK: arith.andi %{{.*}}, %[[SIX]] : i64
// CHECK: arith.andi %{{.*}}, %[[EIGHT]] : i64
// CHECK: arith.cmpi slt
// CHECK-COUNT-4: ld.global.b16
func.func @sigma16_rows(%src: !sage.ptr<f16>, %dst: !sage.ptr<f16>, %n: i64) {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %t = sage.load %src[%c0, %c0] strides [%n, %c1] bounds [%n, %n] sigma16_rows : !sage.ptr<f16> -> tensor<16x32xf16>
  sage.store %t, %dst[%c0, %c0] strides [%n, %c1] bounds [%n, %n] : tensor<16x32xf16>, !sage.ptr<f16>
  return
}

// A 16x1 column is replicated along dimension 1: only lanes at column
// position 0 own it, so stores are predicated on that.
// CHECK-LABEL: func.func @atomic_column
func.func @atomic_column(%dst: !sage.ptr<f32>, %n: i64, %v: f32) {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %t = sage.splat %v : f32 -> tensor<16x1xf32>
  // CHECK: arith.cmpi eq
  // CHECK: llvm.inline_asm has_side_effects asm_dialect = att "@$2 red.global.add.f32 [$0], $1;", "l,f,b"
  // CHECK-NOT: red.global
  sage.store atomic_add %t, %dst[%c0, %c0] strides [%c1, %c0] bounds [%n, %c1] : tensor<16x1xf32>, !sage.ptr<f32>
  return
}

// f32 atomic adds of consecutive elements go as vector reductions on sm_90
// from PTX ISA 8.1 on (here four per thread: 16 bytes); before it, one
// scalar red per element.
// CHECK-LABEL: func.func @atomic_vectors
// CHECK: "@$5 red.global.add.v4.f32 [$0], {$1, $2, $3, $4};", "l,f,f,f,f,b"
// CHECK-NOT: red.global
// PTX80-LABEL: func.func @atomic_vectors
// PTX80-COUNT-4: "@$2 red.global.add.f32 [$0], $1;", "l,f,b"
// PTX80-NOT: red.global
func.func @atomic_vectors(%dst: !sage.ptr<f32> {sage.alignment = 16 : i64},
                          %n: i64 {sage.divisibility = 16 : i64}, %v: f32) {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %t = sage.splat %v : f32 -> tensor<16x32xf32>
  sage.store atomic_add %t, %dst[%c0, %c0] strides [%n, %c1] bounds [%n, %n] : tensor<16x32xf32>, !sage.ptr<f32>
  return
}

// Four consecutive f16 of a row per thread, a 16-byte aligned pointer, a row
// stride and column bound divisible by 4: one 8-byte access each way.
// CHECK-LABEL: func.func @vectors
// CHECK: llvm.inline_asm has_side_effects asm_dialect = att "mov.b64 $0, 0;\0A\09@$2 ld.global.b64 $0, [$1];", "=l,l,b"
// CHECK-NOT: ld.global
// CHECK: llvm.bitcast %{{.*}} : vector<1xi64> to vector<4xf16>
// CHECK: llvm.inline_asm has_side_effects asm_dialect = att "@$2 st.global.b64 [$0], $1;", "l,l,b"
// CHECK-NOT: st.global
func.func @vectors(%src: !sage.ptr<f16> {sage.alignment = 16 : i64}, %dst: !sage.ptr<f16> {sage.alignment = 16 : i64},
                   %n: i64 {sage.divisibility = 16 : i64}) {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %t = sage.load %src[%c0, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<f16> -> tensor<16x32xf16>
  sage.store %t, %dst[%c0, %c0] strides [%n, %c1] bounds [%n, %n] : tensor<16x32xf16>, !sage.ptr<f16>
  return
}

// A transposed store (unit stride along rows) of a tile no matmul makes:
// each thread holds 8 rows of 4 columns (the transposing layout), and each
// column's run goes as one 8-byte store, its slots 4 apart (register bits
// 2-4); the offset is a min, a select and a difference of multiples of 64,
// so it keeps their divisor.
// CHECK-LABEL: func.func @transposed_bytes
// CHECK-COUNT-4: "@$2 st.global.b64 [$0], $1;", "l,l,b"
// CHECK-NOT: st.global
func.func @transposed_bytes(%dst: !sage.ptr<i8> {sage.alignment = 16 : i64},
                            %n: i64 {sage.divisibility = 16 : i64}, %a: i64, %b: i64, %c: i1,
                            %t: tensor<64x64xi8>) {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c64 = arith.constant 64 : i64
  %x = arith.muli %a, %c64 : i64
  %y = arith.muli %b, %c64 : i64
  %lo = arith.minsi %x, %y : i64
  %pick = arith.select %c, %x, %lo : i64
  %row = arith.subi %pick, %y : i64
  sage.store %t, %dst[%row, %c0] strides [%c1, %n] bounds [%n, %c64] : tensor<64x64xi8>, !sage.ptr<i8>
  return
}

// The same tile loaded along its rows and stored through a transposed
// view: 4-byte loads of a row's 4 columns (register bits 0-1), 8-byte
// stores of a column's 8 rows (register bits 2-4), no conversion between.
// CHECK-LABEL: func.func @rows_in_columns_out
// CHECK-COUNT-8: ld.global.b32
// CHECK-NOT: ld.global
// CHECK-COUNT-4: "@$2 st.global.b64 [$0], $1;", "l,l,b"
// CHECK-NOT: st.global
func.func @rows_in_columns_out(%src: !sage.ptr<i8> {sage.alignment = 16 : i64},
                               %dst: !sage.ptr<i8> {sage.alignment = 16 : i64},
                               %n: i64 {sage.divisibility = 16 : i64}) {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %t = sage.load %src[%c0, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<64x64xi8>
  sage.store %t, %dst[%c0, %c0] strides [%c1, %n] bounds [%n, %n] : tensor<64x64xi8>, !sage.ptr<i8>
  return
}

// Too few rows for the transposing layout (4 elements a thread: one row of
// 4 columns): the tile converts to the column-wise layout, 4 rows of one
// column a thread, one 4-byte store.
// CHECK-LABEL: func.func @transposed_short
// CHECK-COUNT-1: "@$2 st.global.b32 [$0], $1;", "l,r,b"
// CHECK-NOT: st.global
func.func @transposed_short(%dst: !sage.ptr<i8> {sage.alignment = 16 : i64},
                            %n: i64 {sage.divisibility = 16 : i64}, %t: tensor<8x64xi8>) {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  sage.store %t, %dst[%c0, %c0] strides [%c1, %n] bounds [%n, %n] : tensor<8x64xi8>, !sage.ptr<i8>
  return
}

// Offsets and bounds that are multiples of the tile's extent (16 rows,
// 32 columns): the tile is wholly in or wholly out of bounds, so one check
// of the offset serves every element (the columns' folds away). Elsewhere
// (@copy) each row and column is checked.
// CHECK-LABEL: func.func @whole_tile
// CHECK: %[[AT:.*]] = arith.muli %{{.*}}, %{{.*}} : i64
// CHECK: arith.cmpi sge, %[[AT]], %{{.*}} : i64
// CHECK: arith.cmpi slt, %[[AT]], %{{.*}} : i64
// CHECK-NOT: arith.cmpi
// CHECK-COUNT-4: ld.global.b16
// CHECK-NOT: arith.cmpi
// CHECK: return
func.func @whole_tile(%src: !sage.ptr<f16>, %x: i64, %y: i64) -> tensor<16x32xf16> {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c16 = arith.constant 16 : i64
  %c32 = arith.constant 32 : i64
  %row = arith.muli %x, %c16 : i64
  %rows = arith.muli %y, %c16 : i64
  %t = sage.load %src[%row, %c0] strides [%c32, %c1] bounds [%rows, %c32] : !sage.ptr<f16> -> tensor<16x32xf16>
  return %t : tensor<16x32xf16>
}

// i8 values travel in 16-bit registers.
// CHECK-LABEL: func.func @bytes
func.func @bytes(%src: !sage.ptr<i8>, %n: i64) -> tensor<16x32xi8> {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  // CHECK: "mov.b16 $0, 0;\0A\09@$2 ld.global.u8 $0, [$1];", "=h,l,b"
  // CHECK: llvm.trunc %{{.*}} : i16 to i8
  %t = sage.load %src[%c0, %c0] strides [%n, %c1] bounds [%n, %n] : !sage.ptr<i8> -> tensor<16x32xi8>
  return %t : tensor<16x32xi8>
}
}
