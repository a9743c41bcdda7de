// The SageBwd forward for one program: a 64-row Q tile of one (batch, head)
// against every 64-row K/V tile, head dim 128. The pre-pass has already
// smoothed K, folded sm_scale * log2(e) into Q and quantized Q, K, V per
// block; their scales are one f32 per 64-row block.
//
//   S   = int8(Q) int8(K)^T * s_Q * s_K          (log2 units)
//   P~  = exp2(S - m_new), row scale s_P = rowmax(P~) / 127
//   O  += int8(P~) int8(V) * s_P * s_V, rescaled by exp2(m - m_new)
//
// Grid: (ceil(N / 64), batch * heads). Key tails are masked to -inf.
// The pointers' alignment hints let sagegpu-promote-operands stage each K tile
// with cp.async (Q is loaded once outside the loop, V is contracted over its
// rows: both stay register loads).
module attributes {sage.target = "sm_90a", sage.num_warps = 8 : i32} {
  func.func @sagebwd_forward(
      %q: !sage.ptr<i8> {sage.alignment = 16 : i64}, %q_scale: !sage.ptr<f32>,
      %k: !sage.ptr<i8> {sage.alignment = 16 : i64}, %k_scale: !sage.ptr<f32>,
      %v: !sage.ptr<i8> {sage.alignment = 16 : i64}, %v_scale: !sage.ptr<f32>,
      %o: !sage.ptr<f32>, %lse: !sage.ptr<f32>,
      %n: i64, %n_kv: i64) attributes {sage.kernel} {
    %c0 = arith.constant 0 : i64
    %c1 = arith.constant 1 : i64
    %c64 = arith.constant 64 : i64
    %c128 = arith.constant 128 : i64
    %c63 = arith.constant 63 : i64
    %block = sage.program_id 0
    %head = sage.program_id 1
    %block64 = arith.extsi %block : i32 to i64
    %head64 = arith.extsi %head : i32 to i64

    // Per-(batch, head) base pointers.
    %q_len = arith.muli %n, %c128 : i64
    %kv_len = arith.muli %n_kv, %c128 : i64
    %q_off = arith.muli %head64, %q_len : i64
    %kv_off = arith.muli %head64, %kv_len : i64
    %q_h = sage.addptr %q, %q_off : !sage.ptr<i8>
    %k_h = sage.addptr %k, %kv_off : !sage.ptr<i8>
    %v_h = sage.addptr %v, %kv_off : !sage.ptr<i8>
    %o_h = sage.addptr %o, %q_off : !sage.ptr<f32>
    %q_blocks = arith.addi %n, %c63 : i64
    %nq_blocks = arith.divui %q_blocks, %c64 : i64
    %kv_blocks = arith.addi %n_kv, %c63 : i64
    %nkv_blocks = arith.divui %kv_blocks, %c64 : i64
    %qs_off = arith.muli %head64, %nq_blocks : i64
    %ks_off = arith.muli %head64, %nkv_blocks : i64
    %lse_off = arith.muli %head64, %n : i64
    %qs_h = sage.addptr %q_scale, %qs_off : !sage.ptr<f32>
    %ks_h = sage.addptr %k_scale, %ks_off : !sage.ptr<f32>
    %vs_h = sage.addptr %v_scale, %ks_off : !sage.ptr<f32>
    %lse_h = sage.addptr %lse, %lse_off : !sage.ptr<f32>

    %row = arith.muli %block64, %c64 : i64
    %qt = sage.load %q_h[%row, %c0] strides [%c128, %c1] bounds [%n, %c128]
        : !sage.ptr<i8> -> tensor<64x128xi8>
    %sq = sage.load %qs_h[%c0, %block64] strides [%c0, %c1] bounds [%c1, %nq_blocks]
        : !sage.ptr<f32> -> tensor<1x1xf32>

    %neg_inf = arith.constant dense<0xFF800000> : tensor<64x1xf32>
    %zero_row = arith.constant dense<0.0> : tensor<64x1xf32>
    %zero_acc = arith.constant dense<0.0> : tensor<64x128xf32>
    %neg_inf_tile = arith.constant dense<0xFF800000> : tensor<64x64xf32>
    %c127 = arith.constant dense<127.0> : tensor<64x1xf32>
    %cols = sage.iota 1 : tensor<1x64xi32>
    %cols_b = sage.broadcast %cols : tensor<1x64xi32> -> tensor<64x64xi32>

    %m, %l, %acc = scf.for %j = %c0 to %n_kv step %c64
        iter_args(%m_i = %neg_inf, %l_i = %zero_row, %acc_i = %zero_acc)
        -> (tensor<64x1xf32>, tensor<64x1xf32>, tensor<64x128xf32>) : i64 {
      %jb = arith.divui %j, %c64 : i64
      %kt = sage.load %k_h[%j, %c0] strides [%c128, %c1] bounds [%n_kv, %c128]
          : !sage.ptr<i8> -> tensor<64x128xi8>
      %sk = sage.load %ks_h[%c0, %jb] strides [%c0, %c1] bounds [%c1, %nkv_blocks]
          : !sage.ptr<f32> -> tensor<1x1xf32>
      %s = sage.qmatmul %qt[%sq], %kt[%sk] contract(1, 1)
          : tensor<64x128xi8>, tensor<1x1xf32>, tensor<64x128xi8>, tensor<1x1xf32>
          -> tensor<64x64xf32>
      // Keys past n_kv get -inf.
      %left = arith.subi %n_kv, %j : i64
      %left32 = arith.trunci %left : i64 to i32
      %limit = sage.splat %left32 : i32 -> tensor<64x64xi32>
      %valid = arith.cmpi slt, %cols_b, %limit : tensor<64x64xi32>
      %s_masked = arith.select %valid, %s, %neg_inf_tile
          : tensor<64x64xi1>, tensor<64x64xf32>
      %p, %m_new, %l_new, %alpha, %p_max = sage.softmax_update %s_masked, %m_i, %l_i
          : tensor<64x64xf32>, tensor<64x1xf32>
      %s_p = arith.divf %p_max, %c127 : tensor<64x1xf32>
      %pq, %s_p2 = sage.quantize #sage.int8<per_token> %p scale %s_p
          : tensor<64x64xf32>, tensor<64x1xf32> -> tensor<64x64xi8>, tensor<64x1xf32>
      %vt = sage.load %v_h[%j, %c0] strides [%c128, %c1] bounds [%n_kv, %c128]
          : !sage.ptr<i8> -> tensor<64x128xi8>
      %sv = sage.load %vs_h[%c0, %jb] strides [%c0, %c1] bounds [%c1, %nkv_blocks]
          : !sage.ptr<f32> -> tensor<1x1xf32>
      %alpha_b = sage.broadcast %alpha : tensor<64x1xf32> -> tensor<64x128xf32>
      %acc_scaled = arith.mulf %acc_i, %alpha_b : tensor<64x128xf32>
      %acc_new = sage.qmatmul %pq[%s_p2], %vt[%sv] acc %acc_scaled contract(1, 0)
          : tensor<64x64xi8>, tensor<64x1xf32>, tensor<64x128xi8>, tensor<1x1xf32>
          -> tensor<64x128xf32>
      scf.yield %m_new, %l_new, %acc_new
          : tensor<64x1xf32>, tensor<64x1xf32>, tensor<64x128xf32>
    }

    %l_b = sage.broadcast %l : tensor<64x1xf32> -> tensor<64x128xf32>
    %out = arith.divf %acc, %l_b : tensor<64x128xf32>
    sage.store %out, %o_h[%row, %c0] strides [%c128, %c1] bounds [%n, %c128]
        : tensor<64x128xf32>, !sage.ptr<f32>
    %log_l = math.log2 %l : tensor<64x1xf32>
    %lse_t = arith.addf %m, %log_l : tensor<64x1xf32>
    sage.store %lse_t, %lse_h[%row, %c0] strides [%c1, %c0] bounds [%n, %c1]
        : tensor<64x1xf32>, !sage.ptr<f32>
    return
  }
}
