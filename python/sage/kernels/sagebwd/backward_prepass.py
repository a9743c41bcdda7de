"""The backward pre-pass (spec 4.2 "Preprocess", 2.): delta = rowsum(dO o O) in
f32, and dO quantized once per query block (it depends only on the block).

Grid: (ceil(N / BLOCK_M), B*H).
"""

from __future__ import annotations

import sage.language as sl
from sage.kernels.sagebwd.common import cdiv, load_rows, quantize_block_to, store_row_stat


def sagebwd_backward_prepass(o, do, delta, do_q, do_scale, N, D: sl.constexpr,
                             BLOCK_M: sl.constexpr):
    """delta and dO^ of one query block.

    o: (B*H, N, D) the stored forward output (f16, bf16 or f32); do: (B*H, N, D)
    f16/bf16; delta: (B*H, N) f32; do_q: i8 like do; do_scale:
    (B*H, ceil(N/BLOCK_M)) f32.
    """
    block = sl.program_id(0)
    bh = sl.program_id(1)
    row = block * BLOCK_M
    dot = load_rows(do, bh, row, N, BLOCK_M, D)
    ot = load_rows(o, bh, row, N, BLOCK_M, D)
    store_row_stat(delta, sl.sum(dot.to(sl.float32) * ot.to(sl.float32), axis=1), bh, row, N)
    quantize_block_to(dot, do_q, do_scale, bh, block, row, N, cdiv(N, BLOCK_M), D)
