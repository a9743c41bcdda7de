"""The SageBwd forward (spec 4.1 step 3-4): INT8 Q K^T, exp2 online softmax,
per-token INT8 P~, INT8 P~ V, then O and the LSE.

Grid: (ceil(N / BLOCK_M), H, B); one program owns one query block of one
(batch, query head) and walks the key blocks of its kv head.
"""

from __future__ import annotations

import sage.language as sl
from sage.kernels.sagebwd.common import (cdiv, head_base, key_bias, kv_head_of,
                                         load_block_scale, load_rows, load_scale,
                                         load_transposed_block, load_vector,
                                         load_vector_column, smoothing_bias,
                                         program_head, store_row_stat, store_strided_rows,
                                         visible)


def sagebwd_forward(q_q, q_scale, q_mean, k_q, k_scale, v_qt, v_scale, o, lse,
                    N, N_KV, H, H_KV, stride_ob, stride_oh, stride_on, stride_vtd,
                    D: sl.constexpr,
                    BLOCK_M: sl.constexpr, BLOCK_N: sl.constexpr, CAUSAL: sl.constexpr,
                    SMOOTH_Q: sl.constexpr, FINE_SCALES: sl.constexpr = False,
                    GROUP: sl.constexpr = 1):
    """O and LSE of one query block.

    q_q (B*H, N, D) i8 encodes c*Q (c = sm_scale * log2 e, Q-smoothed with
    SMOOTH_Q, then q_mean (B*H, ceil(N/BLOCK_M), D) f32 holds the block
    means); k_q (B*Hkv, Nkv, D) i8 (K smoothed); v_qt (B*Hkv, D, stride_vtd)
    i8, V^ transposed (key-contiguous: the PV operand is copied straight to
    shared memory), its tokens in sigma16 order; *_scale: one f32 per block
    (with FINE_SCALES Q and K one per token, V one per channel of the block). o (B, H, N, D) with
    strides ``stride_o*``: f16, bf16 or f32 (the element type of the pointer);
    lse (B*H, N) f32 = m + log2(l), log2 units, smoothed-logit domain.
    CAUSAL (needs N <= Nkv; aligned bottom-right) stops at the diagonal block.
    """
    block = sl.program_id(0)
    batch, head, bh = program_head(H)
    kv = batch * H_KV + kv_head_of(head, GROUP)
    row = block * BLOCK_M
    nkv_blocks = cdiv(N_KV, BLOCK_N)
    qt = load_rows(q_q, bh, row, N, BLOCK_M, D)
    sq = load_scale(q_scale, bh, block, row, N, BLOCK_M, FINE_SCALES)
    if SMOOTH_Q:
        qbar = load_vector(q_mean, bh * cdiv(N, BLOCK_M) + block, D)
    m = sl.full((BLOCK_M, 1), float("-inf"), sl.float32)
    l = sl.zeros((BLOCK_M, 1), sl.float32)
    acc = sl.zeros((BLOCK_M, D), sl.float32)
    stop = N_KV
    if CAUSAL:
        # Bottom-right aligned: the block's last query sees keys up to
        # row + BLOCK_M - 1 + (N_KV - N).
        stop = sl.minimum(row + BLOCK_M + (N_KV - N), N_KV)
    for col in sl.range(0, stop, BLOCK_N):
        kblock = col // BLOCK_N
        kt = load_rows(k_q, kv, col, N_KV, BLOCK_N, D)
        # V^ too, first: its copy to shared memory is in flight while S and
        # P are computed. Past N_KV the padded columns are 0, and so is P.
        vt = load_transposed_block(v_qt, kv, col, stride_vtd, stride_vtd, BLOCK_N, D)
        sk = load_scale(k_scale, kv, kblock, col, N_KV, BLOCK_N, FINE_SCALES)
        s = sl.qmatmul(qt, sq, kt, sk, contract=(1, 1))
        if SMOOTH_Q:
            s = s + smoothing_bias(qbar, kt, sk, FINE_SCALES)
        if CAUSAL:
            s = sl.where(visible(row, col, N, N_KV, BLOCK_M, BLOCK_N, CAUSAL), s, float("-inf"))
        else:
            s = s + key_bias(col, N_KV, BLOCK_N)
        p, m, l, alpha, p_max = sl.softmax_update(s, m, l)
        # Per-token P~ scale from the running maxima: no extra max pass (spec 4.1).
        # P <= p_max, so P / (p_max / 127) rounds into [0, 127]: no clamp.
        p_q, p_scale = sl.quantize(p, sl.int8_per_token, scale=p_max / 127.0, saturate=False)
        if FINE_SCALES:  # per channel of the block: a D x 1 column of V^T's rows
            sv = load_vector_column(v_scale, kv * nkv_blocks + kblock, D)
        else:
            sv = load_block_scale(v_scale, kv, kblock, nkv_blocks)
        # v_qt's tokens are in sigma16 order: P^ feeds the tensor cores from
        # the registers the softmax left it in.
        acc = sl.qmatmul(p_q, p_scale, vt, sv, contract=(1, 1), acc=acc * alpha,
                         rhs_sigma16=True)
    out = acc / l
    store_strided_rows(head_base(o, batch, head, stride_ob, stride_oh),
                       out.to(o.dtype.element), row, N, stride_on, D)
    store_row_stat(lse, m + sl.log2(l), bh, row, N)
