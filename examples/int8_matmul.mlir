// C = (A · Bᵀ) * s_a * s_b for one 64x64 tile of C per program, with A
// (M x K) and B (N x K) already INT8 in global memory, as the SageBwd
// kernels read their pre-quantized Q, K and V. K is a runtime length walked
// in 128-wide blocks; each block's product is accumulated in f32.
//
// The kernel-argument hints (what the JIT's specialisation adds) prove the
// 16-byte alignment that lets sagegpu-promote-operands stage both operands with
// cp.async straight from global to shared memory. Tails in M, N and K are
// masked by the bounds (cp.async zero-fills what lies past them).
module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
  func.func @int8_matmul(%a: !sage.ptr<i8> {sage.alignment = 16 : i64},
                         %b: !sage.ptr<i8> {sage.alignment = 16 : i64},
                         %scales: !sage.ptr<f32>, %c: !sage.ptr<f32>,
                         %m: i64, %n: i64, %k: i64 {sage.divisibility = 16 : i64})
      attributes {sage.kernel} {
    %c0 = arith.constant 0 : i64
    %c1 = arith.constant 1 : i64
    %c2 = arith.constant 2 : i64
    %c64 = arith.constant 64 : i64
    %c128 = arith.constant 128 : i64
    %pm = sage.program_id 0
    %pn = sage.program_id 1
    %pm64 = arith.extsi %pm : i32 to i64
    %pn64 = arith.extsi %pn : i32 to i64
    %row = arith.muli %pm64, %c64 : i64
    %col = arith.muli %pn64, %c64 : i64
    %sa = sage.load %scales[%c0, %c0] strides [%c0, %c1] bounds [%c1, %c2]
        : !sage.ptr<f32> -> tensor<1x1xf32>
    %sb = sage.load %scales[%c0, %c1] strides [%c0, %c1] bounds [%c1, %c2]
        : !sage.ptr<f32> -> tensor<1x1xf32>
    %zero = arith.constant dense<0.0> : tensor<64x64xf32>
    %ct = scf.for %kk = %c0 to %k step %c128 iter_args(%acc = %zero)
        -> (tensor<64x64xf32>) : i64 {
      %at = sage.load %a[%row, %kk] strides [%k, %c1] bounds [%m, %k]
          : !sage.ptr<i8> -> tensor<64x128xi8>
      %bt = sage.load %b[%col, %kk] strides [%k, %c1] bounds [%n, %k]
          : !sage.ptr<i8> -> tensor<64x128xi8>
      %next = sage.qmatmul %at[%sa], %bt[%sb] acc %acc contract(1, 1)
          : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32>
          -> tensor<64x64xf32>
      scf.yield %next : tensor<64x64xf32>
    }
    sage.store %ct, %c[%row, %col] strides [%n, %c1] bounds [%m, %n]
        : tensor<64x64xf32>, !sage.ptr<f32>
    return
  }
}
