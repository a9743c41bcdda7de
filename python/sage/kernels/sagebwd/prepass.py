"""The forward pre-pass: K mean, smoothing, Q scaling and per-block INT8 of Q, K, V.

Spec sections 2, 3.1, 3.2 and 4.1 steps 1-2. Every quantization is
``sl.int8_per_block`` (scale absmax / 127, round to nearest even) over one
kernel tile: BLOCK_M rows of Q, BLOCK_N rows of K and V; with FINE_SCALES, Q
and K are ``sl.int8_per_token`` and V per channel over all its tokens
(docs/sagebwd.md, "Scale granularity"). Rows past the end of a sequence are
0 in every quantized tile, so they do not move the absmax.
"""

from __future__ import annotations

import sage.language as sl
from sage.kernels.sagebwd.common import (SMALLEST_NORMAL, cdiv, head_base, load_strided_rows,
                                         load_vector, program_head, quantize_block_to,
                                         row_ids, scale_row_length, store_transposed_rows,
                                         store_vector)


#: Key tiles kv_stats_kernel loads per trip (see there). On the H100 at B4
#: H32 N4K: D64 0.059 ms with 2, 0.055 with 4 (204-206 registers, no
#: spills); D128 0.097 either way.
STATS_TILES = 4


def kv_stats_kernel(k, v, k_mean, v_scale, N_KV, H_KV, stride_kb, stride_kh, stride_kn,
                    stride_vb, stride_vh, stride_vn, D: sl.constexpr, BLOCK_N: sl.constexpr,
                    SMOOTH_K: sl.constexpr, FINE_SCALES: sl.constexpr):
    """What the quantization of K and V needs from all Nkv tokens of one
    (batch, kv head), in f32: K's mean (SMOOTH_K, spec 3.1) and, with
    FINE_SCALES, V's per-channel scales, absmax / 127 over all the tokens.

    k, v: (B, Hkv, Nkv, D) f16/bf16 with strides ``stride_k*``, ``stride_v*``;
    k_mean, v_scale: (B*Hkv, D) f32. Grid: (Hkv, B). The loop only adds (and
    takes maxima) element by element, each thread in its own registers, over
    BLOCK_N-row tiles (loads past Nkv are 0); the tile's rows are reduced
    once, after it (a reduction across warps per block would cost shared
    memory and barriers on every trip). A scale below the smallest normal
    f32 is 0, as a quantizer's own (sl.quantize).
    """
    batch, head, bh = program_head(H_KV, axis=0)
    k_base = head_base(k, batch, head, stride_kb, stride_kh)
    v_base = head_base(v, batch, head, stride_vb, stride_vh)
    sums = sl.zeros((BLOCK_N, D), sl.float32)
    peaks = sl.zeros((BLOCK_N, D), sl.float32)
    # STATS_TILES tiles a trip, all loaded before any is added: one program
    # per (batch, kv head) keeps that many tiles of loads in flight. The
    # adds stay in token order (tiles past Nkv load as 0).
    for row in sl.range(0, N_KV, STATS_TILES * BLOCK_N):
        k_tiles = [load_strided_rows(k_base, row + i * BLOCK_N, N_KV, stride_kn, BLOCK_N, D)
                   for i in range(STATS_TILES)] if SMOOTH_K else []
        v_tiles = [load_strided_rows(v_base, row + i * BLOCK_N, N_KV, stride_vn, BLOCK_N, D)
                   for i in range(STATS_TILES)] if FINE_SCALES else []
        for tile in k_tiles:
            sums = sums + tile.to(sl.float32)
        for tile in v_tiles:
            peaks = sl.maximum(peaks, sl.abs(tile.to(sl.float32)))
    if SMOOTH_K:
        store_vector(k_mean, sl.sum(sums, axis=0) / N_KV.to(sl.float32), bh, D)
    if FINE_SCALES:
        scale = sl.max(peaks, axis=0) / 127.0
        store_vector(v_scale, sl.where(scale < SMALLEST_NORMAL, 0.0, scale), bh, D)


def quantize_q_kernel(q, q_q, q_scale, q_mean, qk_scale, N, H, stride_qb, stride_qh,
                      stride_qn, D: sl.constexpr, BLOCK_M: sl.constexpr,
                      SMOOTH_Q: sl.constexpr, FINE_SCALES: sl.constexpr = False):
    """One BLOCK_M-row block of ``c * Q`` (c = ``qk_scale`` = sm_scale * log2 e) to INT8.

    q: (B, H, N, D) f16/bf16 with strides ``stride_q*``; q_q: (B*H, N, D) i8;
    q_scale: (B*H, ceil(N/BLOCK_M)) f32, or (B*H, N padded to 16) per token
    with FINE_SCALES (0 scales past N);
    q_mean: (B*H, ceil(N/BLOCK_M), D) f32, written only with SMOOTH_Q (then
    the block mean of ``c * Q`` over its valid rows is subtracted before
    quantizing and saved: the forward adds ``q_mean . K_j^T`` back and the
    backward adds the dK bias term). Grid: (ceil(N/BLOCK_M), H, B).
    """
    block = sl.program_id(0)
    batch, head, bh = program_head(H)
    row = block * BLOCK_M
    nblocks = cdiv(N, BLOCK_M)
    q_base = head_base(q, batch, head, stride_qb, stride_qh)
    x = load_strided_rows(q_base, row, N, stride_qn, BLOCK_M, D).to(sl.float32) * qk_scale
    if SMOOTH_Q:
        count = sl.minimum(N - row, BLOCK_M).to(sl.float32)
        mean = sl.sum(x, axis=0) / count
        x = sl.where(row_ids(row, BLOCK_M) < N, x - mean, 0.0)
        store_vector(q_mean, mean, bh * nblocks + block, D)
    quantize_block_to(x, q_q, q_scale, bh, block, row, N, nblocks, D, FINE_SCALES,
                      scale_rows=scale_row_length(N, BLOCK_M, FINE_SCALES))


def quantize_kv_kernel(k, v, k_mean, k_q, k_scale, v_qt, v_scale, N_KV, H_KV, stride_kb,
                       stride_kh, stride_kn, stride_vb, stride_vh, stride_vn, stride_vtd,
                       D: sl.constexpr, BLOCK_N: sl.constexpr, SMOOTH_K: sl.constexpr,
                       FINE_SCALES: sl.constexpr = False):
    """One BLOCK_N-row block of K (minus its mean when SMOOTH_K) and of V to INT8.

    k, v: (B, Hkv, Nkv, D) f16/bf16 with strides ``stride_k*``, ``stride_v*``;
    k_mean: (B*Hkv, D) f32 (read only with SMOOTH_K); k_q: (B*Hkv, Nkv, D) i8;
    v_qt: (B*Hkv, D, stride_vtd) i8, V^ transposed, its tokens in sigma16 order
    inside every 16 (the forward contracts V over keys, so its tensor-core
    operand is key-contiguous: copied straight to shared memory, without a
    transpose in the kernel; and in the order in which P^, quantized in the
    accumulator's registers, feeds the tensor cores: ``rhs_sigma16``); every
    padded token slot is written (0 past Nkv);
    k_scale, v_scale: (B*Hkv, ceil(Nkv/BLOCK_N)) f32; with FINE_SCALES k_scale
    is (B*Hkv, Nkv padded to 16), per token (0 scales past Nkv: the forward
    loads them in whole pairs), and v_scale (B*Hkv, D), V's per-channel
    scales over all the tokens, given (:func:`kv_stats_kernel`: V is
    contracted over keys, so its channels are O's columns and the forward
    applies them once, to O).
    Grid: (ceil(Nkv/BLOCK_N), Hkv, B).
    """
    block = sl.program_id(0)
    batch, head, bh = program_head(H_KV)
    row = block * BLOCK_N
    nblocks = cdiv(N_KV, BLOCK_N)
    k_base = head_base(k, batch, head, stride_kb, stride_kh)
    kt = load_strided_rows(k_base, row, N_KV, stride_kn, BLOCK_N, D).to(sl.float32)
    v_base = head_base(v, batch, head, stride_vb, stride_vh)
    # V is read before K is quantized, so that both tiles' loads are in
    # flight together (the kernel is bound by memory, not arithmetic). Read
    # in sigma16 order and stored as it is, over every padded slot; the
    # block absmax does not depend on the order.
    vt = sl.load(v_base, (BLOCK_N, D), (row, 0), (stride_vn, 1), (N_KV, D), sigma16_rows=True)
    if SMOOTH_K:
        # Tail rows must stay 0, not -mean, or they would set the absmax.
        kt = sl.where(row_ids(row, BLOCK_N) < N_KV, kt - load_vector(k_mean, bh, D), 0.0)
    quantize_block_to(kt, k_q, k_scale, bh, block, row, N_KV, nblocks, D, FINE_SCALES,
                      scale_rows=scale_row_length(N_KV, BLOCK_N, FINE_SCALES))
    if FINE_SCALES:
        v_q, _ = sl.quantize(vt, sl.int8_per_channel, scale=load_vector(v_scale, bh, D))
        store_transposed_rows(v_qt, v_q, bh, row, stride_vtd, stride_vtd, D)
    else:
        quantize_block_to(vt, v_qt, v_scale, bh, block, row, stride_vtd, nblocks, D,
                          transposed_stride=stride_vtd)
