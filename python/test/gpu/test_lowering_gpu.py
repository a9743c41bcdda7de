"""Kernels compiled by the sage library, run on the GPU, checked against the
reference semantics (python/sage/reference).

The reference emulates the quantizer's f32 rounding steps exactly, and the
INT8 kernels' epilogue is `f32(dot) * (s_a * s_b)` in f32 with no fused add,
so those outputs must be identical, not merely close. On sm_90a the matmuls
run on wgmma, on sm_80 PTX (JIT-compiled for the H100) on mma.sync.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from sage import reference as ref

try:
    import cupy as cp
except ImportError:  # the conftest skips these tests
    cp = None

TILE_M, TILE_K = 64, 128
SHAPES = [(64, 64), (1, 1), (100, 37), (128, 192), (197, 131)]


def _inputs(rows: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, TILE_K)) * rng.choice([0.01, 1.0, 30.0])
    x[rng.random(x.shape) < 0.05] = 0.0  # exact zeros and sign changes
    return x.astype(np.float16)


def _reference_tiles(x: np.ndarray):
    """Per 64-row tile (zero-padded like the kernel's masked loads): q, scale."""
    tiles = []
    for start in range(0, x.shape[0], TILE_M):
        tile = np.zeros((TILE_M, TILE_K), np.float16)
        part = x[start:start + TILE_M]
        tile[:part.shape[0]] = part
        q, s = ref.quantize(tile, "per_block")
        tiles.append((q[:part.shape[0]], np.float32(s[0, 0])))
    return tiles


@pytest.mark.parametrize("rows", [1, 64, 100, 197])
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_quantize_tile_matches_reference(load_kernel, record, rows, arch):
    kernel = load_kernel("quantize_tile", arch)
    x = _inputs(rows, seed=rows)
    blocks = -(-rows // TILE_M)
    q = cp.zeros((rows, TILE_K), cp.int8)
    scales = cp.zeros(blocks, cp.float32)
    kernel((blocks,), cp.asarray(x), q, scales, np.int64(rows))
    expected = _reference_tiles(x)
    got_q, got_s = cp.asnumpy(q), cp.asnumpy(scales)
    for b, (eq, es) in enumerate(expected):
        np.testing.assert_array_equal(got_q[b * TILE_M:(b + 1) * TILE_M], eq)
        assert got_s[b].view(np.uint32) == es.view(np.uint32), (b, got_s[b], es)
    record(f"quantize_tile[{arch},rows={rows}]", "bit-exact")


# wgmma with A from registers: the operand list after the accumulators is a
# register list, not a descriptor.
REGISTER_A = re.compile(r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k\d+\.\S+ \{[^}]*\}, \{")
# (arch, forced form or None for sage-select-mma's choice) per test id.
MMA_FORMS = {"auto-sm_90a": ("sm_90a", None), "wgmma_reg_a-sm_90a": ("sm_90a", "wgmma_reg_a"),
             "wgmma-sm_90a": ("sm_90a", "wgmma"), "auto-sm_80": ("sm_80", None)}


@pytest.mark.parametrize("m,n", SHAPES)
@pytest.mark.parametrize("form", sorted(MMA_FORMS))
def test_quant_matmul_matches_reference(load_kernel, record, m, n, form):
    """Quantized in the program, so A lives in registers: sage-select-mma
    picks wgmma with A from registers on sm_90a (the descriptor form is
    forced for comparison); mma.sync on sm_80."""
    arch, mma = MMA_FORMS[form]
    kernel = load_kernel("quant_matmul", arch, mma=mma)
    register_a = mma == "wgmma_reg_a" or (mma is None and arch == "sm_90a")
    assert bool(REGISTER_A.search(kernel.ptx)) == register_a, form
    a, b = _inputs(m, seed=2 * m + 1), _inputs(n, seed=3 * n + 7)
    c = cp.full((m, n), np.nan, cp.float32)
    grid = (-(-m // 64), -(-n // 64))
    kernel(grid, cp.asarray(a), cp.asarray(b), c, np.int64(m), np.int64(n))
    got = cp.asnumpy(c)

    expected = np.empty((m, n), np.float32)
    for i, (qa, sa) in enumerate(_reference_tiles(a)):
        for j, (qb, sb) in enumerate(_reference_tiles(b)):
            dot = ref.int8_dot(qa, qb, 1, 1)
            block = dot.astype(np.float32) * np.float32(sa * sb)
            expected[i * 64:i * 64 + qa.shape[0], j * 64:j * 64 + qb.shape[0]] = block
    np.testing.assert_array_equal(got, expected)
    # The float64 product of the dequantized operands agrees to rounding.
    np.testing.assert_allclose(got, expected.astype(np.float64), rtol=1e-6)
    record(f"quant_matmul[{form},{m}x{n}]", "bit-exact")


@pytest.mark.parametrize("m,n", SHAPES)
@pytest.mark.parametrize("form", sorted(MMA_FORMS))
def test_half_matmul_matches_float64(load_kernel, record, m, n, form):
    """The 16-bit matmul (on sm_90a wgmma f16 from two descriptors, as
    chosen for loaded operands, or with A from registers; mma.sync on
    sm_80): f32 accumulation of exact f16 products, so the error is a few
    f32 ulps of the sum of |products|."""
    arch, mma = MMA_FORMS[form]
    kernel = load_kernel("half_matmul", arch, mma=mma)
    assert bool(REGISTER_A.search(kernel.ptx)) == (mma == "wgmma_reg_a"), form
    a, b = _inputs(m, seed=5 * m + 3), _inputs(n, seed=7 * n + 1)
    c = cp.full((m, n), np.nan, cp.float32)
    kernel((-(-m // 64), -(-n // 64)), cp.asarray(a), cp.asarray(b), c,
           np.int64(m), np.int64(n))
    got = cp.asnumpy(c).astype(np.float64)
    exact = ref.matmul(a, b)
    bound = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)).T
    err = np.abs(got - exact)
    assert np.all(err <= 128 * np.finfo(np.float32).eps * bound + 1e-30)
    rel = float(np.linalg.norm(got - exact) / max(np.linalg.norm(exact), 1e-300))
    record(f"half_matmul[{form},{m}x{n}] rel_l2", rel)


# Each way sagegpu-promote-operands can bring the operands to shared memory, and
# the instruction that shows it was taken.
COPY_PATHS = {
    "tma-sm_90a": ("sm_90a", None, "cp.async.bulk.tensor.2d"),
    "cp_async-sm_90a-ptx80": ("sm_90a", 80, "cp.async.cg.shared.global"),
    "cp_async-sm_80": ("sm_80", None, "cp.async.cg.shared.global"),
}


@pytest.mark.parametrize("m,n,k", [(64, 64, 128), (1, 1, 16), (100, 37, 160),
                                   (197, 131, 272), (128, 192, 512)])
@pytest.mark.parametrize("path", sorted(COPY_PATHS))
def test_int8_matmul_async_copies_match_reference(load_kernel, record, m, n, k, path):
    """INT8 operands copied global -> shared without registers, as
    sagegpu-promote-operands chose from the kernel's alignment hints: by the copy
    engine (TMA, tensor maps built on the device, sm_90a with PTX 8.3) or
    with cp.async, zero-filled past the M, N and K bounds. Every integer
    product is exact, so the only error is the f32 epilogue's rounding (a
    few ulps of the sum of |terms|)."""
    arch, ptx_version, instruction = COPY_PATHS[path]
    kernel = load_kernel("int8_matmul", arch, ptx_version)
    assert instruction in kernel.ptx, f"{path}: {instruction} not in the PTX"
    rng = np.random.default_rng(m * 1000 + n * 10 + k)
    a = rng.integers(-127, 128, (m, k), dtype=np.int8)
    b = rng.integers(-127, 128, (n, k), dtype=np.int8)
    scales = np.array([0.013, 0.0071], np.float32)
    c = cp.full((m, n), np.nan, cp.float32)
    kernel((-(-m // 64), -(-n // 64)), cp.asarray(a), cp.asarray(b),
           cp.asarray(scales), c, np.int64(m), np.int64(n), np.int64(k))
    got = cp.asnumpy(c).astype(np.float64)
    scale = float(np.float32(scales[0] * scales[1]))
    exact = ref.int8_dot(a, b, 1, 1).astype(np.float64) * scale
    bound = (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)).T) * scale
    err = np.abs(got - exact)
    assert np.all(np.isfinite(got)), "unwritten or non-finite outputs"
    assert np.all(err <= 8 * np.finfo(np.float32).eps * bound + 1e-30), float(err.max())
    rel = float(np.linalg.norm(got - exact) / max(np.linalg.norm(exact), 1e-300))
    record(f"int8_matmul[{path},{m}x{n}x{k}] rel_l2", rel)
