"""The SageBwd backward (spec 4.2): KV block outer, query blocks inner (FA2 order).

Grid: (ceil(Nkv / BLOCK_N), H, B). One program owns key block j of one
(batch, *query* head): it accumulates that head's share of dK_j and dV_j in
registers and adds it atomically into the kv head's f32 dK/dV (so GQA/MQA
reduce over the query heads of a group with no extra buffer or pass; the
buffers must be zeroed). dQ_i is reduced over key blocks with f32 atomic
adds into a (B*H, N, D) f32 workspace, also zeroed. Without a causal mask
the query blocks are visited from block j on, wrapping around, so that
programs running together add into different dQ rows.

Orientation (FlashAttention-3's): the program computes S^T = K_j Q_i^T and
dP^T = V_j dO_i^T, so its key rows are the accumulators' rows. dV_j += P^T dO
and dK_j += dS^T Q contract over the queries, the accumulators' columns: P^ and
dS^ (quantized per key where the scales are fine, a row reduction in the
threads that hold the row) feed the tensor cores from the registers they are
in, because the partners dO^T and Q^T come from the backward pre-pass with
their query axis in sigma16 order (``rhs_sigma16``). Only dQ_i += dS K_j
contracts over keys: its dS^ goes through shared memory, transposed.

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
K^ carry one scale per token (K's, per token here, are those of its key
groups: :data:`~sage.reference.sagebwd.K_SCALE_GROUPS`), P^ one per key (unsigned bytes: P >= 0), dO^
one per channel and dS^ one per query for dQ and one per key for dK. Every
scale is still constant along its product's contraction. The per-token Q and
K scales vary along the token axes that dK = dS^T Q and dQ = dS K contract,
so they are multiplied into the f32 dS before it is quantized: dQ uses
(dS o s_K^T) K^ and dK uses (dS o s_Q)^T Q^, two INT8 copies of each dS
tile.
"""

from __future__ import annotations

import sage.language as sl
from sage.kernels.sagebwd.common import (cdiv, head_base, kv_head_of, load_block_scale,
                                         load_col_stat, load_rows, load_scale,
                                         load_strided_rows, load_transposed_block,
                                         load_vector, program_head, scale_row_length,
                                         slice_of, store_rows, visible)

LN2 = 0.6931471805599453


def sagebwd_backward(q_q, q_qt, q_scale, q_mean, k_q, k_scale, v, do, do_qt, do_scale, lse,
                     delta, dq, dk, dv, p_out, ds_out, sm_scale, N, N_KV, H, H_KV,
                     stride_vb, stride_vh, stride_vn, stride_dob, stride_doh, stride_don,
                     stride_dotd,
                     D: sl.constexpr, BLOCK_M: sl.constexpr, BLOCK_N: sl.constexpr,
                     CAUSAL: sl.constexpr, SMOOTH_Q: sl.constexpr,
                     STORE_P_DS: sl.constexpr, FINE_SCALES: sl.constexpr = False,
                     DIRECT_KV: sl.constexpr = False, GROUP: sl.constexpr = 1):
    """dK_j, dV_j of one key block (for one query head) and its dQ contributions.

    Saved by the forward: q_q, q_scale, q_mean (SMOOTH_Q), k_q, k_scale (per
    token: their rows padded to 16 tokens), lse;
    v is the 16-bit V (B, Hkv, Nkv, D) (dP = dO V^T stays 16-bit) and do the
    16-bit dO (B, H, N, D), both with their strides; from the backward
    pre-pass: q_qt and do_qt (Q^ and dO^ transposed, (B*H, D, stride_dotd),
    queries in sigma16 order), do_scale and delta.
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
    # This kv head's K scales: one row of k_scale (a BLOCK_N x 1 column per
    # key, or the block's one scale).
    k_scales = slice_of(k_scale, kv, scale_row_length(N_KV, BLOCK_N, FINE_SCALES), 1)
    q_scales = slice_of(q_scale, bh, scale_row_length(N, BLOCK_M, FINE_SCALES), 1)
    sk = load_scale(k_scales, 0, block, col, N_KV, BLOCK_N, FINE_SCALES)
    one = sl.full((1, 1), 1.0, sl.float32)  # the unit scale of fine-scale products
    dk_acc = sl.zeros((BLOCK_N, D), sl.float32)
    dv_acc = sl.zeros((BLOCK_N, D), sl.float32)
    start = 0
    shift = 0
    if CAUSAL:
        # The first query block that sees this key block: query i sees key
        # col iff i >= col - (N_KV - N) (bottom-right alignment).
        start = (sl.maximum(col - (N_KV - N), 0) // BLOCK_M) * BLOCK_M
    else:
        # Every query block, in a rotated order: key block j starts at query
        # block j (the last one past it) and wraps around. Programs that run
        # together then add into different dQ rows; in the same order they
        # would all add into the same rows at once (D=128 N16K: 1.17x).
        # Causal programs already start at different (diagonal) blocks.
        shift = sl.minimum(block, nq_blocks - 1) * BLOCK_M
    span = nq_blocks * BLOCK_M
    # The key block's operands are loaded once: tiles that only feed matmuls
    # live in shared memory (sagegpu-promote-operands stores them there right
    # where they are loaded), so they hold no registers across the loop.
    kt = load_rows(k_q, kv, col, N_KV, BLOCK_N, D)
    vt = load_strided_rows(v_base, col, N_KV, stride_vn, BLOCK_N, D)
    for step in sl.range(start, span, BLOCK_M, num_stages=2):
        row = step
        if not CAUSAL:
            row = step + shift
            row = sl.where(row >= span, row - span, row)
        qblock = row // BLOCK_M
        # The query block's operand tiles first: their copies to shared
        # memory are in flight while S^T and P^T are computed. Q^T and dO^T
        # are D x BLOCK_M, query-contiguous, sigma16 (0 past N, as P is).
        q_t = load_transposed_block(q_qt, bh, row, stride_dotd, stride_dotd, BLOCK_M, D)
        do_t = load_transposed_block(do_qt, bh, row, stride_dotd, stride_dotd, BLOCK_M, D)
        do16 = load_strided_rows(do_base, row, N, stride_don, BLOCK_M, D)
        # Q^'s scales (a column per query, or the block's one) go with the
        # Q^ tile; per-query statistics are 1 x BLOCK_M rows of S^T.
        sq = load_scale(q_scales, 0, qblock, row, N, BLOCK_M, FINE_SCALES)
        st = sl.qmatmul(kt, sk, load_rows(q_q, bh, row, N, BLOCK_M, D), sq, contract=(1, 1))
        if SMOOTH_Q:
            # + q_mean . (s_K K^_j)^T for every query: one value per key row.
            qbar = load_vector(q_mean, bh * nq_blocks + qblock, D)
            k_deq = sl.dequantize(kt, sk, sl.int8_per_token if FINE_SCALES
                                  else sl.int8_per_block)
            st = st + sl.sum(k_deq * qbar, axis=1)
        mask = visible(row, col, N, N_KV, BLOCK_M, BLOCK_N, CAUSAL, transposed=True)
        pt = sl.where(mask, sl.exp2(st - load_col_stat(lse, bh, row, N, BLOCK_M)), 0.0)
        # dV_j += P^T dO_i (INT8; P per key or per block, dO per channel or
        # per block: the outer axes of dV). P^T's rows are keys. P >= 0: with
        # fine scales it takes unsigned bytes (255 levels, u8 x s8 products),
        # as the forward's P~ does.
        if FINE_SCALES:
            pt_q, sp = sl.quantize(pt, sl.uint8_per_token)
            # One scale per channel (dO^T's rows: dV's columns), applied
            # after the product and loaded after it too: its 1 x D row then
            # holds no registers while the matmul is in flight.
            dv_part = sl.qmatmul(pt_q, sp, do_t, one, contract=(1, 1), rhs_sigma16=True)
            dv_acc = dv_acc + dv_part * load_vector(do_scale, bh * nq_blocks + qblock, D)
        else:
            pt_q, sp = sl.quantize(pt, sl.int8_per_block)
            sdo = load_block_scale(do_scale, bh, qblock, nq_blocks)
            dv_acc = sl.qmatmul(pt_q, sp, do_t, sdo, contract=(1, 1), acc=dv_acc,
                                rhs_sigma16=True)
        # dP^T = V_j dO_i^T: the one 16-bit matmul (f32 accumulation); dS stays f32.
        dpt = sl.matmul(vt, do16, contract=(1, 1))
        dst = pt * (dpt - load_col_stat(delta, bh, row, N, BLOCK_M))
        # dK_j += dS^T Q_i (INT8, from registers; ln 2 applied at the end),
        # then dQ_i += dS K_j (its dS^ transposed through shared memory).
        if FINE_SCALES:
            dsk_q, sdsk = sl.quantize(dst * load_col_stat(q_scales, 0, row, N, BLOCK_M),
                                      sl.int8_per_token)
            dk_acc = sl.qmatmul(dsk_q, sdsk, q_t, one, contract=(1, 1), acc=dk_acc,
                                rhs_sigma16=True)
            dsq_q, sdsq = sl.quantize(dst * sk, sl.int8_per_channel)
            dq_part = sl.qmatmul(dsq_q, sdsq * sm_scale, kt, one, contract=(0, 0))
        else:
            ds_q, sds = sl.quantize(dst, sl.int8_per_block)
            dk_acc = sl.qmatmul(ds_q, sds, q_t, sq, contract=(1, 1), acc=dk_acc,
                                rhs_sigma16=True)
            dq_part = sl.qmatmul(ds_q, sds * sm_scale, kt, sk, contract=(0, 0))
        if SMOOTH_Q:
            dk_acc = dk_acc + sl.sum(dst, axis=1) * qbar
        store_rows(dq, dq_part, bh, row, N, D, atomic_add=True)
        if STORE_P_DS:
            # (queries, keys) slices, written through a transposed view.
            for out, value in ((p_out, pt), (ds_out, dst)):
                sl.store(slice_of(out, bh, N, N_KV), value, (col, row), (1, N_KV), (N_KV, N))
    if DIRECT_KV:
        store_rows(dk, (dk_acc * LN2).to(dk.dtype.element), kv, col, N_KV, D)
        store_rows(dv, dv_acc.to(dv.dtype.element), kv, col, N_KV, D)
    else:
        store_rows(dk, dk_acc * LN2, kv, col, N_KV, D, atomic_add=True)
        store_rows(dv, dv_acc, kv, col, N_KV, D, atomic_add=True)
