"""The sage GEMMs (sage.kernels.gemm.ops) on the GPU: INT8 exact against the
integer product at the benchmark's tile plan and at smaller ones (2-4
stages, with and without a producer warpgroup, persistent or one program a
tile; tails in M, N and K, trip counts of 0, 1 and fewer than the stages, K
not a multiple of 16 where a producer plan runs without one, more tiles
than SMs), the dequantized form, and the 16-bit GEMM against torch. Skipped
without a GPU (conftest)."""

from __future__ import annotations

import pytest

from sage.kernels.gemm.ops import HALF_TILES, INT8_TILES, GemmTiles, half_mm, int8_mm

torch = pytest.importorskip("torch")

#: Plans without a producer warpgroup (the defaults have one), the
#: benchmark's tile among them.
SMALL = [GemmTiles(64, 64, 64, 2, 4), GemmTiles(64, 128, 128, 3, 4),
         GemmTiles(128, 128, 128, 4, 8), GemmTiles(128, 256, 128, 4, 8)]
#: Warp-specialised plans: a TMA producer warpgroup beside 1 or 2 consumer
#: warpgroups.
SPECIALISED = [GemmTiles(128, 256, 128, 4, 8, warp_specialize=True),
               GemmTiles(64, 128, 128, 2, 4, warp_specialize=True),
               GemmTiles(128, 128, 64, 3, 8, warp_specialize=True)]
#: Persistent plans (one program per SM walking the tiles), with and
#: without a producer warpgroup.
PERSISTENT = [GemmTiles(64, 64, 64, 2, 4, warp_specialize=True, persistent=True),
              GemmTiles(128, 128, 128, 3, 8, persistent=True)]
#: C stored by the copy engine (int32 C: 64 KB of shared memory for it).
TMA_STORED = [GemmTiles(128, 128, 128, 3, 8, warp_specialize=True, persistent=True,
                        tma_store=True),
              GemmTiles(64, 64, 64, 2, 4, tma_store=True)]


def _int8(*shape: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(-127, 128, shape, generator=gen, dtype=torch.int8).cuda()


def _exact(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a.cpu().long() @ b.cpu().long().T).int()


@pytest.mark.parametrize("tiles", [INT8_TILES, *SMALL, *SPECIALISED, *PERSISTENT, *TMA_STORED],
                         ids=str)
@pytest.mark.parametrize("m,n,k", [(512, 512, 512), (200, 136, 320), (130, 300, 48),
                                   (64, 64, 0), (256, 256, 4096), (2100, 2304, 256),
                                   (2100, 2304, 200), (130, 130, 64)])
def test_int8_mm_is_exact(record, tiles, m, n, k):
    a, b = _int8(m, k, seed=m + k), _int8(n, k, seed=n + k + 1)
    got = int8_mm(a, b, tiles=tiles)
    assert got.dtype == torch.int32
    assert torch.equal(got.cpu(), _exact(a, b))
    ws = ((":ws" if tiles.warp_specialize else "") + (":p" if tiles.persistent else "")
          + (":ts" if tiles.tma_store else ""))
    record(f"gemm_int8_exact[{tiles.block_m}x{tiles.block_n}x{tiles.block_k}:"
           f"{tiles.stages}{ws}:{m}x{n}x{k}]", "exact")


def test_int8_mm_matches_torch_int_mm():
    a, b = _int8(1024, 2048, seed=1), _int8(768, 2048, seed=2)
    assert torch.equal(int8_mm(a, b), torch._int_mm(a, b.t()))


def test_int8_mm_dequantized():
    m, n, k = 300, 520, 1024
    a, b = _int8(m, k, seed=3), _int8(n, k, seed=4)
    sa = torch.rand(m, device="cuda") / 100
    sb = torch.rand(n, device="cuda") / 100
    got = int8_mm(a, b, sa, sb)
    want = _exact(a, b).double() * sa.cpu().double()[:, None] * sb.cpu().double()[None, :]
    torch.testing.assert_close(got.cpu().double(), want, rtol=4e-7, atol=0)
    half = int8_mm(a, b, sa, sb, out_dtype=torch.bfloat16)
    assert half.dtype == torch.bfloat16
    torch.testing.assert_close(half.cpu().double(), want, rtol=2 ** -8, atol=0)


HALF_OTHERS = [GemmTiles(128, 256, 64, 4, 8, warp_specialize=True),
               GemmTiles(128, 256, 64, 3, 8),
               GemmTiles(128, 256, 64, 3, 8, warp_specialize=True, persistent=True,
                         tma_store=True)]


@pytest.mark.parametrize("tiles", [HALF_TILES, *HALF_OTHERS], ids=str)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("m,n,k", [(512, 512, 512), (200, 136, 320), (1000, 72, 48),
                                   (64, 64, 0), (384, 512, 8192), (130, 130, 64)])
def test_half_mm_matches_torch(record, tiles, dtype, m, n, k):
    gen = torch.Generator().manual_seed(m * n + k)
    a = torch.randn(m, k, generator=gen).to(dtype).cuda()
    b = torch.randn(n, k, generator=gen).to(dtype).cuda()
    got = half_mm(a, b, out_dtype=torch.float32, tiles=tiles)
    if k == 0:
        assert torch.equal(got, torch.zeros_like(got))
        return
    want = a.double() @ b.double().T
    error = ((got.double() - want).norm() / want.norm()).item()
    # f32 accumulation of exact products: rounding grows with the K-loop's length.
    assert error < (1e-6 if k <= 1024 else 2e-5), error
    assert half_mm(a, b, tiles=tiles).dtype == dtype
    ws = ((":ws" if tiles.warp_specialize else "") + (":p" if tiles.persistent else "")
          + (":ts" if tiles.tma_store else ""))
    record(f"gemm_half_rel_l2[{dtype}{ws}:{m}x{n}x{k}]", error)


def test_argument_errors():
    a = _int8(64, 64, seed=5)
    with pytest.raises(TypeError, match="must be torch.int8"):
        int8_mm(a.float(), a)
    with pytest.raises(ValueError, match="K differs"):
        int8_mm(a, _int8(64, 32, seed=6))
    with pytest.raises(ValueError, match="contiguous 2-D CUDA"):
        int8_mm(a.t(), a)
    with pytest.raises(ValueError, match="both a_scale and b_scale"):
        int8_mm(a, a, torch.ones(64, device="cuda"))
    with pytest.raises(ValueError, match=r"b_scale must be float32 of shape \(64,\)"):
        int8_mm(a, a, torch.ones(64, device="cuda"), torch.ones(32, device="cuda"))
    with pytest.raises(ValueError, match="without scales the result is int32"):
        int8_mm(a, a, out_dtype=torch.float32)
    long = torch.zeros(1, 262144, dtype=torch.int8, device="cuda")
    with pytest.raises(ValueError, match=r"K = 262144 may overflow the int32 accumulator "
                                         r"\(at most 131072\)"):
        int8_mm(long, long)
    with pytest.raises(TypeError, match="float16 or torch.bfloat16"):
        half_mm(a, a)
