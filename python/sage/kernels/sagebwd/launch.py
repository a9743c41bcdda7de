"""How the SageBwd kernels are launched: grids, buffers, constexprs, argument specs.

Shared by the CPU driver (:mod:`sage.kernels.sagebwd.interpreted`), the
compile tests, and later the JIT-based ``sage.attention``.
"""

from __future__ import annotations

from dataclasses import dataclass

import sage.language as sl
from sage.kernels.sagebwd.backward import sagebwd_backward
from sage.kernels.sagebwd.backward_prepass import sagebwd_backward_prepass
from sage.kernels.sagebwd.forward import sagebwd_forward
from sage.kernels.sagebwd.common import cdiv
from sage.kernels.sagebwd.prepass import k_mean_kernel, quantize_kv_kernel, quantize_q_kernel


@dataclass(frozen=True)
class Shape:
    """The problem: q (batch, heads, n, d); k, v (batch, kv_heads, n_kv, d)."""

    batch: int
    heads: int
    kv_heads: int
    n: int
    n_kv: int
    d: int

    def __post_init__(self) -> None:
        if self.d not in (64, 128):
            raise ValueError(f"head_dim must be 64 or 128, got {self.d}")
        if self.heads % self.kv_heads:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads "
                             f"({self.kv_heads})")


@dataclass(frozen=True)
class Tiles:
    """Block sizes (query rows, key rows) and warps per program."""

    block_m: int = 64
    block_n: int = 64
    num_warps: int = 4


def default_tiles(d: int) -> Tiles:
    """Block sizes and warps that compile for sm_90a without spills (ptxas -v).

    D=64: 64 x 64 tiles, 8 warps. D=128: 64 x 32, 8 warps (64 x 64 spills in
    the backward, whose two BLOCK_N x D f32 accumulators stay in registers).
    """
    return Tiles(64, 64, 8) if d == 64 else Tiles(64, 32, 8)


def grids(shape: Shape, tiles: Tiles) -> dict[str, tuple[int, ...]]:
    """The launch grid of every kernel, by kernel name."""
    bh, bhkv = shape.batch * shape.heads, shape.batch * shape.kv_heads
    nq, nk = cdiv(shape.n, tiles.block_m), cdiv(shape.n_kv, tiles.block_n)
    return {
        "k_mean_kernel": (bhkv,),
        "quantize_q_kernel": (nq, bh),
        "quantize_kv_kernel": (nk, bhkv),
        "sagebwd_forward": (nq, bh),
        "sagebwd_backward_prepass": (nq, bh),
        "sagebwd_backward": (nk, bh),
    }


KERNELS = {f.__name__: f for f in (k_mean_kernel, quantize_q_kernel, quantize_kv_kernel,
                                   sagebwd_forward, sagebwd_backward_prepass,
                                   sagebwd_backward)}


# The constexprs each kernel reads (for enumerating its variants).
FLAGS = {"k_mean_kernel": (), "quantize_q_kernel": ("smooth_q",),
         "quantize_kv_kernel": ("smooth_k",), "sagebwd_forward": ("causal", "smooth_q"),
         "sagebwd_backward_prepass": (), "sagebwd_backward": ("causal", "smooth_q")}


def constexprs(name: str, shape: Shape, tiles: Tiles, *, causal: bool = False,
               smooth_k: bool = True, smooth_q: bool = False,
               store_p_ds: bool = False) -> dict[str, object]:
    """The constexpr arguments of kernel ``name``."""
    d, bm, bn = shape.d, tiles.block_m, tiles.block_n
    return {
        "k_mean_kernel": dict(D=d, BLOCK_N=bn),
        "quantize_q_kernel": dict(D=d, BLOCK_M=bm, SMOOTH_Q=smooth_q),
        "quantize_kv_kernel": dict(D=d, BLOCK_N=bn, SMOOTH_K=smooth_k),
        "sagebwd_forward": dict(D=d, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=causal, SMOOTH_Q=smooth_q),
        "sagebwd_backward_prepass": dict(D=d, BLOCK_M=bm),
        "sagebwd_backward": dict(D=d, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=causal,
                                 SMOOTH_Q=smooth_q, STORE_P_DS=store_p_ds),
    }[name]


def arg_specs(name: str, dtype: sl.DType, out_dtype: sl.DType | None = None,
              alignment: int | None = 16) -> list[sl.ArgSpec]:
    """The runtime argument specs of kernel ``name`` for ``dtype`` (f16/bf16) inputs.

    Lengths and head counts are i32; ``out_dtype`` is O's element type
    (default ``dtype``).
    """
    out_dtype = out_dtype or dtype

    def ptr(t: sl.DType) -> sl.ArgSpec:
        return sl.ArgSpec.pointer(t, alignment=alignment)

    i32, f32 = sl.ArgSpec.scalar(sl.int32), sl.ArgSpec.scalar(sl.float32)
    x, i8, fp, o = ptr(dtype), ptr(sl.int8), ptr(sl.float32), ptr(out_dtype)
    return {
        "k_mean_kernel": [x, fp, i32],
        "quantize_q_kernel": [x, i8, fp, fp, f32, i32],
        "quantize_kv_kernel": [x, x, fp, i8, fp, i8, fp, i32],
        "sagebwd_forward": [i8, fp, fp, i8, fp, i8, fp, o, fp, i32, i32, i32, i32],
        "sagebwd_backward_prepass": [o, x, fp, i8, fp, i32],
        "sagebwd_backward": [i8, fp, fp, i8, fp, x, x, i8, fp, fp, fp, fp, fp, fp, fp, fp,
                             f32, i32, i32, i32, i32],
    }[name]
