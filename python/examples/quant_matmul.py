"""A quantized matmul in the sage kernel language: C = quant(A) quant(B)^T.

A is M x K and B is N x K (f16, row-major), C is M x N (f32). Each program
computes one BLOCK_M x BLOCK_N tile of C: it loads its rows of A and B,
quantizes each tile to INT8 with one scale per tile, multiplies on INT8 and
scales back to f32. The contraction runs over K in BLOCK_K steps with a
runtime loop; tails in M, N and K are masked by the loads' bounds.

``python3 python/examples/quant_matmul.py`` compiles it for the GPU, runs it
with torch tensors and checks it against numpy; with ``SAGE_INTERPRET=1`` the
same kernel runs on the CPU interpreter instead.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sage  # noqa: E402
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


kernel = sage.jit(quant_matmul)


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


def run(a: np.ndarray, b: np.ndarray, blocks: dict[str, int]) -> np.ndarray:
    """C through ``@sage.jit``: on the GPU with torch tensors, or on the CPU
    interpreter with numpy arrays when ``SAGE_INTERPRET=1``."""
    m, n, k = a.shape[0], b.shape[0], a.shape[1]
    grid = (-(-m // blocks["BLOCK_M"]), -(-n // blocks["BLOCK_N"]))
    if os.environ.get("SAGE_INTERPRET") == "1":
        c = np.zeros((m, n), np.float32)
        kernel[grid](a, b, c, m, n, k, **blocks)
        return c
    try:
        import torch  # the GPU path needs torch; the interpreter does not
    except ImportError:
        raise SystemExit("this example needs torch and a CUDA GPU; "
                         "run it with SAGE_INTERPRET=1 to use the CPU interpreter")
    a_gpu, b_gpu = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    c = torch.zeros((m, n), dtype=torch.float32, device="cuda")
    kernel[grid](a_gpu, b_gpu, c, m, n, k, **blocks)
    return c.cpu().numpy()


def main() -> int:
    rng = np.random.default_rng(0)
    m, n, k = 100, 72, 160  # no multiple of the blocks: every tail is masked
    blocks = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=64)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((n, k)).astype(np.float16)
    c = run(a, b, blocks)
    # Scales are per tile, so the reference quantizes each program's tiles.
    expected = np.zeros((m, n))
    for i in range(0, m, blocks["BLOCK_M"]):
        for j in range(0, n, blocks["BLOCK_N"]):
            expected[i:i + blocks["BLOCK_M"], j:j + blocks["BLOCK_N"]] = reference(
                a[i:i + blocks["BLOCK_M"]], b[j:j + blocks["BLOCK_N"]], blocks["BLOCK_K"])
    error = np.abs(c - expected).max()
    exact = a.astype(np.float64) @ b.astype(np.float64).T
    where = "interpreter" if os.environ.get("SAGE_INTERPRET") == "1" else "GPU"
    print(f"{where}: max |C - reference| = {error:.2e}, "
          f"max |C - unquantized| = {np.abs(c - exact).max():.2e}")
    return 0 if error < 1e-3 else 1


if __name__ == "__main__":
    sys.exit(main())
