"""C = A B^T on the tensor cores, written in the sage language.

Both operands are K-major (A is M x K, B is N x K, rows contiguous), as
``torch._int_mm(a, b.T)`` and ``a @ b.T`` take them, so both tiles are
copied straight to shared memory (TMA where the pointers are 16-byte
aligned) and the loop over K is pipelined ``STAGES - 1`` iterations ahead
(with WARP_SPECIALIZE by a producer warpgroup of its own, ``STAGES`` ahead).
The accumulator stays in the tensor cores' registers for the whole
contraction (``sl.matmul`` with ``acc=``): int32 for INT8, f32 for 16-bit.

Programs take their tiles in groups of GROUP_M tile rows (a one-axis grid
of cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N) programs, or, PERSISTENT, one per SM
walking the tiles in that order): the programs that run together share a
few rows of A and columns of B, which then stay in L2.
"""

from __future__ import annotations

import sage.language as sl


def grouped_tile(tile, M, N, BLOCK_M: int, BLOCK_N: int, GROUP_M: int):
    """``(row, col)`` of C tile number ``tile``: tile numbers run down GROUP_M
    tile rows, then on to the next tile column, group after group."""
    blocks_m = (M + BLOCK_M - 1) // BLOCK_M
    blocks_n = (N + BLOCK_N - 1) // BLOCK_N
    per_group = GROUP_M * blocks_n
    group = tile // per_group
    first = group * GROUP_M
    rows = sl.minimum(blocks_m - first, GROUP_M)
    local = tile - group * per_group
    return (first + local % rows) * BLOCK_M, (local // rows) * BLOCK_N


def gemm(a, b, c, a_scale, b_scale, M, N, K, BLOCK_M: sl.constexpr, BLOCK_N: sl.constexpr,
         BLOCK_K: sl.constexpr, STAGES: sl.constexpr = 3, GROUP_M: sl.constexpr = 8,
         DEQUANT: sl.constexpr = False, WARP_SPECIALIZE: sl.constexpr = False,
         PERSISTENT: sl.constexpr = False, TMA_STORE: sl.constexpr = False):
    """C = A B^T from A (M x K) and B (N x K), both int8 or both f16/bf16.

    int8 accumulates exactly in int32: without DEQUANT c is int32 (K <=
    131072 never wraps); with DEQUANT c is f32 (or f16/bf16: the pointer's
    type) ``f32(A B^T) * a_scale[m] * b_scale[n]``, one f32 scale per row of
    A and per row of B (per-token and per-channel INT8), applied once after
    the loop. 16-bit operands accumulate in f32; c is f32, f16 or bf16.
    a_scale and b_scale are read only with DEQUANT. WARP_SPECIALIZE gives the
    loop's copies a producer warpgroup (``sl.range(..., warp_specialize=True)``).
    Grid: cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N) programs, one C tile each; with
    PERSISTENT any number of programs, program p taking tiles p, p + grid,
    ... (with WARP_SPECIALIZE the producer then loads the next tile while
    the consumers store this one). TMA_STORE stores C through shared memory
    by the copy engine (``sl.store(..., tma=True)``: a BLOCK_M x BLOCK_N tile
    of shared memory on top of the stages).
    """
    pid = sl.program_id(0)
    tiles = ((M + BLOCK_M - 1) // BLOCK_M) * ((N + BLOCK_N - 1) // BLOCK_N)
    stop, stride = (tiles, sl.num_programs(0)) if PERSISTENT else (pid + 1, 1)
    accumulates = sl.int32 if a.dtype.element == sl.int8 else sl.float32
    for tile in sl.range(pid, stop, stride):
        row, col = grouped_tile(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        acc = sl.zeros((BLOCK_M, BLOCK_N), accumulates)
        for k in sl.range(0, K, BLOCK_K, num_stages=STAGES, warp_specialize=WARP_SPECIALIZE):
            at = sl.load(a, (BLOCK_M, BLOCK_K), (row, k), (K, 1), (M, K))
            bt = sl.load(b, (BLOCK_N, BLOCK_K), (col, k), (K, 1), (N, K))
            acc = sl.matmul(at, bt, contract=(1, 1), acc=acc)
        if DEQUANT:
            sa = sl.load(a_scale, (BLOCK_M, 1), (row, 0), (1, 0), (M, 1))
            sb = sl.load(b_scale, (1, BLOCK_N), (0, col), (0, 1), (1, N))
            acc = acc.to(sl.float32) * sa * sb
        sl.store(c, acc.to(c.dtype.element), (row, col), (N, 1), (M, N), tma=TMA_STORE)
