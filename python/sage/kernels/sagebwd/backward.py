"""The SageBwd backward (spec 4.2): KV block outer, query blocks inner (FA2 order).

Grid: (ceil(Nkv / BLOCK_N), H, B). One program owns key block j of one
(batch, *query* head): it accumulates that head's share of dK_j and dV_j in
registers and adds it atomically into the kv head's f32 dK/dV (so GQA/MQA
reduce over the query heads of a group with no extra buffer or pass; the
buffers must be zeroed). dQ_i is reduced over key blocks with f32 atomic
adds into a (B*H, N, D) f32 workspace, also zeroed.

Gradient constants (spec 4.4). The natural logits are z = sm_scale Q K^T;
the kernel's S = c Q K_s^T with c = sm_scale log2 e differs from z log2 e
only by per-row constants (K-smoothing), so P = exp2(S - L) = softmax(z)
and dS = P o (dP - delta) is dLoss/dz. Then

* dQ = sm_scale dS K = sm_scale dS K_s (rowsum(dS) = 0 up to rounding; no
  K-mean correction, spec 3.1) = sm_scale * s_dS s_K (dS^ K^): sm_scale is
  folded into the dS scale of the dQ product;
* dK = sm_scale dS^T Q, and s_Q Q^ encodes c Q, so dK = (sm_scale / c)
  dS^T (s_Q Q^) = ln 2 * dS^T (s_Q Q^): applied once at the end. With
  Q-smoothing, Q = Q_s + 1 q_mean / c, which adds ln 2 colsum(dS)^T q_mean
  (the dK bias term of spec 3.2, from the f32 dS).

With FINE_SCALES (``scales="fine"``, sage's default; docs/sagebwd.md) Q^ and
K^ carry one scale per token, P^ one per key column, dO^ one per channel and
dS^ one per query row for dQ and one per key column for dK. Every scale is
still constant along its product's contraction. The per-token Q and K scales
vary along the token axes that dK = dS^T Q and dQ = dS K contract, so they
are multiplied into the f32 dS before it is quantized: dQ uses (dS o s_K^T)
K^ and dK uses (dS o s_Q)^T Q^, two INT8 copies of each dS tile.
"""

from __future__ import annotations

import sage.language as sl
from sage.kernels.sagebwd.common import (cdiv, head_base, k_scale_row_length, kv_head_of,
                                         program_head,
                                         load_block_scale, load_col_stat, load_row_stat,
                                         load_rows, load_scale, load_strided_rows,
                                         load_transposed_block, load_vector,
                                         row_to_column,
                                         slice_of,
                                         smoothing_bias, store_rows, visible)

LN2 = 0.6931471805599453


def sagebwd_backward(q_q, q_scale, q_mean, k_q, k_scale, v, do, do_qt, do_scale, lse, delta,
                     dq, dk, dv, p_out, ds_out, sm_scale, N, N_KV, H, H_KV,
                     stride_vb, stride_vh, stride_vn, stride_dob, stride_doh, stride_don,
                     stride_dotd,
                     D: sl.constexpr, BLOCK_M: sl.constexpr, BLOCK_N: sl.constexpr,
                     CAUSAL: sl.constexpr, SMOOTH_Q: sl.constexpr,
                     STORE_P_DS: sl.constexpr, FINE_SCALES: sl.constexpr = False,
                     DIRECT_KV: sl.constexpr = False, GROUP: sl.constexpr = 1):
    """dK_j, dV_j of one key block (for one query head) and its dQ contributions.

    Saved by the forward: q_q, q_scale, q_mean (SMOOTH_Q), k_q, k_scale (per
    token: its rows padded to 16 tokens), lse;
    v is the 16-bit V (B, Hkv, Nkv, D) (dP = dO V^T stays 16-bit) and do the
    16-bit dO (B, H, N, D), both with their strides; do_qt (dO^ transposed,
    (B*H, D, stride_dotd)) / do_scale and delta from the backward pre-pass.
    dq: (B*H, N, D) f32 workspace, zeroed; dk, dv: (B*Hkv, Nkv, D) f32,
    zeroed, or with DIRECT_KV (only when H == Hkv: this program is the only
    one to write dK_j, dV_j) in the inputs' 16-bit dtype, stored once
    without atomics (no f32 workspace: peak memory).
    With STORE_P_DS, P and dS (f32, before quantization) are written to p_out
    and ds_out, (B*H, N, Nkv) f32 (for the accuracy report and tests).
    """
    block = sl.program_id(0)
    batch, head, bh = program_head(H)
    kv_head = kv_head_of(head, GROUP)
    kv = batch * H_KV + kv_head
    v_base = head_base(v, batch, kv_head, stride_vb, stride_vh)
    do_base = head_base(do, batch, head, stride_dob, stride_doh)
    col = block * BLOCK_N
    nq_blocks = cdiv(N, BLOCK_M)
    # This kv head's K scales: one row of k_scale.
    k_scales = slice_of(k_scale, kv, k_scale_row_length(N_KV, BLOCK_N, FINE_SCALES), 1)
    sk = load_scale(k_scales, 0, block, col, N_KV, BLOCK_N, FINE_SCALES)
    one = sl.full((1, 1), 1.0, sl.float32)  # the unit scale of fine-scale products
    dk_acc = sl.zeros((BLOCK_N, D), sl.float32)
    dv_acc = sl.zeros((BLOCK_N, D), sl.float32)
    start = 0
    if CAUSAL:
        # The first query block that sees this key block: query i sees key
        # col iff i >= col - (N_KV - N) (bottom-right alignment).
        start = (sl.maximum(col - (N_KV - N), 0) // BLOCK_M) * BLOCK_M
    # The key block's operands are loaded once: tiles that only feed matmuls
    # live in shared memory (sagegpu-promote-operands stores them there right
    # where they are loaded), so they hold no registers across the loop.
    kt = load_rows(k_q, kv, col, N_KV, BLOCK_N, D)
    vt = load_strided_rows(v_base, col, N_KV, stride_vn, BLOCK_N, D)
    for row in sl.range(start, N, BLOCK_M):
        qblock = row // BLOCK_M
        # The query block's dO tiles first: their copies to shared memory are
        # in flight while S and P are computed. dO^ comes transposed, D x
        # BLOCK_M, query-contiguous (the padded columns past N are 0, and so
        # is P there).
        do_t = load_transposed_block(do_qt, bh, row, stride_dotd, stride_dotd, BLOCK_M, D)
        do16 = load_strided_rows(do_base, row, N, stride_don, BLOCK_M, D)
        sq = load_scale(q_scale, bh, qblock, row, N, BLOCK_M, FINE_SCALES)
        s = sl.qmatmul(load_rows(q_q, bh, row, N, BLOCK_M, D), sq, kt, sk, contract=(1, 1))
        if SMOOTH_Q:
            qbar = load_vector(q_mean, bh * nq_blocks + qblock, D)
            s = s + smoothing_bias(qbar, load_rows(k_q, kv, col, N_KV, BLOCK_N, D), sk,
                                   FINE_SCALES)
        mask = visible(row, col, N, N_KV, BLOCK_M, BLOCK_N, CAUSAL)
        p = sl.where(mask, sl.exp2(s - load_row_stat(lse, bh, row, N, BLOCK_M)), 0.0)
        # dV_j += P^T dO_i (INT8; P and dO per block, or per key column and
        # per channel: the outer axes of dV).
        if FINE_SCALES:
            p_q, sp = sl.quantize(p, sl.int8_per_channel)
            # One scale per channel (dO^T's rows: dV's columns), applied
            # after the product and loaded after it too: its 1 x D row then
            # holds no registers while the matmul is in flight.
            dv_part = sl.qmatmul(p_q, sp, do_t, one, contract=(0, 1))
            dv_acc = dv_acc + dv_part * load_vector(do_scale, bh * nq_blocks + qblock, D)
        else:
            p_q, sp = sl.quantize(p, sl.int8_per_block)
            sdo = load_block_scale(do_scale, bh, qblock, nq_blocks)
            dv_acc = sl.qmatmul(p_q, sp, do_t, sdo, contract=(0, 1), acc=dv_acc)
        # dP = dO_i V_j^T: the one 16-bit matmul (f32 accumulation); dS stays f32.
        dp = sl.matmul(do16, vt, contract=(1, 1))
        ds = p * (dp - load_row_stat(delta, bh, row, N, BLOCK_M))
        # dK_j += dS^T Q_i (INT8; ln 2 applied at the end), then dQ_i += dS K_j.
        if FINE_SCALES:
            # dQ's dS^ is quantized first: the D=64 backward uses all 255
            # registers, and in the other order ptxas spills in the loop.
            dsq_q, sdsq = sl.quantize(ds * load_col_stat(k_scales, 0, col, N_KV, BLOCK_N),
                                      sl.int8_per_token)
            dsk_q, sdsk = sl.quantize(ds * sq, sl.int8_per_channel)
            dk_acc = sl.qmatmul(dsk_q, sdsk, load_rows(q_q, bh, row, N, BLOCK_M, D), one,
                                contract=(0, 0), acc=dk_acc)
            dq_part = sl.qmatmul(dsq_q, sdsq * sm_scale, kt, one, contract=(1, 0))
        else:
            ds_q, sds = sl.quantize(ds, sl.int8_per_block)
            dk_acc = sl.qmatmul(ds_q, sds, load_rows(q_q, bh, row, N, BLOCK_M, D), sq,
                                contract=(0, 0), acc=dk_acc)
            dq_part = sl.qmatmul(ds_q, sds * sm_scale, kt, sk, contract=(1, 0))
        if SMOOTH_Q:
            dk_acc = dk_acc + row_to_column(sl.sum(ds, axis=0)) * qbar
        store_rows(dq, dq_part, bh, row, N, D, atomic_add=True)
        if STORE_P_DS:
            for out, value in ((p_out, p), (ds_out, ds)):
                sl.store(slice_of(out, bh, N, N_KV), value, (row, col), (N_KV, 1), (N, N_KV))
    if DIRECT_KV:
        store_rows(dk, (dk_acc * LN2).to(dk.dtype.element), kv, col, N_KV, D)
        store_rows(dv, dv_acc.to(dv.dtype.element), kv, col, N_KV, D)
    else:
        store_rows(dk, dk_acc * LN2, kv, col, N_KV, D, atomic_add=True)
        store_rows(dv, dv_acc, kv, col, N_KV, D, atomic_add=True)
