// C = A * B^T with f16 operands and f32 accumulation (the form of
// dP = dO V^T, the one SageBwd matmul kept in 16 bits), one 64x64 tile of C
// per program, K = 128. Grid: (ceil(M / 64), ceil(N / 64)).
module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
  func.func @half_matmul(%a: !sage.ptr<f16>, %b: !sage.ptr<f16>,
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
    %ct = sage.matmul %at, %bt contract(1, 1)
        : tensor<64x128xf16>, tensor<64x128xf16> -> tensor<64x64xf32>
    sage.store %ct, %c[%row, %col] strides [%n, %c1] bounds [%m, %n]
        : tensor<64x64xf32>, !sage.ptr<f32>
    return
  }
}
