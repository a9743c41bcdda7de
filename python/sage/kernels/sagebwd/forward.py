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
                                         load_vector_column, padded_tokens, smoothing_bias,
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
    (with FINE_SCALES Q and K one per token, rows padded to 16 tokens, and V
    one per channel of the block). o (B, H, N, D) with
    strides ``stride_o*``: f16, bf16 or f32 (the element type of the pointer);
    lse (B*H, N) f32 = m + log2(l), log2 units, smoothed-logit domain.
    CAUSAL (needs N <= Nkv; aligned bottom-right) stops at the diagonal block.
    Only the key blocks that need it are masked (the key tail, the causal
    diagonal): the loop is split in two, the first part mask-free.
    """
    block = sl.program_id(0)
    batch, head, bh = program_head(H)
    kv = batch * H_KV + kv_head_of(head, GROUP)
    row = block * BLOCK_M
    nkv_blocks = cdiv(N_KV, BLOCK_N)
    qt = load_rows(q_q, bh, row, N, BLOCK_M, D)
    # Per token, Q's scales are read like K's, over their padded row (0
    # past N): whole pairs, and a bound of their own. Bounded by N, their
    # row predicates would be the O store's (one expression), held through
    # both loops; at the D=64 forward's 128-register cap ptxas spilled them.
    sq = load_scale(q_scale, bh, block, row, padded_tokens(N), BLOCK_M, FINE_SCALES)
    qbar = load_vector(q_mean, bh * cdiv(N, BLOCK_M) + block, D) if SMOOTH_Q else None

    def attend(col, m, l, acc, MASKED: bool):
        """One key block: S, the online softmax, P~ and P~ V (masked or not)."""
        kblock = col // BLOCK_N
        kt = load_rows(k_q, kv, col, N_KV, BLOCK_N, D)
        # V^ too, first: its copy to shared memory is in flight while S and
        # P are computed. Past N_KV the padded columns are 0, and so is P.
        vt = load_transposed_block(v_qt, kv, col, stride_vtd, stride_vtd, BLOCK_N, D)
        # The K scales' rows are padded to 16 tokens: whole pairs load as
        # one access.
        sk = load_scale(k_scale, kv, kblock, col, padded_tokens(N_KV), BLOCK_N, FINE_SCALES)
        s = sl.qmatmul(qt, sq, kt, sk, contract=(1, 1))
        if SMOOTH_Q:
            s = s + smoothing_bias(qbar, kt, sk, FINE_SCALES)
        if MASKED and CAUSAL:
            s = sl.where(visible(row, col, N, N_KV, BLOCK_M, BLOCK_N, CAUSAL), s, float("-inf"))
        elif MASKED:
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
        return m, l, acc

    m = sl.full((BLOCK_M, 1), float("-inf"), sl.float32)
    l = sl.zeros((BLOCK_M, 1), sl.float32)
    acc = sl.zeros((BLOCK_M, D), sl.float32)
    # Key blocks before `unmasked` need no mask: every key exists and, when
    # causal, every query of the block sees every key. The rest (the key
    # tail, the causal diagonal) are masked.
    stop = N_KV
    unmasked = (N_KV // BLOCK_N) * BLOCK_N
    if CAUSAL:
        # Bottom-right aligned: query row + i sees keys up to row + i + (N_KV - N).
        stop = sl.minimum(row + BLOCK_M + (N_KV - N), N_KV)
        unmasked = sl.minimum(((row + (N_KV - N) + 1) // BLOCK_N) * BLOCK_N, unmasked)
    for col in sl.range(0, unmasked, BLOCK_N, num_stages=2):
        m, l, acc = attend(col, m, l, acc, False)
    for masked_col in sl.range(unmasked, stop, BLOCK_N, num_stages=2):
        m, l, acc = attend(masked_col, m, l, acc, True)
    out = acc / l
    store_strided_rows(head_base(o, batch, head, stride_ob, stride_oh),
                       out.to(o.dtype.element), row, N, stride_on, D)
    store_row_stat(lse, m + sl.log2(l), bh, row, N)
