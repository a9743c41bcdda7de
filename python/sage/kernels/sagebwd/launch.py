"""How the SageBwd kernels are launched: grids, buffers, constexprs, argument specs.

Shared by the CPU driver (:mod:`sage.kernels.sagebwd.interpreted`), the GPU
driver (:mod:`sage.kernels.sagebwd.torch_ops`) and the compile tests. Kernel
arguments are assembled *by parameter name*: a driver builds one mapping of
every value the launch sequence needs (its tensors, the buffers of
:func:`forward_buffers` / :func:`backward_buffers`, :func:`scalar_args`,
:func:`stride_args`) and :func:`runtime_args` picks each kernel's arguments
from it in signature order.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import numpy as np

import sage.language as sl
from sage.jit.specialize import kernel_params
from sage.kernels.sagebwd.backward import sagebwd_backward
from sage.kernels.sagebwd.backward_prepass import sagebwd_backward_prepass
from sage.kernels.sagebwd.forward import sagebwd_forward
from sage.kernels.sagebwd.common import cdiv, key_group_count, padded_tokens, scale_row_length
from sage.kernels.sagebwd.prepass import kv_cluster, quantize_kv_kernel
from sage.reference.sagebwd import qk_scale
from sage.reference.sigma16 import sigma16_slot


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


#: 32-bit registers of an sm_90 multiprocessor (ForwardTiles.programs_per_sm).
REGISTERS_PER_SM = 65536


@dataclass(frozen=True)
class ForwardTiles:
    """The forward kernel's own plan: query rows per program (64 per
    consumer warpgroup on wgmma), warps, a register cap, the key blocks in
    flight (``stages``), keys per block (``block_n``), a producer warpgroup
    (``warp_specialize``: it issues the K and V copies; needs ``stages >= 2``
    and no ``maxnreg``), consumer warpgroups that take turns issuing their
    matmuls (``ping_pong``: needs the producer and 8 warps), O written by
    the copy engine (``tma_store``), the loop skewed by one key block
    (``skewed``: the next S on the tensor cores during the softmax; else in
    dependency order, with fewer registers) and as many programs as the
    SMs hold walking the tiles, longest first when causal (``persistent``:
    :meth:`programs_per_sm` a multiprocessor, :func:`grids`)."""

    block_m: int
    num_warps: int
    maxnreg: int | None = None
    stages: int = 2
    #: Keys per block (None: the Tiles' block_n).
    block_n: int | None = None
    warp_specialize: bool = False
    ping_pong: bool = False
    tma_store: bool = False
    skewed: bool = True
    persistent: bool = False
    #: S from a biased accumulator (fine scales without Q-smoothing; see
    #: :data:`~sage.reference.sagebwd.SCORE_BIAS`): no conversion a score,
    #: a few instructions a row and key group more. Its units differ (they
    #: are snapped), so the emulation follows it (:func:`emulation_blocks`).
    biased_scores: bool = False

    def programs_per_sm(self) -> int:
        """The programs of this plan a multiprocessor holds at once, by
        registers (64K a multiprocessor; ``maxnreg``, else 255, a thread): a
        persistent grid's programs per SM. A producer's warpgroup moves
        registers at run time: one program."""
        if self.warp_specialize:
            return 1
        threads = self.num_warps * 32
        return max(1, REGISTERS_PER_SM // (threads * (self.maxnreg or 255)))

    def __post_init__(self) -> None:
        if self.warp_specialize and (self.stages < 2 or self.maxnreg is not None):
            raise ValueError("warp_specialize needs stages >= 2 and no maxnreg, got "
                             f"stages={self.stages}, maxnreg={self.maxnreg}")
        if self.ping_pong and not (self.warp_specialize and self.num_warps == 8):
            raise ValueError("ping_pong needs warp_specialize and num_warps=8, got "
                             f"warp_specialize={self.warp_specialize}, "
                             f"num_warps={self.num_warps}")


@dataclass(frozen=True)
class Tiles:
    """Block sizes (query rows, key rows) and warps per program, and the
    forward's own plan.

    The pre-pass and the backward share the blocks (they fix the per-block
    scales the pre-pass writes and the backward reads); ``forward``
    (default: ``block_m`` x ``block_n`` tiles on ``num_warps`` warps) plans
    the forward kernel, whose blocks may differ where no scale depends on
    them (:meth:`forward_tiles`).
    """

    block_m: int = 64
    block_n: int = 64
    num_warps: int = 4
    forward: ForwardTiles | None = None

    def forward_tiles(self, fine_scales: bool, smooth_q: bool) -> ForwardTiles:
        """The forward's plan, its ``block_n`` filled in. Its query block may
        differ from ``block_m`` only with fine scales and without
        Q-smoothing (the per-block Q scales and means are per ``block_m``
        rows, and the backward reads them), its key block from ``block_n``
        only with fine scales (block scales of K and V are per ``block_n``
        keys).

        Raises:
            ValueError: a forward block that the quantization cannot follow.
        """
        plan = self.forward or ForwardTiles(self.block_m, self.num_warps)
        if plan.block_n is None:
            plan = replace(plan, block_n=self.block_n)
        if plan.block_m != self.block_m and not (fine_scales and not smooth_q):
            raise ValueError(f"the forward's block_m ({plan.block_m}) must be block_m "
                             f"({self.block_m}) with block scales or Q-smoothing")
        if plan.block_n != self.block_n and not fine_scales:
            raise ValueError(f"the forward's block_n ({plan.block_n}) must be block_n "
                             f"({self.block_n}) with block scales")
        return plan

    def options(self, kernel: str, *, fine_scales: bool, smooth_q: bool,
                shape: Shape | None = None) -> dict[str, int | None]:
        """The launch options of the kernel named ``kernel``: ``num_warps``
        (the consumers' of a warp-specialised forward), ``maxnreg`` and
        ``num_ctas`` (keyword arguments of a launch or of ``sl.trace``).
        quantize_kv_kernel's cluster follows the problem's ``shape``
        (:func:`~sage.kernels.sagebwd.prepass.kv_cluster`).

        Raises:
            ValueError: quantize_kv_kernel without ``shape``.
        """
        if kernel == "sagebwd_forward":
            plan = self.forward_tiles(fine_scales, smooth_q)
            return {"num_warps": plan.num_warps, "maxnreg": plan.maxnreg, "num_ctas": 1}
        ctas = 1
        if kernel == "quantize_kv_kernel":
            if shape is None:
                raise ValueError("quantize_kv_kernel's launch options need the problem's "
                                 "shape (its cluster size follows D and Nkv)")
            ctas = kv_cluster(shape.d, shape.n_kv)
        return {"num_warps": self.num_warps, "maxnreg": None, "num_ctas": ctas}

    def warps(self, kernel: str, *, fine_scales: bool, smooth_q: bool) -> int:
        """Warps per program of the kernel named ``kernel`` (:meth:`options`)."""
        if kernel == "sagebwd_forward":
            return self.forward_tiles(fine_scales, smooth_q).num_warps
        return self.num_warps


#: The D=64 causal forward takes the 256-key plan of the unmasked case where
#: the power of two at or above N_kv is at least this (N_kv > 2048: every
#: length of a tuning bucket, :func:`~sage.kernels.sagebwd.tuning.bucket`,
#: takes the same plan); below, 64-key blocks at four programs an SM
#: (bench/results/2026-11-27-h100-d64-causal-keys.md).
CAUSAL_LONG_KEYS = 4096


def default_tiles(d: int, smooth_q: bool = False, fine_scales: bool = True,
                  causal: bool = False, n_kv: int | None = None) -> Tiles:
    """Block sizes, warps and the forward plan, compiled for sm_90a without
    spills in loops (ptxas -v) but where a plan says so.

    The backward: D=64 on 64 x 64 tiles and one warpgroup (4 warps), so every
    matmul selects wgmma (255 registers, no spills); D=128 on 64 x 64 tiles
    and 8 warps (mma.sync; on one warpgroup it spills). 64 x 32 tiles were
    1.48x slower forward+backward at D=128 (B4 H32 N4K: 63.5 against 42.9
    ms, bench/results/2026-11-23-h100-attention-speed-wgmma4.md); 64 x 64
    needs the fine scales' per-channel V (one scale per block of 64 x 128 put
    O's error at sigma = 1 at 1.06x the paper's Table 1).

    The forward: 64 query rows on one warpgroup, two key blocks in flight,
    each trip in dependency order, O by the copy engine; with fine scales
    128 keys per block (P~ is then quantized to unsigned bytes and V per
    channel, which keep O's error at 0.86x the paper's at sigma = 1; 64-key
    blocks with block scales, and with Q-smoothing, whose K tile in
    registers would spill at 128 keys). At D=128 it is capped at 168
    registers, so that three programs share an SM: it then keeps ~13 of O's
    registers in L1 inside the loop, and is 1.11x faster than two programs
    at 254 registers. On the H100 at B4 H32 N4K
    (bench/results/2026-11-26-h100-forward-plans*.md) this was the fastest
    plan at both head dims: 1.3-1.5x the 128-row plan with a producer
    warpgroup (ping-pong, three stages and a skewed loop did not help: the
    kernel is issue-bound, and other programs on the SM hide latency as well
    as a producer does). At D=64 the key block follows the mask and the
    keys: 256 keys without a mask (255 registers, no spills: 1.14x faster
    than 128, O's error 0.0153 against 0.0144 vs SDPA at sigma = 1) and,
    causal, from ``n_kv`` above half :data:`CAUSAL_LONG_KEYS` (3% faster at 4K,
    9% at 8K, 14% at 16K); causal below (or ``n_kv`` not given), 64, capped at
    128 registers (no spills) so that four programs share an SM: 1.10x the
    128-key plans at 4K (bench/results/2026-11-26-h100-forward-plans-final.md),
    7-13% faster than 256 keys at 1K-2K, where the diagonal's masked keys
    weigh more. The 256-key plan takes S from a biased accumulator
    (``biased_scores``: its loop 972 -> 934 instructions, the kernel 1.2-2.7%
    faster; at D=128 the same change saves nothing and spills:
    bench/results/2026-11-27-h100-biased-scores.md).
    The emulation follows: its blocks come from the same tiles
    (:func:`emulation_blocks`).
    """
    keys, registers = None, None  # the backward's 64 keys; no cap
    fine = fine_scales and not smooth_q
    if d == 128:
        keys, registers = (128 if fine else None), 168
    elif fine:
        long = not causal or (n_kv is not None and n_kv > CAUSAL_LONG_KEYS // 2)
        keys, registers = (256, None) if long else (None, 128)
    forward = ForwardTiles(64, 4, maxnreg=registers, block_n=keys, skewed=False,
                           tma_store=True, biased_scores=fine and keys == 256)
    return Tiles(64, 64, 4 if d == 64 else 8, forward=forward)


def emulation_blocks(tiles: Tiles, *, fine_scales: bool, smooth_q: bool) -> dict[str, Any]:
    """The block sizes and decisions of the float64 emulation that follows
    ``tiles`` (``SageBwdConfig``'s ``block_m``, ``block_n``,
    ``forward_block_n`` and ``biased_scores``)."""
    plan = tiles.forward_tiles(fine_scales, smooth_q)
    return {"block_m": tiles.block_m, "block_n": tiles.block_n,
            "forward_block_n": plan.block_n, "biased_scores": plan.biased_scores}


def grids(shape: Shape, tiles: Tiles, *, fine_scales: bool, smooth_q: bool,
          sms: int = 0) -> dict[str, tuple[int, ...]]:
    """The launch grid of every kernel, by kernel name; a persistent forward
    plan's is ``sms`` (the device's multiprocessors) times the programs one
    holds, or the tiles if fewer.

    Raises:
        ValueError: a persistent forward plan without ``sms``.
    """
    b, h, hkv = shape.batch, shape.heads, shape.kv_heads
    nq, nk = cdiv(shape.n, tiles.block_m), cdiv(shape.n_kv, tiles.block_n)
    plan = tiles.forward_tiles(fine_scales, smooth_q)
    forward_blocks = cdiv(shape.n, plan.block_m)
    forward = (forward_blocks, h, b)
    if plan.persistent:
        if sms <= 0:
            raise ValueError("a persistent forward plan's grid needs the multiprocessors "
                             f"(sms > 0), got {sms}")
        forward = (min(forward_blocks * h * b, sms * plan.programs_per_sm()),)
    # (blocks, heads, batch): the kernels read head and batch from their own
    # axes (common.program_head), with no integer division.
    return {
        # One thread-block cluster per (batch, kv head).
        "quantize_kv_kernel": (kv_cluster(shape.d, shape.n_kv), hkv, b),
        "sagebwd_forward": forward,
        "sagebwd_backward_prepass": (nq, h, b),
        "sagebwd_backward": (nk, h, b),
    }


KERNELS = {f.__name__: f for f in (quantize_kv_kernel,
                                   sagebwd_forward, sagebwd_backward_prepass,
                                   sagebwd_backward)}


# The constexprs each kernel reads (for enumerating its variants).
FLAGS = {"quantize_kv_kernel": ("smooth_k", "fine_scales"),
         "sagebwd_forward": ("causal", "smooth_q", "fine_scales"),
         "sagebwd_backward_prepass": ("fine_scales",),
         "sagebwd_backward": ("causal", "smooth_q", "fine_scales", "direct_kv")}

# The quantization granularities (``scales=``) are sage.reference.sagebwd.SCALES:
# "block" is the papers' one scale per tile for every operand; "fine" (sage's
# default) scales Q per token, K per group of 16 keys, P per key column, dO per
# channel and dS
# per query row (dQ) and per key column (dK). docs/sagebwd.md says why.


def forward_constexprs(shape: Shape, tiles: Tiles, *, causal: bool, smooth_q: bool,
                       fine_scales: bool) -> dict[str, object]:
    """The forward kernel's constexprs (its plan: :meth:`Tiles.forward_tiles`)."""
    plan = tiles.forward_tiles(fine_scales, smooth_q)
    return dict(D=shape.d, BLOCK_M=plan.block_m, BLOCK_N=plan.block_n, CAUSAL=causal,
                SMOOTH_Q=smooth_q, FINE_SCALES=fine_scales, KV_BLOCK=tiles.block_n,
                GROUP=shape.heads // shape.kv_heads, STAGES=plan.stages,
                WARP_SPECIALIZE=plan.warp_specialize, PING_PONG=plan.ping_pong,
                TMA_STORE=plan.tma_store, SKEWED=plan.skewed, PERSISTENT=plan.persistent,
                BIASED_SCORES=plan.biased_scores)


def constexprs(name: str, shape: Shape, tiles: Tiles, *, causal: bool = False,
               smooth_k: bool = True, smooth_q: bool = False,
               store_p_ds: bool = False, fine_scales: bool = False,
               direct_kv: bool = False) -> dict[str, object]:
    """The constexpr arguments of kernel ``name`` (``direct_kv``: see
    :func:`backward_buffers`)."""
    if name == "sagebwd_forward":
        return forward_constexprs(shape, tiles, causal=causal, smooth_q=smooth_q,
                                  fine_scales=fine_scales)
    d, bm, bn, fine = shape.d, tiles.block_m, tiles.block_n, fine_scales
    group = shape.heads // shape.kv_heads
    return {
        "quantize_kv_kernel": dict(D=d, BLOCK_N=bn, SMOOTH_K=smooth_k, FINE_SCALES=fine,
                                   CLUSTER=kv_cluster(d, shape.n_kv)),
        "sagebwd_backward_prepass": dict(D=d, BLOCK_M=bm, FINE_SCALES=fine),
        "sagebwd_backward": dict(D=d, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=causal,
                                 SMOOTH_Q=smooth_q, STORE_P_DS=store_p_ds,
                                 FINE_SCALES=fine, DIRECT_KV=direct_kv, GROUP=group),
    }[name]


class Strides(NamedTuple):
    """Element strides of a token tensor indexed (batch, head, row, D); the last
    dimension's stride is 1."""

    batch: int
    head: int
    row: int


def contiguous_strides(heads: int, rows: int, d: int) -> Strides:
    """The strides of a contiguous (B, heads, rows, D) tensor."""
    return Strides(heads * rows * d, rows * d, d)


#: The strided 16-bit token tensors (users' inputs and O) and the prefix of
#: their stride parameters (``stride_qb``, ``stride_qh``, ``stride_qn``, ...).
TOKEN_TENSORS = ("q", "k", "v", "o", "do")


def stride_args(tensor: str, strides: Strides | tuple[int, int, int]) -> dict[str, int]:
    """The stride arguments of token tensor ``tensor`` (one of :data:`TOKEN_TENSORS`),
    from its (batch, head, row) element strides."""
    if tensor not in TOKEN_TENSORS:
        raise ValueError(f"{tensor!r} is not a strided token tensor {TOKEN_TENSORS}")
    batch, head, row = strides
    return {f"stride_{tensor}b": int(batch), f"stride_{tensor}h": int(head),
            f"stride_{tensor}n": int(row)}


def int8_v(qt, n: int):
    """The (X, n, D) INT8 V of the forward pre-pass's ``v_qt`` (X, D,
    :func:`padded_tokens`), a torch tensor or a numpy array, as given (a
    copy). ``v_qt`` holds V^ transposed with its tokens in sigma16 order (the
    forward's PV takes P from registers: the ``rhs_sigma16`` of
    :func:`sage.language.qmatmul`); the tokens are gathered back in order."""
    index = sigma16_slot(np.arange(n))
    if not isinstance(qt, np.ndarray):
        import torch
        index = torch.as_tensor(index, device=qt.device)
    return qt[:, :, index].swapaxes(1, 2)


def token_scales(scales, n: int):
    """The (X, n) per-token scales of a scale buffer whose rows may be padded
    (``q_scale`` and ``k_scale`` with fine scales have :func:`padded_tokens`
    of N and Nkv columns, 0 past the end), a torch tensor or a numpy array,
    as a view. Per-block scales (n = their block count) come back whole."""
    return scales[:, :n]


def scalar_args(shape: Shape, sm_scale: float) -> dict[str, Any]:
    """Lengths, head counts, ``stride_vtd`` and ``stride_dotd`` (the row
    strides of ``v_qt`` and ``do_qt``, :func:`padded_tokens` of Nkv and N) and the
    two float factors (as the f32 values the
    kernels use: ``qk_scale`` = sm_scale * log2 e, and ``sm_scale``)."""
    return {"N": shape.n, "N_KV": shape.n_kv, "BATCH": shape.batch, "H": shape.heads,
            "H_KV": shape.kv_heads,
            "stride_vtd": padded_tokens(shape.n_kv), "stride_dotd": padded_tokens(shape.n),
            "qk_scale": float(qk_scale(sm_scale)), "sm_scale": float(np.float32(sm_scale))}


@functools.lru_cache(maxsize=None)
def runtime_params(name: str) -> tuple[str, ...]:
    """The runtime (non-constexpr) parameter names of kernel ``name``, in order."""
    return tuple(p.name for p in kernel_params(KERNELS[name]) if not p.constexpr)


def strided_params(name: str) -> tuple[str, ...]:
    """The pointer parameters of kernel ``name`` that take strided tensors."""
    return tuple(p for p in runtime_params(name) if p in TOKEN_TENSORS)


def runtime_args(name: str, values: Mapping[str, Any]) -> list[Any]:
    """Kernel ``name``'s runtime arguments, in order, taken from ``values`` by name.

    Raises:
        KeyError: naming the kernel and the missing parameter.
    """
    missing = [p for p in runtime_params(name) if p not in values]
    if missing:
        raise KeyError(f"{name}: no value for {', '.join(missing)}")
    return [values[p] for p in runtime_params(name)]


@dataclass(frozen=True)
class BufferSpec:
    """A buffer the kernels write: shape, element dtype name, and whether it
    must be zero before the launch (f32 atomic adds)."""

    shape: tuple[int, ...]
    dtype: str
    zeroed: bool = False


#: A stand-in for a pointer argument the kernels do not read in this variant.
#: Not zeroed (no fill launch): the one that is an op output, q_mean without
#: smooth_q, is written (0) by the forward kernel's first program.
UNUSED = BufferSpec((1,), "float32")


def forward_buffers(shape: Shape, tiles: Tiles, smooth_q: bool,
                    fine_scales: bool = False, *, smooth_k: bool) -> dict[str, BufferSpec]:
    """What the pre-pass and the forward write (O aside: its dtype and layout
    are the caller's). ``k_mean`` is zeroed without ``smooth_k`` (it stays
    0); with it the pre-pass writes every row (no fill launch). ``smooth_k``
    has no default: one that disagreed with the kernel's would leave k_mean
    unwritten and unfilled.
    With ``fine_scales`` Q has one scale per token, K one per group of keys
    (also stored per token, for the backward) and V one per channel over all
    its tokens."""
    b, d = shape.batch, shape.d
    bh, bhkv = b * shape.heads, b * shape.kv_heads
    nq, nk = cdiv(shape.n, tiles.block_m), cdiv(shape.n_kv, tiles.block_n)
    return {
        "q_q": BufferSpec((bh, shape.n, d), "int8"),
        # Per token, Q's and K's scale rows are padded to 16 tokens (0 past
        # the end), so that the kernels load them in whole pairs.
        "q_scale": BufferSpec((bh, scale_row_length(shape.n, tiles.block_m, fine_scales)),
                              "float32"),
        "q_mean": BufferSpec((bh, nq, d), "float32") if smooth_q else UNUSED,
        "k_mean": BufferSpec((bhkv, d), "float32", zeroed=not smooth_k),
        "k_q": BufferSpec((bhkv, shape.n_kv, d), "int8"),
        "k_scale": BufferSpec((bhkv, scale_row_length(shape.n_kv, tiles.block_n,
                                                        fine_scales)), "float32"),
        # With fine scales, K's scales once more, one per group (each block's
        # groups in order; every entry written): what the forward reads.
        "k_group_scale": BufferSpec((bhkv, nk * key_group_count(tiles.block_n)), "float32")
        if fine_scales else UNUSED,
        # V^ transposed, (B*Hkv, D, Nkv padded to 16): contracted over keys
        # in the forward, so K-major there is key-contiguous; the copies go
        # global -> shared with cp.async / TMA. quantize_kv_kernel writes
        # every slot, the padding as 0 (which meets P = 0 anyway: masked
        # keys), so the buffer needs no fill.
        "v_qt": BufferSpec((bhkv, d, padded_tokens(shape.n_kv)), "int8"),
        # Per channel over all the tokens (fine scales), else per block.
        "v_scale": BufferSpec((bhkv, d) if fine_scales else (bhkv, nk), "float32"),
        # quantize_kv_kernel's partial statistics, exchanged in its clusters
        # (K's sums with smooth_k, V's absolute maxima with fine scales).
        "kv_partials": BufferSpec((bhkv * 2 * kv_cluster(d, shape.n_kv), d), "float32")
        if smooth_k or fine_scales else UNUSED,
        "lse": BufferSpec((b, shape.heads, shape.n), "float32"),
    }


def direct_kv(shape: Shape, grad_dtype: str | None) -> bool:
    """Whether the backward stores dK, dV directly in ``grad_dtype`` (a 16-bit
    dtype name): only when no two query heads share a kv head, so that one
    program owns each dK/dV tile."""
    return grad_dtype is not None and shape.heads == shape.kv_heads


def backward_buffers(shape: Shape, tiles: Tiles, store_p_ds: bool,
                     fine_scales: bool = False,
                     grad_dtype: str | None = None) -> dict[str, BufferSpec]:
    """What the backward pre-pass and the backward write: dq (B, H, N, D) f32
    is an atomic-add target (zeroed); dk, dv (B, Hkv, Nkv, D) too, unless
    :func:`direct_kv` (then in ``grad_dtype``, written once); p_out and
    ds_out (B, H, N, Nkv) only with ``store_p_ds``; dO's scales are one per
    block, or one per channel of each block with ``fine_scales``."""
    b, d = shape.batch, shape.d
    nq = cdiv(shape.n, tiles.block_m)
    kv = (b, shape.kv_heads, shape.n_kv, d)
    # Zeroed: the kernels skip tiles that are wholly masked (causal), whose
    # P and dS are 0 by definition.
    pds = BufferSpec((b, shape.heads, shape.n, shape.n_kv), "float32", zeroed=True) \
        if store_p_ds else UNUSED
    kv_grad = BufferSpec(kv, grad_dtype) if direct_kv(shape, grad_dtype) \
        else BufferSpec(kv, "float32", zeroed=True)
    return {
        "delta": BufferSpec((b, shape.heads, shape.n), "float32"),
        # dO^ and Q^ transposed, (B*H, D, N padded to 16), queries in
        # sigma16 order: contracted over queries in dV = P^T dO and dK =
        # dS^T Q, with P^T and dS^T in registers (see v_qt).
        "do_qt": BufferSpec((b * shape.heads, d, padded_tokens(shape.n)), "int8", zeroed=True),
        "q_qt": BufferSpec((b * shape.heads, d, padded_tokens(shape.n)), "int8", zeroed=True),
        "do_scale": BufferSpec((b * shape.heads, nq, d) if fine_scales
                               else (b * shape.heads, nq), "float32"),
        "dq": BufferSpec((b, shape.heads, shape.n, d), "float32", zeroed=True),
        "dk": kv_grad,
        "dv": kv_grad,
        "p_out": pds,
        "ds_out": pds,
    }


#: The kernels of the forward, in launch order (quantize_kv_kernel takes K's
#: mean and V's channel scales itself, with smooth_k or fine scales; the
#: forward quantizes Q).
FORWARD_SEQUENCE = ("quantize_kv_kernel", "sagebwd_forward")


BACKWARD_SEQUENCE = ("sagebwd_backward_prepass", "sagebwd_backward")

#: Element dtype of every pointer parameter: "input" is the 16-bit input
#: dtype, "output" O's dtype.
_POINTER_DTYPES = {
    "q": "input", "k": "input", "v": "input", "do": "input", "o": "output",
    "q_q": sl.int8, "k_q": sl.int8, "v_qt": sl.int8, "do_qt": sl.int8, "q_qt": sl.int8,
    **{name: sl.float32 for name in ("q_scale", "q_mean", "k_mean", "k_scale", "k_group_scale",
                                     "v_scale", "kv_partials",
                                     "lse", "delta", "do_scale", "dq", "dk", "dv", "p_out",
                                     "ds_out")},
}
_FLOAT_SCALARS = ("qk_scale", "sm_scale")


def arg_specs(name: str, dtype: sl.DType, out_dtype: sl.DType | None = None,
              alignment: int | None = 16, direct_kv: bool = False) -> list[sl.ArgSpec]:
    """The runtime argument specs of kernel ``name`` for ``dtype`` (f16/bf16) inputs,
    as the JIT makes them for contiguous tensors.

    Lengths and head counts are i32; strides are i32 divisible by 16 (D is);
    ``out_dtype`` is O's element type (default ``dtype``); with ``direct_kv``
    dk and dv have the input dtype (:func:`backward_buffers`).
    """
    kinds = {"input": dtype, "output": out_dtype or dtype}
    specs = []
    for param in runtime_params(name):
        if param in _POINTER_DTYPES:
            element = "input" if direct_kv and param in ("dk", "dv") \
                else _POINTER_DTYPES[param]
            specs.append(sl.ArgSpec.pointer(kinds.get(element, element), alignment=alignment))
        elif param in _FLOAT_SCALARS:
            specs.append(sl.ArgSpec.scalar(sl.float32))
        elif param.startswith("stride_"):
            specs.append(sl.ArgSpec.scalar(sl.int32, divisibility=16))
        else:
            specs.append(sl.ArgSpec.scalar(sl.int32))
    return specs
