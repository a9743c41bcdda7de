"""The sage GEMMs on torch CUDA tensors (``@sage.jit``), for benchmarks and tests.

* :func:`int8_mm` ``(a, b) -> a @ b.T`` from int8, exact int32 (or scaled f32);
* :func:`half_mm` ``(a, b) -> a @ b.T`` from f16/bf16, f32 accumulation.

Both take K-major operands (``a`` M x K, ``b`` N x K, contiguous) and the
tile plan of :data:`INT8_TILES` / :data:`HALF_TILES` unless given one.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from sage.jit import jit
from sage.kernels.gemm.kernels import gemm
from sage.reference.matmul import MAX_INT8_CONTRACTION

GEMM = jit(gemm)


@dataclass(frozen=True)
class GemmTiles:
    """One launch plan: block sizes, pipeline stages, warps and the tile rows
    of a program group (see :func:`sage.kernels.gemm.kernels.grouped_tile`)."""

    block_m: int
    block_n: int
    block_k: int
    stages: int
    num_warps: int
    group_m: int = 8

    def constexprs(self) -> dict[str, int]:
        """The kernels' block, stage and group constexprs."""
        return {"BLOCK_M": self.block_m, "BLOCK_N": self.block_n, "BLOCK_K": self.block_k,
                "STAGES": self.stages, "GROUP_M": self.group_m}

    def grid(self, m: int, n: int) -> tuple[int]:
        """One program per C tile."""
        return (-(-m // self.block_m) * -(-n // self.block_n),)

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


#: 128 x 256 tiles on two consumer warpgroups (each a 64 x 256 wgmma
#: accumulator: 128 registers a thread), 128 bytes of K a stage, 4 stages
#: (192 KB of shared memory), programs in groups of 8 tile rows.
INT8_TILES = GemmTiles(128, 256, 128, 4, 8)
#: The same tile for 16-bit operands: 64 elements (128 bytes) of K a stage.
HALF_TILES = GemmTiles(128, 256, 64, 3, 8)


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
    GEMM[tiles.grid(m, n)](a, b, out, a_scale, b_scale, m, n, k, **tiles.constexprs(),
                           DEQUANT=dequant, num_warps=tiles.num_warps)
    return out


def half_mm(a: torch.Tensor, b: torch.Tensor, out_dtype: torch.dtype | None = None,
            tiles: GemmTiles = HALF_TILES) -> torch.Tensor:
    """``a @ b.T`` of f16 or bf16 ``a`` (M x K) and ``b`` (N x K), accumulated
    in f32, returned in ``out_dtype`` (default: the inputs' dtype, as torch.mm)."""
    _check(a, b, (torch.float16, torch.bfloat16))
    m, k = a.shape
    n = b.shape[0]
    out = torch.empty((m, n), dtype=out_dtype or a.dtype, device=a.device)
    # The scales are not read without DEQUANT.
    GEMM[tiles.grid(m, n)](a, b, out, out, out, m, n, k, **tiles.constexprs(),
                           num_warps=tiles.num_warps)
    return out
