"""A quantized matmul in the sage kernel language: C = quant(A) quant(B)^T.

A is M x K and B is N x K (f16, row-major), C is M x N (f32). Each program
computes one BLOCK_M x BLOCK_N tile of C: it loads its rows of A and B,
quantizes each tile to INT8 with one scale per tile, multiplies on INT8 and
scales back to f32. The contraction runs over K in BLOCK_K steps with a
runtime loop; tails in M, N and K are masked by the loads' bounds.

Run ``python3 python/examples/quant_matmul.py`` to execute it on the CPU
interpreter and check it against numpy.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sage.language as sl  # noqa: E402


def quant_matmul(a, b, c, M, N, K, BLOCK_M: sl.constexpr, BLOCK_N: sl.constexpr,
                 BLOCK_K: sl.constexpr):
    """One BLOCK_M x BLOCK_N tile of C = quant(A) quant(B)^T."""
    row = sl.program_id(0) * BLOCK_M
    col = sl.program_id(1) * BLOCK_N
    acc = sl.zeros((BLOCK_M, BLOCK_N), sl.float32)
    for k in sl.range(0, K, BLOCK_K):
        at = sl.load(a, shape=(BLOCK_M, BLOCK_K), offsets=(row, k), strides=(K, 1),
                     bounds=(M, K))
        bt = sl.load(b, shape=(BLOCK_N, BLOCK_K), offsets=(col, k), strides=(K, 1),
                     bounds=(N, K))
        aq, sa = sl.quantize(at, sl.int8_per_block)
        bq, sb = sl.quantize(bt, sl.int8_per_block)
        acc = sl.qmatmul(aq, sa, bq, sb, contract=(1, 1), acc=acc)
    sl.store(c, acc, offsets=(row, col), strides=(N, 1), bounds=(M, N))


def reference(a: np.ndarray, b: np.ndarray, block_k: int) -> np.ndarray:
    """The same computation in float64 numpy: per-block INT8 per K block."""
    out = np.zeros((a.shape[0], b.shape[0]))
    for k in range(0, a.shape[1], block_k):
        qa, sa = _quantize_block(a[:, k:k + block_k])
        qb, sb = _quantize_block(b[:, k:k + block_k])
        out += (qa @ qb.T) * (sa * sb)
    return out


def _quantize_block(x: np.ndarray) -> tuple[np.ndarray, float]:
    scale = np.float32(np.abs(x).max()) / np.float32(127)
    inv = np.float32(0) if scale == 0 else np.float32(1) / scale
    q = np.clip(np.rint(x.astype(np.float32) * inv), -127, 127)
    return q.astype(np.float64), float(scale)


def main() -> int:
    rng = np.random.default_rng(0)
    m, n, k = 100, 72, 160  # no multiple of the blocks: every tail is masked
    block_m, block_n, block_k = 64, 64, 64
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((n, k)).astype(np.float16)
    c = np.zeros((m, n), np.float32)
    grid = (-(-m // block_m), -(-n // block_n))
    sl.interpret(quant_matmul, grid, [a, b, c, m, n, k],
                 dict(BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k))
    # Scales are per tile, so the reference quantizes each program's tiles.
    expected = np.zeros((m, n))
    for i in range(0, m, block_m):
        for j in range(0, n, block_n):
            expected[i:i + block_m, j:j + block_n] = reference(
                a[i:i + block_m], b[j:j + block_n], block_k)
    error = np.abs(c - expected).max()
    exact = a.astype(np.float64) @ b.astype(np.float64).T
    print(f"max |C - reference| = {error:.2e}, "
          f"max |C - unquantized| = {np.abs(c - exact).max():.2e}")
    return 0 if error < 1e-3 else 1


if __name__ == "__main__":
    sys.exit(main())
