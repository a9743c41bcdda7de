"""The sage GEMMs on torch CUDA tensors (``@sage.jit``), for benchmarks and tests.

* :func:`int8_mm` ``(a, b) -> a @ b.T`` from int8, exact int32 (or scaled f32);
* :func:`half_mm` ``(a, b) -> a @ b.T`` from f16/bf16, f32 accumulation.

Both take K-major operands (``a`` M x K, ``b`` N x K, contiguous) and the
tile plan of :data:`INT8_TILES` / :data:`HALF_TILES` unless given one.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import torch

from sage.jit import jit
from sage.kernels.device import shared_memory, sm_count
from sage.kernels.gemm.kernels import gemm
from sage.reference.matmul import MAX_INT8_CONTRACTION

GEMM = jit(gemm)


@dataclass(frozen=True)
class GemmTiles:
    """One launch plan: block sizes, pipeline stages, warps (the consumers'
    with ``warp_specialize``: a producer warpgroup comes on top), the tile
    rows of a program group (see :func:`sage.kernels.gemm.kernels.grouped_tile`),
    whether the loop's copies get a producer warpgroup (only where the
    operands allow TMA copies: K a multiple of 16, 16-byte aligned bases;
    else the plan runs without one) and whether one program per SM walks the
    tiles (``persistent``), and whether C is stored by the copy engine
    through shared memory (``tma_store``)."""

    block_m: int
    block_n: int
    block_k: int
    stages: int
    num_warps: int
    group_m: int = 8
    warp_specialize: bool = False
    persistent: bool = False
    tma_store: bool = False

    def constexprs(self) -> dict[str, int | bool]:
        """The kernels' block, stage, group, warp-specialisation and
        persistence constexprs."""
        return {"BLOCK_M": self.block_m, "BLOCK_N": self.block_n, "BLOCK_K": self.block_k,
                "STAGES": self.stages, "GROUP_M": self.group_m,
                "WARP_SPECIALIZE": self.warp_specialize, "PERSISTENT": self.persistent,
                "TMA_STORE": self.tma_store}

    def grid(self, m: int, n: int, sms: int = 0) -> tuple[int]:
        """One program per C tile, or, ``persistent``, at most one per SM
        (``sms`` of them)."""
        tiles = -(-m // self.block_m) * -(-n // self.block_n)
        if self.persistent:
            if sms <= 0:
                raise ValueError("a persistent plan's grid needs the device's SM count")
            return (max(1, min(tiles, sms)),)
        return (tiles,)

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


#: 128 x 256 tiles on two consumer warpgroups (each a 64 x 256 wgmma
#: accumulator: 128 registers a thread) fed by a producer warpgroup, 128
#: bytes of K a stage, 4 stages (192 KB of shared memory), one program per
#: SM walking the tiles in groups of 8 tile rows. On the H100 this was
#: 1.01-1.05x the same tiles without producer and persistence (INT8) and
#: 1.00-1.06x (bf16), bench/results/2026-11-25-h100-gemm-ws.md.
INT8_TILES = GemmTiles(128, 256, 128, 4, 8, warp_specialize=True, persistent=True)
#: The same tile for 16-bit operands, 64 elements (128 bytes) of K a stage,
#: 3 stages and C stored by the copy engine (a 64 KB C tile; f32 C stores
#: without it), persistent but without a producer warpgroup: on the H100
#: 0.93-0.98x cuBLAS where the producer plan with TMA stores was 0.91-1.00x
#: and 4 stages without them 0.84-0.93x
#: (bench/results/2026-11-25-h100-gemm-tma-store.md).
HALF_TILES = GemmTiles(128, 256, 64, 3, 8, persistent=True, tma_store=True)


#: Shared memory a plan uses beyond its tiles (mbarriers, tensor-map staging).
_SHARED_SLACK = 2048


def shared_bytes(tiles: GemmTiles, in_bytes: int, out_bytes: int) -> int:
    """An upper bound of the shared memory ``tiles`` takes with operands of
    ``in_bytes`` and C of ``out_bytes`` per element: the stages' A and B
    tiles, the C tile when the copy engine stores it, and some slack."""
    stage = (tiles.block_m + tiles.block_n) * tiles.block_k * in_bytes
    c_tile = tiles.block_m * tiles.block_n * out_bytes if tiles.tma_store else 0
    return tiles.stages * stage + c_tile + _SHARED_SLACK


#: A persistent plan whose programs walk at least this many tiles each
#: builds its tensor maps on the device (once per program, negligible then):
#: with host-encoded maps such GEMMs ran 2-6 % slower on the H100 at 8192³
#: (15.5 tiles a program) in five of six runs, and 4-6 % faster at 4096³
#: (3.9) (bench/results/2026-11-26-h100-tensor-maps*).
DEVICE_MAPS_TILES_PER_PROGRAM = 8


def _launch(tiles: GemmTiles, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor,
            m: int, n: int, k: int) -> tuple[tuple[int], dict[str, Any]]:
    """The grid and the constexprs and launch options of ``tiles`` for these
    operands. A producer warpgroup issues TMA copies, which need 16-byte
    aligned rows and bases (K a multiple of 16, as the JIT specialises it):
    other operands run the plan without warp specialisation (the loop
    pipelined by cp.async), with the same result. A C tile that does not
    fit in shared memory beside the stages (f32 or int32 C at large tiles)
    is stored without the copy engine."""
    if tiles.warp_specialize and (k % 16 or a.data_ptr() % 16 or b.data_ptr() % 16):
        tiles = replace(tiles, warp_specialize=False)
    if tiles.tma_store and shared_bytes(tiles, a.element_size(), out.element_size()) > \
            shared_memory(a.device.index):
        tiles = replace(tiles, tma_store=False)
    grid = tiles.grid(m, n, sm_count(a.device.index) if tiles.persistent else 0)
    return grid, {**tiles.constexprs(), "num_warps": tiles.num_warps,
                  "tensor_maps": tensor_maps_for(tiles, m, n, grid[0])}


def tensor_maps_for(tiles: GemmTiles, m: int, n: int, programs: int) -> str | None:
    """Where the GEMM's tensor maps are built: "device" for a persistent plan
    whose ``programs`` walk at least :data:`DEVICE_MAPS_TILES_PER_PROGRAM`
    tiles each, else None (SAGE_TENSOR_MAPS: host by default)."""
    tiles_total = -(-m // tiles.block_m) * -(-n // tiles.block_n)
    if tiles.persistent and tiles_total >= DEVICE_MAPS_TILES_PER_PROGRAM * programs:
        return "device"
    return None


def _check(a: torch.Tensor, b: torch.Tensor, dtypes: tuple[torch.dtype, ...]) -> None:
    for name, x in (("a", a), ("b", b)):
        if x.dtype not in dtypes:
            raise TypeError(f"{name} must be {' or '.join(map(str, dtypes))}, got {x.dtype}")
        if x.dim() != 2 or not x.is_contiguous() or not x.is_cuda:
            raise ValueError(f"{name} must be a contiguous 2-D CUDA tensor, got "
                             f"{tuple(x.shape)} strides {x.stride()} on {x.device}")
    if a.dtype != b.dtype:
        raise TypeError(f"a and b must share a dtype, got {a.dtype} and {b.dtype}")
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"a is M x K and b is N x K: K differs ({a.shape[1]} vs {b.shape[1]})")


def int8_mm(a: torch.Tensor, b: torch.Tensor, a_scale: torch.Tensor | None = None,
            b_scale: torch.Tensor | None = None, out_dtype: torch.dtype | None = None,
            tiles: GemmTiles = INT8_TILES) -> torch.Tensor:
    """``a @ b.T`` of int8 ``a`` (M x K) and ``b`` (N x K).

    Without scales the result is int32 and exact (K <= 131072). With
    ``a_scale`` (M,) and ``b_scale`` (N,) f32 it is ``f32(a @ b.T) *
    a_scale[:, None] * b_scale[None, :]`` in ``out_dtype`` (default f32).
    """
    _check(a, b, (torch.int8,))
    m, k = a.shape
    n = b.shape[0]
    if k > MAX_INT8_CONTRACTION:
        raise ValueError(f"K = {k} may overflow the int32 accumulator "
                         f"(at most {MAX_INT8_CONTRACTION})")
    if (a_scale is None) != (b_scale is None):
        raise ValueError("give both a_scale and b_scale, or neither")
    dequant = a_scale is not None
    if dequant:
        for name, s, size in (("a_scale", a_scale, m), ("b_scale", b_scale, n)):
            if s.shape != (size,) or s.dtype != torch.float32 or s.device != a.device:
                raise ValueError(f"{name} must be float32 of shape ({size},) on {a.device}, "
                                 f"got {s.dtype} {tuple(s.shape)} on {s.device}")
        out = torch.empty((m, n), dtype=out_dtype or torch.float32, device=a.device)
    else:
        if out_dtype not in (None, torch.int32):
            raise ValueError("without scales the result is int32")
        out = torch.empty((m, n), dtype=torch.int32, device=a.device)
        a_scale = b_scale = out  # not read without DEQUANT
    if k == 0:  # an empty sum (and the copy engine's maps have no empty dimension)
        return out.zero_()
    grid, constexprs = _launch(tiles, a, b, out, m, n, k)
    GEMM[grid](a, b, out, a_scale, b_scale, m, n, k, **constexprs, DEQUANT=dequant)
    return out


def half_mm(a: torch.Tensor, b: torch.Tensor, out_dtype: torch.dtype | None = None,
            tiles: GemmTiles = HALF_TILES) -> torch.Tensor:
    """``a @ b.T`` of f16 or bf16 ``a`` (M x K) and ``b`` (N x K), accumulated
    in f32, returned in ``out_dtype`` (default: the inputs' dtype, as torch.mm)."""
    _check(a, b, (torch.float16, torch.bfloat16))
    m, k = a.shape
    n = b.shape[0]
    out = torch.empty((m, n), dtype=out_dtype or a.dtype, device=a.device)
    if k == 0:  # an empty sum (and the copy engine's maps have no empty dimension)
        return out.zero_()
    # The scales are not read without DEQUANT.
    grid, constexprs = _launch(tiles, a, b, out, m, n, k)
    GEMM[grid](a, b, out, out, out, m, n, k, **constexprs)
    return out
