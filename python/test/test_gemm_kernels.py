"""The sage GEMMs (sage.kernels.gemm) in the interpreter and in the IR: the
INT8 one exact in int32 with tails in M, N and K and trip counts of 0 and
1, its dequantized form, and the 16-bit one; their accumulators are the
matmuls' own (one ``sage.matmul ... acc``, no add) in a pipelined loop."""

from __future__ import annotations

import re

import numpy as np
import pytest

import sage.language as sl
from sage.kernels.gemm.kernels import gemm
from test_language_kernels import half_operands

RNG = np.random.default_rng(7)
BLOCKS = dict(BLOCK_M=32, BLOCK_N=64, BLOCK_K=32)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _int8(shape: tuple[int, int]) -> np.ndarray:
    return RNG.integers(-127, 128, shape).astype(np.int8)


@pytest.mark.parametrize("m,n,k,group,ws", [(50, 70, 100, 8, False), (32, 64, 32, 8, False),
                                            (40, 65, 0, 8, False), (33, 64, 7, 8, False),
                                            (250, 200, 40, 3, False), (250, 200, 40, 1, False),
                                            (50, 70, 100, 8, True)])
def test_int8_gemm_is_exact(m, n, k, group, ws):
    """Every C tile is written once, whatever the program groups (8 tile rows
    of 3, 3 and 2 with GROUP_M = 3); warp specialisation changes nothing."""
    a, b = _int8((m, k)), _int8((n, k))
    c = np.full((m, n), -1, np.int32)
    unused = np.zeros(1, np.float32)
    sl.interpret(gemm, _cdiv(m, 32) * _cdiv(n, 64), [a, b, c, unused, unused, m, n, k],
                 dict(BLOCKS, STAGES=2, GROUP_M=group, WARP_SPECIALIZE=ws))
    np.testing.assert_array_equal(c, a.astype(np.int64) @ b.astype(np.int64).T)


@pytest.mark.parametrize("programs", [1, 3, 7])
def test_persistent_programs_walk_every_tile(programs):
    """PERSISTENT: a few programs take every tile of the grid in turn (a
    program with more tiles than another, and fewer programs than tiles)."""
    m, n, k = 100, 150, 64
    a, b = _int8((m, k)), _int8((n, k))
    c = np.full((m, n), -1, np.int32)
    unused = np.zeros(1, np.float32)
    sl.interpret(gemm, programs, [a, b, c, unused, unused, m, n, k],
                 dict(BLOCKS, STAGES=2, GROUP_M=2, PERSISTENT=True, WARP_SPECIALIZE=True,
                      TMA_STORE=True))
    np.testing.assert_array_equal(c, a.astype(np.int64) @ b.astype(np.int64).T)


def test_shared_bytes_of_a_plan():
    pytest.importorskip("torch")
    from sage.kernels.gemm.ops import HALF_TILES, INT8_TILES, shared_bytes  # noqa: PLC0415
    # 3 stages of 48 KB, a 64 KB bf16 C tile: fits the H100's 227 KB.
    assert shared_bytes(HALF_TILES, 2, 2) == 3 * 48 * 1024 + 64 * 1024 + 2048 <= 232448
    # f32 C doubles the C tile: over, so half_mm stores it without TMA.
    assert shared_bytes(HALF_TILES, 2, 4) > 232448
    assert shared_bytes(INT8_TILES, 1, 4) == 4 * 48 * 1024 + 2048


def test_persistent_grid():
    pytest.importorskip("torch")
    from sage.kernels.gemm.ops import GemmTiles  # noqa: PLC0415
    tiles = GemmTiles(128, 256, 64, 4, 8, persistent=True)
    assert tiles.grid(4096, 4096, sms=132) == (132,)
    assert tiles.grid(200, 200, sms=132) == (2,)
    assert GemmTiles(128, 256, 64, 4, 8).grid(4096, 4096) == (512,)
    with pytest.raises(ValueError, match="SM count"):
        tiles.grid(4096, 4096)


def test_long_persistent_programs_build_their_maps_on_the_device():
    """Persistent plans whose programs walk 8 or more tiles each take device
    maps (8192³: 15.5 tiles a program on 132 SMs); shorter ones, and plans of
    one program per tile, follow SAGE_TENSOR_MAPS (None)."""
    pytest.importorskip("torch")
    from sage.kernels.gemm.ops import HALF_TILES, INT8_TILES, GemmTiles, tensor_maps_for
    assert tensor_maps_for(INT8_TILES, 8192, 8192, 132) == "device"
    assert tensor_maps_for(HALF_TILES, 8192, 8192, 132) == "device"
    assert tensor_maps_for(INT8_TILES, 4096, 4096, 132) is None
    assert tensor_maps_for(INT8_TILES, 16384, 1024, 132) is None  # 512 tiles: 3.9 each
    assert tensor_maps_for(GemmTiles(128, 256, 128, 4, 8), 8192, 8192, 2048) is None


def test_int8_gemm_dequantizes_once_after_the_loop():
    m, n, k = 45, 70, 96
    a, b = _int8((m, k)), _int8((n, k))
    sa = RNG.uniform(0.001, 0.01, m).astype(np.float32)
    sb = RNG.uniform(0.001, 0.01, n).astype(np.float32)
    c = np.zeros((m, n), np.float32)
    sl.interpret(gemm, _cdiv(m, 32) * _cdiv(n, 64), [a, b, c, sa, sb, m, n, k],
                 dict(BLOCKS, DEQUANT=True))
    exact = (a.astype(np.float64) @ b.astype(np.float64).T) * sa[:, None] * sb[None, :]
    # f32(dot) * sa * sb: three f32 roundings.
    np.testing.assert_allclose(c, exact, rtol=4e-7, atol=0)


@pytest.mark.parametrize("dtype", [sl.float16, sl.bfloat16])
def test_half_gemm(dtype):
    m, n, k = 40, 70, 72
    (a, b), args = half_operands(RNG, dtype, (m, k), (n, k))
    c = np.zeros((m, n), np.float32)
    unused = np.zeros(1, np.float32)
    sl.interpret(gemm, _cdiv(m, 32) * _cdiv(n, 64), [*args, c, unused, unused, m, n, k], BLOCKS)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64).T,
                               rtol=1e-5, atol=1e-5)


def test_the_accumulator_is_the_matmuls_own():
    specs = [sl.ArgSpec.pointer(sl.int8), sl.ArgSpec.pointer(sl.int8),
             sl.ArgSpec.pointer(sl.int32), sl.ArgSpec.pointer(sl.float32),
             sl.ArgSpec.pointer(sl.float32), *[sl.ArgSpec.scalar(sl.int32)] * 3]
    ir = sl.trace(gemm, specs, dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=128, STAGES=3),
                  num_warps=8)
    matmuls = re.findall(r"sage\.matmul .* acc .* -> tensor<128x256xi32>", ir)
    assert len(matmuls) == 1, ir
    assert "sage.num_stages = 3 : i32" in ir
    assert "sage.qmatmul" not in ir
    assert not re.search(r"arith\.addi .*: tensor<", ir), ir  # no tile of partial sums
    assert "sage.warp_specialize" not in ir


def test_warp_specialised_loop_is_marked():
    specs = [sl.ArgSpec.pointer(sl.bfloat16)] * 3 + [sl.ArgSpec.pointer(sl.float32)] * 2 + \
        [sl.ArgSpec.scalar(sl.int32)] * 3
    ir = sl.trace(gemm, specs, dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, STAGES=4,
                                    WARP_SPECIALIZE=True), num_warps=8)
    assert "{sage.num_stages = 4 : i32, sage.warp_specialize}" in ir
