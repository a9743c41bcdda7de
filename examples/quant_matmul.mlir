// C = quantize(A) * quantize(B)^T for one 64x64 tile of C per program:
// A is M x K, B is N x K (both f16, row-major), K = 128 is one tile.
// Each operand tile is quantized per block (one INT8 scale per tile), the
// product runs on INT8 and is scaled back to f32. Tails in M and N are
// masked by the loads' and store's bounds.
module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
  func.func @quant_matmul(%a: !sage.ptr<f16>, %b: !sage.ptr<f16>,
                          %c: !sage.ptr<f32>, %m: i64, %n: i64)
      attributes {sage.kernel} {
    %c0 = arith.constant 0 : i64
    %c1 = arith.constant 1 : i64
    %c64 = arith.constant 64 : i64
    %c128 = arith.constant 128 : i64
    %pm = sage.program_id 0
    %pn = sage.program_id 1
    %pm64 = arith.extsi %pm : i32 to i64
    %pn64 = arith.extsi %pn : i32 to i64
    %row = arith.muli %pm64, %c64 : i64
    %col = arith.muli %pn64, %c64 : i64
    %at = sage.load %a[%row, %c0] strides [%c128, %c1] bounds [%m, %c128]
        : !sage.ptr<f16> -> tensor<64x128xf16>
    %bt = sage.load %b[%col, %c0] strides [%c128, %c1] bounds [%n, %c128]
        : !sage.ptr<f16> -> tensor<64x128xf16>
    %aq, %as = sage.quantize #sage.int8<per_block> %at
        : tensor<64x128xf16> -> tensor<64x128xi8>, tensor<1x1xf32>
    %bq, %bs = sage.quantize #sage.int8<per_block> %bt
        : tensor<64x128xf16> -> tensor<64x128xi8>, tensor<1x1xf32>
    %ct = sage.qmatmul %aq[%as], %bq[%bs] contract(1, 1)
        : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32>
        -> tensor<64x64xf32>
    sage.store %ct, %c[%row, %col] strides [%n, %c1] bounds [%m, %n]
        : tensor<64x64xf32>, !sage.ptr<f32>
    return
  }
}
