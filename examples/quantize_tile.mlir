// Quantize 64x128 tiles of an f16 matrix per block and store the INT8 values
// and one f32 scale per tile: the quantizer on its own, so the GPU can be
// checked against the reference semantics bit for bit.
// Grid: ceil(M / 64) programs.
module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
  func.func @quantize_tile(%x: !sage.ptr<f16>, %q: !sage.ptr<i8>,
                           %scales: !sage.ptr<f32>, %m: i64)
      attributes {sage.kernel} {
    %c0 = arith.constant 0 : i64
    %c1 = arith.constant 1 : i64
    %c64 = arith.constant 64 : i64
    %c128 = arith.constant 128 : i64
    %pid = sage.program_id 0
    %block = arith.extsi %pid : i32 to i64
    %row = arith.muli %block, %c64 : i64
    %t = sage.load %x[%row, %c0] strides [%c128, %c1] bounds [%m, %c128]
        : !sage.ptr<f16> -> tensor<64x128xf16>
    %tq, %ts = sage.quantize #sage.int8<per_block> %t
        : tensor<64x128xf16> -> tensor<64x128xi8>, tensor<1x1xf32>
    sage.store %tq, %q[%row, %c0] strides [%c128, %c1] bounds [%m, %c128]
        : tensor<64x128xi8>, !sage.ptr<i8>
    %blocks = arith.addi %block, %c1 : i64
    sage.store %ts, %scales[%c0, %block] strides [%c0, %c1] bounds [%c1, %blocks]
        : tensor<1x1xf32>, !sage.ptr<f32>
    return
  }
}
