"""The backward pre-pass (spec 4.2 "Preprocess", 2.): delta = rowsum(dO o O) in
f32, and dO quantized once per query block (it depends only on the block).

Grid: (ceil(N / BLOCK_M), H, B).
"""

from __future__ import annotations

import sage.language as sl
from sage.kernels.sagebwd.common import (cdiv, head_base, load_strided_rows, program_head,
                                         store_block_scale, store_row_stat,
                                         store_transposed_rows, store_vector)


def sagebwd_backward_prepass(o, do, delta, do_qt, do_scale, N, H, stride_ob, stride_oh,
                             stride_on, stride_dob, stride_doh, stride_don, stride_dotd,
                             D: sl.constexpr, BLOCK_M: sl.constexpr,
                             FINE_SCALES: sl.constexpr = False):
    """delta and dO^ of one query block.

    o: (B, H, N, D) the stored forward output (f16, bf16 or f32) and do: (B, H,
    N, D) f16/bf16, with their strides; delta: (B*H, N) f32; do_qt: (B*H, D,
    stride_dotd) i8, dO^ transposed (dV = P^T dO contracts dO over queries, so
    its tensor-core operand is query-contiguous: copied straight to shared
    memory, without a transpose in the kernel); do_scale: (B*H,
    ceil(N/BLOCK_M)) f32, or with FINE_SCALES one scale per channel of each
    block, (B*H*ceil(N/BLOCK_M), D) f32 (D is the outer axis of dV = P^T dO,
    so a per-channel scale factors out of it).
    """
    block = sl.program_id(0)
    batch, head, bh = program_head(H)
    row = block * BLOCK_M
    dot = load_strided_rows(head_base(do, batch, head, stride_dob, stride_doh), row, N,
                            stride_don, BLOCK_M, D)
    ot = load_strided_rows(head_base(o, batch, head, stride_ob, stride_oh), row, N,
                           stride_on, BLOCK_M, D)
    store_row_stat(delta, sl.sum(dot.to(sl.float32) * ot.to(sl.float32), axis=1), bh, row, N)
    if FINE_SCALES:
        do_hat, scale = sl.quantize(dot, sl.int8_per_channel)
        store_vector(do_scale, scale, bh * cdiv(N, BLOCK_M) + block, D)
    else:
        do_hat, scale = sl.quantize(dot, sl.int8_per_block)
        store_block_scale(do_scale, scale, bh, block, cdiv(N, BLOCK_M))
    # Rows past N are 0 (loaded as 0): storing them up to the padded row
    # length keeps whole vectors in bounds.
    store_transposed_rows(do_qt, do_hat, bh, row, stride_dotd, stride_dotd, D)
