"""The backward pre-pass (spec 4.2 "Preprocess", 2.): delta = rowsum(dO o O) in
f32, and dO quantized once per query block (it depends only on the block).

Grid: (ceil(N / BLOCK_M), B*H).
"""

from __future__ import annotations

import sage.language as sl
from sage.kernels.sagebwd.common import (batch_head, cdiv, head_base, load_strided_rows,
                                         quantize_block_to, store_row_stat, store_rows,
                                         store_vector)


def sagebwd_backward_prepass(o, do, delta, do_q, do_scale, N, H, stride_ob, stride_oh,
                             stride_on, stride_dob, stride_doh, stride_don,
                             D: sl.constexpr, BLOCK_M: sl.constexpr,
                             FINE_SCALES: sl.constexpr = False):
    """delta and dO^ of one query block.

    o: (B, H, N, D) the stored forward output (f16, bf16 or f32) and do: (B, H,
    N, D) f16/bf16, with their strides; delta: (B*H, N) f32; do_q: (B*H, N, D)
    i8; do_scale: (B*H, ceil(N/BLOCK_M)) f32, or with FINE_SCALES one scale per
    channel of each block, (B*H*ceil(N/BLOCK_M), D) f32 (D is the outer axis of
    dV = P^T dO, so a per-channel scale factors out of it).
    """
    block = sl.program_id(0)
    bh = sl.program_id(1)
    row = block * BLOCK_M
    batch, head = batch_head(bh, H)
    dot = load_strided_rows(head_base(do, batch, head, stride_dob, stride_doh), row, N,
                            stride_don, BLOCK_M, D)
    ot = load_strided_rows(head_base(o, batch, head, stride_ob, stride_oh), row, N,
                           stride_on, BLOCK_M, D)
    store_row_stat(delta, sl.sum(dot.to(sl.float32) * ot.to(sl.float32), axis=1), bh, row, N)
    if FINE_SCALES:
        do_hat, scale = sl.quantize(dot, sl.int8_per_channel)
        store_rows(do_q, do_hat, bh, row, N, D)
        store_vector(do_scale, scale, bh * cdiv(N, BLOCK_M) + block, D)
    else:
        quantize_block_to(dot, do_q, do_scale, bh, block, row, N, cdiv(N, BLOCK_M), D)
