"""The backward pre-pass (spec 4.2 "Preprocess", 2.): delta = rowsum(dO o O) in
f32, dO quantized once per query block (it depends only on the block), and the
transposed INT8 copies the backward's register-operand products read.

Grid: (ceil(N / BLOCK_M), H, B).
"""

from __future__ import annotations

import sage.language as sl
from sage.kernels.sagebwd.common import (cdiv, head_base, load_strided_rows, program_head,
                                         slice_of, store_block_scale, store_row_stat,
                                         store_transposed_rows, store_vector)


def sagebwd_backward_prepass(o, do, q_q, delta, do_qt, q_qt, do_scale, N, H, stride_ob,
                             stride_oh, stride_on, stride_dob, stride_doh, stride_don,
                             stride_dotd, D: sl.constexpr, BLOCK_M: sl.constexpr,
                             FINE_SCALES: sl.constexpr = False):
    """delta, dO^ and the transposed copies of dO^ and Q^ for one query block.

    o: (B, H, N, D) the stored forward output (f16, bf16 or f32) and do: (B, H,
    N, D) f16/bf16, with their strides; q_q: (B*H, N, D) i8, the forward's Q^;
    delta: (B*H, N) f32; do_qt, q_qt: (B*H, D, stride_dotd) i8, dO^ and Q^
    transposed with their queries in sigma16 order inside every 16 (the
    backward computes S^T, and dV = P^T dO, dK = dS^T Q contract its
    columns, the queries: the partners are query-contiguous, copied straight
    to shared memory, and in the order in which P^T and dS^T, quantized in
    the accumulator's registers, feed the tensor cores); do_scale: (B*H,
    ceil(N/BLOCK_M)) f32, or with FINE_SCALES one scale per channel of each
    block, (B*H*ceil(N/BLOCK_M), D) f32 (D is the outer axis of dV = P^T dO,
    so a per-channel scale factors out of it).
    """
    block = sl.program_id(0)
    batch, head, bh = program_head(H)
    row = block * BLOCK_M
    do_base = head_base(do, batch, head, stride_dob, stride_doh)
    dot = load_strided_rows(do_base, row, N, stride_don, BLOCK_M, D)
    ot = load_strided_rows(head_base(o, batch, head, stride_ob, stride_oh), row, N,
                           stride_on, BLOCK_M, D)
    store_row_stat(delta, sl.sum(dot.to(sl.float32) * ot.to(sl.float32), axis=1), bh, row, N)
    # dO again, in sigma16 order: the quantization's absmax (per channel or
    # per block) does not depend on the order of the rows.
    dos = sl.load(do_base, (BLOCK_M, D), (row, 0), (stride_don, 1), (N, D), sigma16_rows=True)
    if FINE_SCALES:
        do_hat, scale = sl.quantize(dos, sl.int8_per_channel)
        store_vector(do_scale, scale, bh * cdiv(N, BLOCK_M) + block, D)
    else:
        do_hat, scale = sl.quantize(dos, sl.int8_per_block)
        store_block_scale(do_scale, scale, bh, block, cdiv(N, BLOCK_M))
    # Rows past N are 0 (loaded as 0): storing them up to the padded row
    # length keeps whole vectors in bounds.
    store_transposed_rows(do_qt, do_hat, bh, row, stride_dotd, stride_dotd, D)
    q_hat = sl.load(slice_of(q_q, bh, N, D), (BLOCK_M, D), (row, 0), (D, 1), (N, D),
                    sigma16_rows=True)
    store_transposed_rows(q_qt, q_hat, bh, row, stride_dotd, stride_dotd, D)
