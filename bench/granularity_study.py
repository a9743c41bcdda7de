"""Which INT8 quantization granularities make SageBwd meet [SA3] Table 1 (CPU, numpy).

    python3 bench/granularity_study.py OUT.md [--json OUT.json] [--n 4096] [--heads 1]
    python3 bench/granularity_study.py OUT.md --validate-only     # emulation check only
    python3 bench/granularity_study.py OUT.md --quick             # N=1024, a few configurations

Issue 5 section 3 asks for relative L2 <= 1.1x [SA3] Table 1 at every sigma for O, dQ, dK, dV
(sigma_Q = sigma_K = sigma, sigma_V = sigma_dO = 1, Gaussian, D=128, non-causal,
K-smoothing). The per-block SageBwd of spec section 2 misses it (bench/README.md:
dQ/dK/dV ~2x at sigma=1; O, dV 1.13-1.19x at sigma=3, 5). This script emulates
SageBwd with a *parameterised granularity per operand and per matmul*
(:class:`Scheme`), keeping the precision contract (six INT8 matmuls, dP = dO V^T
from the 16-bit inputs, dS in f32 until quantized) and only scales that are
constant along their matmul's contraction axis, so that each scale factors out of
the INT8 product of a FlashAttention tile:

    matmul        operand   contracted axis      legal granules
    S = Q K^T     Q, K      D (columns)           block, row (per token), g16, g32 (per
                                                  16 / 32 tokens)
    O = P~ V      P~        keys (columns)        row (per token, fixed: from the softmax maxima)
                  V         keys (rows)           block, col (per channel of a tile), col_seq
    dV = P^T dO   P         query rows (rows)     block, col (per key column of a tile)
                  dO        query rows (rows)     block, col, col_seq
    dQ = dS K     dS        keys (columns)        block, row (per query row of a tile)
                  K         keys (rows)           block, col, col_seq
    dK = dS^T Q   dS        query rows (rows)     block, col (per key column of a tile)
                  Q         query rows (rows)     block, col, col_seq

Q (and K) appear in S (contracted over D) and in dK (dQ) (contracted over tokens):
one INT8 copy serves both only if it is per-block; a per-token Q for S needs a
second (per-block or per-channel) copy for dK, or ``q_dk="fold"``: the per-token
scales are multiplied into the f32 dS before it is quantized for dK
(dK = (dS o s_Q)^T Q^), so the S copy serves both (likewise ``k_dq="fold"``). Likewise one dS^ serves dQ and dK
only if it is per-block.

The emulation works on whole N x N matrices per head (tile-wise scales by
reshaping), not on tile loops. With every granule "block" it makes exactly the
decisions of :func:`sage.reference.sagebwd.emulate_forward` / ``emulate_backward``
(the same float32 quantizer, the same per-token P~ scales from the running
maxima); :func:`validate` checks that (relative L2 <= 1e-3 on O, dQ, dK, dV, P, dS;
it is <= 1e-13 in practice). Dequantize-then-float64-matmul equals the INT8 product
with the factored scales up to float64 rounding, because every scale is constant
along the contraction (python/test/test_bench_granularity.py checks both).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import accuracy  # noqa: E402  (bench/accuracy.py: inputs, exact attention, Table 1)
import common  # noqa: E402

common.add_python_path()

from sage.reference.sagebwd import (LN2, SageBwdConfig, emulate_backward,  # noqa: E402
                                    emulate_forward, k_mean, kv_head, qk_scale,
                                    relative_l2, round_to)

INT8_MAX = 127
SIGMAS = (1.0, 3.0, 5.0, 8.0, 10.0)
TENSORS = ("o", "dq", "dk", "dv")
LABELS = {"o": "O", "dq": "dQ", "dk": "dK", "dv": "dV", "p": "P", "ds": "dS"}
PAPER_FACTOR = 1.1
VALIDATION_TOLERANCE = 1e-3

# Granule kinds, for an operand tile of tile_rows x tile_cols (Q, K, V, dO tiles:
# B x D; P, dS tiles: block_m x block_n) inside a matrix of total_rows rows.
KINDS = ("block", "row", "col", "col_seq", "g16", "g32")
# "gG" (Q, K in S only): one scale per G consecutive rows (tokens) of a tile, the
# size of a group of keys whose S columns one thread holds in the tensor cores'
# accumulator (SageAttention2's per-thread K scales: 16 of a 64-key block, 32 of a
# 128-key block); the model takes the G tokens contiguous, the accumulator's are
# interleaved (every 8, two at a time).
GROUPS = {"g16": 16, "g32": 32}
# For Q in dK and K in dQ only: "fold" reuses the per-token INT8 copy made for S and
# multiplies its per-token scales into the f32 dS before dS is quantized for that
# matmul: dK = (dS o s_Q[rows])^T Q^, dQ = (dS o s_K[cols]) K^ (the remaining scale,
# of the dS copy, is constant along the contraction). No second Q/K copy.
FOLD = "fold"


def granule(kind: str, tile_rows: int, tile_cols: int, total_rows: int) -> tuple[int, int]:
    """The (rows, cols) of one scale's granule: a whole tile, a row of a tile (per token /
    per query row), a column of a tile (per channel / per key column) or a column of the
    whole matrix (per channel over the sequence)."""
    if kind == "block":
        return tile_rows, tile_cols
    if kind == "row":
        return 1, tile_cols
    if kind == "col":
        return tile_rows, 1
    if kind == "col_seq":
        return total_rows, 1
    if kind in GROUPS:
        return GROUPS[kind], tile_cols
    if kind == FOLD:
        raise ValueError("'fold' has no granule of its own: it reuses the per-token S copy")
    raise ValueError(f"unknown granule kind {kind!r}; expected one of {KINDS}")


# operand field -> (operand, matmul, contracted axis of the operand: 1 = columns, 0 = rows)
USES: dict[str, tuple[str, str, int]] = {
    "q_s": ("Q", "S = Q K^T", 1),
    "k_s": ("K", "S = Q K^T", 1),
    "v_pv": ("V", "O = P~ V", 0),
    "p_dv": ("P", "dV = P^T dO", 0),
    "do_dv": ("dO", "dV = P^T dO", 0),
    "ds_dq": ("dS", "dQ = dS K", 1),
    "k_dq": ("K", "dQ = dS K", 0),
    "ds_dk": ("dS", "dK = dS^T Q", 0),
    "q_dk": ("Q", "dK = dS^T Q", 0),
}
# kinds that make no sense for an operand (P and dS tiles have no "sequence" column)
_NOT_FOR = {"p_dv": {"col_seq"}, "ds_dq": {"col_seq"}, "ds_dk": {"col_seq"}}


@dataclass(frozen=True)
class Scheme:
    """One quantization granularity per (operand, matmul); see the module docstring.

    ``block_m``/``block_n`` are the FlashAttention tiles (query rows, key rows);
    the forward's P~ is always per token of each (block_m x block_n) tile (the
    scales come from the online-softmax maxima).
    """

    name: str
    block_m: int = 64
    block_n: int = 32
    q_s: str = "block"
    k_s: str = "block"
    v_pv: str = "block"
    p_dv: str = "block"
    do_dv: str = "block"
    ds_dq: str = "block"
    ds_dk: str = "block"
    k_dq: str = "block"
    q_dk: str = "block"
    #: K's granule in the backward's recomputed S (and a folded dQ's scales),
    #: where it differs from the forward's ``k_s``: a second INT8 copy of K.
    k_s_bwd: str = ""

    def check(self) -> None:
        """Raises ValueError unless every scale is constant along its matmul's contraction."""
        if self.k_s_bwd not in ("", "block", "row", *GROUPS):
            raise ValueError(f"k_s_bwd: {self.k_s_bwd!r} is not a granule of K in S")
        for field, (operand, matmul, axis) in USES.items():
            kind = getattr(self, field)
            if field in ("q_dk", "k_dq") and kind == FOLD:
                of_s = (self.k_s_bwd or self.k_s) if field == "k_dq" else self.q_s
                if of_s not in ("row", *GROUPS):
                    raise ValueError(f"{field}: 'fold' needs the per-token ('row') or "
                                     f"per-group {operand} of S")
                continue
            if kind not in KINDS or kind in _NOT_FOR.get(field, ()):
                raise ValueError(f"{field}: {kind!r} is not a granule of {operand}")
            legal = {"block", "row", *GROUPS} if axis == 1 else {"block", "col", "col_seq"}
            if kind not in legal:
                raise ValueError(f"{field}: a {kind} scale of {operand} varies along the "
                                 f"contracted axis of {matmul}; legal: {sorted(legal)}")

    def copies(self) -> dict[str, int]:
        """INT8 copies of Q, K and of each dS tile (1: one copy serves both matmuls)."""
        folded = FOLD in (self.q_dk, self.k_dq)
        return {"Q": 1 if self.q_dk in (self.q_s, FOLD) else 2,
                "K": 2 if self.k_s_bwd not in ("", self.k_s) or
                self.k_dq not in (self.k_s, FOLD) else 1,
                "dS": 1 if self.ds_dq == self.ds_dk and not folded else 2}

    def describe(self) -> str:
        """The granules that differ from per-block, e.g. ``dS row/col, P col``."""
        parts = [f"{field}={getattr(self, field)}" for field in (*USES, "k_s_bwd")
                 if getattr(self, field) not in ("block", "")]
        return f"{self.block_m}x{self.block_n}" + (": " + ", ".join(parts) if parts else
                                                    ": all per-block")


def cost(s: Scheme, d: int = 128) -> str:
    """The extra INT8 work and memory of ``s`` relative to per-block SageBwd at 64x32,
    in short items (:data:`COST_LEGEND` explains them)."""
    bm, bn = s.block_m, s.block_n
    items = []
    if (bm, bn) != (64, 32):
        items.append(f"{bm}x{bn} tiles: {64 * 32 / (bm * bn):g}x tile steps")
    copies = s.copies()
    if copies["dS"] == 2:
        items.append(f"dS quantized twice/tile ({s.ds_dq} for dQ, {s.ds_dk} for dK; "
                     f"+{bm * bn} B INT8)")
    elif s.ds_dq != "block":
        items.append(f"dS {s.ds_dq}")
    if s.p_dv != "block":
        items.append(f"P {s.p_dv} absmax ({bn} scales/tile)")
    if s.do_dv == "col":
        items.append(f"dO {d} scales/Q block")
    elif s.do_dv == "col_seq":
        items.append(f"dO {d} scales/head")
    if s.v_pv == "col":
        items.append(f"V {d} scales/key tile")
    elif s.v_pv == "col_seq":
        items.append(f"V {d} scales/head")
    for name, field_s, field_b, rows, mm in (("Q", "q_s", "q_dk", bm, "dK"),
                                             ("K", "k_s", "k_dq", bn, "dQ")):
        kind_s, kind_b = getattr(s, field_s), getattr(s, field_b)
        token = "per token" if kind_s == "row" else kind_s
        if kind_b == FOLD:
            items.append(f"{name} {token}, s_{name} folded into dS for {mm} (+1 FMUL/dS elem, "
                         f"no 2nd copy)")
        elif copies[name] == 2:
            where = "/(i,j) step" if name == "Q" else "/KV program"
            items.append(f"{name} x2 ({token} for S, {kind_b} for {mm}): +N*D B INT8 saved, "
                         f"+{rows * d} B loaded{where}")
    return "; ".join(items) if items else "none"


COST_LEGEND = """\
What the extra items cost in a kernel (per backward step (i, j) unless said; 64x32 tiles, D=128):

- *dS quantized twice/tile*: a row absmax (intra-row, cheap) and a column absmax (across the
  rows, like the per-block absmax's second stage), two scale/round/convert passes over the f32
  dS tile, two INT8 dS tiles (2 x 2 KB) in registers/shared memory. The dQ and dK epilogues
  multiply by a scale vector instead of a scalar (no extra work).
- *P col absmax*: the column absmax of the P tile replaces the tile absmax (same reduction
  depth); one INT8 P tile as today; dV's partial rows are scaled by a vector.
- *dO scales/Q block*: the backward pre-pass quantizes dO per channel of each Q block (D scales
  instead of one); the dV partial's columns are scaled per step (same multiply count as a
  scalar). *dO scales/head*: one per-channel scale vector for the whole sequence, applied once
  when dV is stored, but it needs a separate absmax pass over dO before quantizing.
- *V scales/key tile*: the O epilogue scales the P~V partial's columns by V's vector.
- *Q/K per token, folded*: Q (K) quantized per token for S (the S epilogue scales rows and
  columns: diag(s_Q) S^ diag(s_K)); for dK (dQ) the per-token scales are multiplied into the
  f32 dS tile before its column (row) quantization: dK = (dS o s_Q)^T Q^, dQ = (dS o s_K) K^.
  One extra f32 multiply per dS element, bm + bn scales loaded per step, no second INT8 copy.
- *Q/K x2*: a second INT8 copy of Q (K) with per-block or per-channel scales for dK (dQ):
  the pre-pass writes N*D more bytes per tensor (saved for the backward) and the backward
  loads both Q^ copies every step (K^: both copies resident per KV program).
- *smaller tiles*: more loop steps, each with its own reductions and scale broadcasts, lower
  data reuse and smaller MMAs (16-row tiles under-fill Hopper's 64-row wgmma); no extra
  INT8 memory.
"""


# --------------------------------------------------------------------------- quantizer

def quantize_levels(x: np.ndarray, gran: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric INT8 quantization of a 2-D float32 array, one scale per granule:
    the INT8 levels and the float32 scale of each element (both as float64
    arrays of ``x``'s shape); ``levels * scale`` is the dequantized value.

    Granules are ``gran = (rows, cols)`` blocks counted from (0, 0) (tails are
    smaller). Per granule, in float32 exactly as :func:`sage.reference.quantize`
    (``"rne"``): scale = absmax / 127, flushed to 0 below 2**-126, inv = 1 /
    scale (0 if scale is 0), q = clip(rint(x * inv), -127, 127); NaN converts
    to 0, as the quantizer does.
    """
    x32 = np.asarray(x, np.float32)
    r, c = x32.shape
    gr, gc = min(gran[0], r), min(gran[1], c)
    padded = np.pad(x32, ((0, -r % gr), (0, -c % gc))) if r % gr or c % gc else x32
    tiles = padded.reshape(padded.shape[0] // gr, gr, padded.shape[1] // gc, gc)
    scale = np.abs(tiles).max(axis=(1, 3), keepdims=True) / np.float32(INT8_MAX)
    scale = np.where(scale < np.finfo(np.float32).tiny, np.float32(0), scale)
    with np.errstate(over="ignore", invalid="ignore"):
        inv = np.divide(np.float32(1), scale, out=np.zeros_like(scale), where=scale != 0)
        levels = np.rint(tiles * inv)
    np.nan_to_num(levels, copy=False, nan=0.0)
    np.clip(levels, -INT8_MAX, INT8_MAX, out=levels)
    full = np.broadcast_to(scale, tiles.shape).reshape(padded.shape)[:r, :c]
    return levels.reshape(padded.shape)[:r, :c].astype(np.float64), full.astype(np.float64)


def quant_dequant(x: np.ndarray, gran: tuple[int, int]) -> np.ndarray:
    """Quantize-dequantize (:func:`quantize_levels`), in float64."""
    levels, scale = quantize_levels(x, gran)
    return levels * scale


def forward_p_tilde(s: np.ndarray, block_n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The forward's dequantized P~ (normalised to the final row max), the row max and sum.

    As the kernels: per key tile j, the running max base_j = max(tile maxima <= j);
    P~ = exp2(S - base_j) is quantized per row with the f32 scale
    exp2(tilemax_j - base_j) / 127 (the scaled value rounded to f16 first),
    and the accumulated product is rescaled by
    exp2(base_j - m) (the product of the later alphas). Returns (P~ dequantized
    times exp2(base_j - m), m, l) with l the row sum of that P~ (the kernels
    sum the quantized bytes; non-causal).
    """
    n, n_kv = s.shape
    pad = -n_kv % block_n
    padded = np.pad(s, ((0, 0), (0, pad)), constant_values=-np.inf) if pad else s
    tiles = padded.reshape(n, -1, block_n)
    tile_max = tiles.max(axis=2)
    base = np.maximum.accumulate(tile_max, axis=1)
    p = np.exp2(tiles - base[:, :, None]).astype(np.float32)
    p_scale = np.exp2(tile_max - base).astype(np.float32) / np.float32(INT8_MAX)
    with np.errstate(over="ignore", invalid="ignore"):
        inv = np.divide(np.float32(1), p_scale, out=np.zeros_like(p_scale), where=p_scale != 0)
        # Rounded to f16 first, as the kernels do.
        levels = np.rint((p * inv[:, :, None]).astype(np.float16)).astype(np.float32)
    del p
    np.nan_to_num(levels, copy=False, nan=0.0)  # as quant_dequant
    np.clip(levels, -INT8_MAX, INT8_MAX, out=levels)
    m = base[:, -1:]
    coef = np.exp2(base - m) * p_scale.astype(np.float64)
    p_deq = (levels.astype(np.float64) * coef[:, :, None]).reshape(n, -1)[:, :n_kv]
    l = p_deq.sum(axis=1, keepdims=True)
    return p_deq, m, l


# --------------------------------------------------------------------------- emulation

def _fwd_key(s: Scheme) -> tuple:
    return (s.block_m, s.block_n, s.q_s, s.k_s, s.v_pv, s.k_s_bwd)


def emulate(q: np.ndarray, k: np.ndarray, v: np.ndarray, do: np.ndarray, scheme: Scheme,
            dtype: str, smooth_k: bool = True, keep: bool = False,
            cache: dict | None = None) -> dict[str, np.ndarray]:
    """SageBwd with ``scheme``'s granularities, vectorised per head.

    q, do (B, H, N, D), k, v (B, Hkv, Nkv, D) in the emulation's storage (float16, or
    float32 holding bfloat16 values; ``dtype`` names it); non-causal, no Q-smoothing,
    O stored in ``dtype``, delta in float32, sm_scale = D^-1/2. ``keep``: also return
    P and dS (B, H, N, Nkv). ``cache`` (a dict the caller keeps for one input set)
    shares the forward and the unquantized backward intermediates between schemes
    with the same forward granules. Returns o, dq, dk, dv (float64).
    """
    scheme.check()
    batch, heads, n, d = q.shape
    kv_heads, n_kv = k.shape[1], k.shape[2]
    bm, bn = scheme.block_m, scheme.block_n
    sm_scale = d ** -0.5
    c = qk_scale(sm_scale)
    mean = k_mean(k, bn) if smooth_k else np.zeros((batch, kv_heads, d), np.float32)
    out = {"o": np.zeros(q.shape), "dq": np.zeros(q.shape), "dk": np.zeros(k.shape),
           "dv": np.zeros(v.shape)}
    if keep:
        out["p"] = np.zeros((batch, heads, n, n_kv))
        out["ds"] = np.zeros((batch, heads, n, n_kv))
    cache = {} if cache is None else cache
    for b in range(batch):
        for h in range(heads):
            hk = kv_head(h, heads, kv_heads)
            q32 = (q[b, h].astype(np.float32) * c).astype(np.float32)  # c*Q, as the pre-pass
            k32 = (k[b, hk].astype(np.float32) - mean[b, hk]).astype(np.float32)
            key = (b, h) + _fwd_key(scheme)
            if key not in cache:
                cache.clear()  # one forward at a time: N x N float64 matrices are large
                qd = quant_dequant(q32, granule(scheme.q_s, bm, d, n))
                kd = quant_dequant(k32, granule(scheme.k_s, bn, d, n_kv))
                vd = quant_dequant(v[b, hk].astype(np.float32),
                                   granule(scheme.v_pv, bn, d, n_kv))
                s = qd @ kd.T  # log2 units
                p_tilde, m, l = forward_p_tilde(s, bn)
                o = round_to((p_tilde @ vd) / l, dtype)
                del p_tilde
                lse = round_to(m + np.log2(l), "float32")
                do64 = round_to(do[b, h], dtype)
                v64 = round_to(v[b, hk], dtype)
                delta = round_to((do64 * o).sum(axis=1, keepdims=True), "float32")
                if scheme.k_s_bwd:  # the backward's S from its own K copy
                    s = qd @ quant_dequant(k32, granule(scheme.k_s_bwd, bn, d, n_kv)).T
                p = np.exp2(s - lse)
                del s
                ds = p * (do64 @ v64.T - delta)
                cache[key] = {"o": o, "p": p, "ds": ds, "p32": p.astype(np.float32),
                              "ds32": ds.astype(np.float32)}
            fw = cache[key]
            out["o"][b, h] = fw["o"]
            ds32_dq = ds32_dk = fw["ds32"]
            p_q = quant_dequant(fw["p32"], granule(scheme.p_dv, bm, bn, n))
            do_q = quant_dequant(do[b, h].astype(np.float32), granule(scheme.do_dv, bm, d, n))
            out["dv"][b, hk] += p_q.T @ do_q
            del p_q
            if scheme.k_dq == FOLD:  # K^ (per token) with s_K moved into dS's columns
                k_b, k_scale = quantize_levels(
                    k32, granule(scheme.k_s_bwd or scheme.k_s, bn, d, n_kv))
                ds32_dq = (fw["ds32"] * k_scale[:, 0][None, :]).astype(np.float32)
            else:
                k_b = quant_dequant(k32, granule(scheme.k_dq, bn, d, n_kv))
            if scheme.q_dk == FOLD:  # Q^ (per token) with s_Q moved into dS's rows
                q_b, q_scale = quantize_levels(q32, granule(scheme.q_s, bm, d, n))
                ds32_dk = (fw["ds32"] * q_scale[:, 0][:, None]).astype(np.float32)
            else:
                q_b = quant_dequant(q32, granule(scheme.q_dk, bm, d, n))
            ds_q = quant_dequant(ds32_dq, granule(scheme.ds_dq, bm, bn, n))
            out["dq"][b, h] = sm_scale * (ds_q @ k_b)
            if scheme.ds_dk != scheme.ds_dq or ds32_dk is not ds32_dq:
                ds_q = quant_dequant(ds32_dk, granule(scheme.ds_dk, bm, bn, n))
            out["dk"][b, hk] += LN2 * (ds_q.T @ q_b)
            del ds_q, ds32_dq, ds32_dk
            if keep:
                out["p"][b, h] = fw["p"]
                out["ds"][b, h] = fw["ds"]
    return out


# --------------------------------------------------------------------------- validation

def validate(cases: Sequence[tuple[int, int, int, float, int, int, str]] | None = None,
             seed: int = 0, log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """The per-block scheme against the loop emulation of :mod:`sage.reference.sagebwd`.

    Each case is (N, D, heads, sigma, block_m, block_n, dtype); relative L2 of O, dQ,
    dK, dV, P and dS; pass iff every one is <= 1e-3.
    """
    cases = cases or [(256, 128, 2, 1.0, 64, 32, "bfloat16"),
                      (256, 128, 1, 5.0, 64, 32, "bfloat16"),
                      (256, 64, 1, 3.0, 64, 64, "float16"),
                      (200, 128, 1, 1.0, 64, 32, "bfloat16"),
                      (1024, 128, 1, 10.0, 64, 32, "bfloat16"),
                      (512, 128, 1, 8.0, 32, 32, "float16")]
    rows = []
    for n, d, heads, sigma, bm, bn, dtype in cases:
        spec = accuracy.Inputs(n=n, d=d, heads=heads, sigma=sigma, dtype=dtype)
        x = accuracy.make_inputs(spec, seed)
        cfg = SageBwdConfig(sm_scale=d ** -0.5, block_m=bm, block_n=bn, out_dtype=dtype,
                            scales="block")
        start = time.monotonic()
        fwd = emulate_forward(x["q"], x["k"], x["v"], cfg)
        grads = emulate_backward(fwd, x["do"], x["v"], cfg, dtype)
        ref_s = time.monotonic() - start
        start = time.monotonic()
        got = emulate(x["q"], x["k"], x["v"], x["do"], Scheme("per-block", bm, bn), dtype,
                      keep=True)
        vec_s = time.monotonic() - start
        ref = {"o": fwd.o, "dq": grads.dq, "dk": grads.dk, "dv": grads.dv, "p": grads.p,
               "ds": grads.ds}
        rel = {name: relative_l2(got[name], ref[name]) for name in ref}
        row = {"case": f"N{n} D{d} H{heads} s={sigma:g} {bm}x{bn} {dtype}", "rel_l2": rel,
               "pass": max(rel.values()) <= VALIDATION_TOLERANCE, "reference_s": ref_s,
               "vectorised_s": vec_s}
        rows.append(row)
        log(f"  validate {row['case']}: max rel-L2 {max(rel.values()):.2e} "
            f"({'PASS' if row['pass'] else 'FAIL'}; loop {ref_s:.1f} s, vectorised {vec_s:.2f} s)")
    return rows


# --------------------------------------------------------------------------- the sweep

def schemes(quick: bool = False) -> list[Scheme]:
    """The configurations of the study (D=128 default tiles 64x32 unless named)."""
    ds2 = {"ds_dq": "row", "ds_dk": "col"}
    bwd = {**ds2, "p_dv": "col"}
    bwd_do = {**bwd, "do_dv": "col"}
    qk_tok_blk = {"q_s": "row", "k_s": "row"}  # second copies per block (defaults)
    qk_tok_ch = {"q_s": "row", "k_s": "row", "q_dk": "col", "k_dq": "col"}
    qk_fold = {"q_s": "row", "k_s": "row", "q_dk": FOLD, "k_dq": FOLD}
    out = [
        Scheme("A per-block (current)"),
        Scheme("B dS row/col (2 copies)", **ds2),
        Scheme("C P col", p_dv="col"),
        Scheme("D dO channel", do_dv="col"),
        Scheme("Ds dO channel per head", do_dv="col_seq"),
        Scheme("E V channel", v_pv="col"),
        Scheme("F Q,K token (+block copies)", **qk_tok_blk),
        Scheme("Fq Q token (+block copy)", q_s="row"),
        Scheme("Fk K token (+block copy)", k_s="row"),
        Scheme("G Q,K token (+channel copies)", **qk_tok_ch),
        Scheme("H = B+C", **bwd),
        Scheme("I = B+C+D", **bwd_do),
        Scheme("J = B+C+F", **bwd, **qk_tok_blk),
        Scheme("K = B+C+D+F", **bwd_do, **qk_tok_blk),
        Scheme("Kq = B+C+D+Fq", **bwd_do, q_s="row"),
        Scheme("Kk = B+C+D+Fk", **bwd_do, k_s="row"),
        Scheme("Ff Q,K token, scales folded into dS (dS block x2)", **qk_fold),
        Scheme("Kf = B+C+D+F folded", **bwd_do, **qk_fold),
        Scheme("Kqf = B+C+D+Fq folded", **bwd_do, q_s="row", q_dk=FOLD),
        Scheme("Kfs = B+C+Ds+F folded", **bwd, do_dv="col_seq", **qk_fold),
        Scheme("Kqfs = B+C+Ds+Fq folded", **bwd, do_dv="col_seq", q_s="row", q_dk=FOLD),
        Scheme("Lf = B+C+D+E+F folded", **bwd_do, **qk_fold, v_pv="col"),
        Scheme("L = B+C+D+E+F", **bwd_do, **qk_tok_blk, v_pv="col"),
        Scheme("M = B+C+D+E+G", **bwd_do, **qk_tok_ch, v_pv="col"),
        Scheme("N = B+C, Q,K channel in dK/dQ", **bwd, q_dk="col", k_dq="col"),
        Scheme("Pf fine scales: B+C+D+F folded, V channel/sequence", **bwd_do, **qk_fold,
               v_pv="col_seq"),
        Scheme("Pg16 = Pf, K in groups of 16 tokens", **bwd_do, **dict(qk_fold, k_s="g16"),
               v_pv="col_seq"),
        Scheme("Pg32 = Pf, K in groups of 32 tokens", **bwd_do, **dict(qk_fold, k_s="g32"),
               v_pv="col_seq"),
        Scheme("Pg16b = Pg16, per-token K copy for the backward", **bwd_do,
               **dict(qk_fold, k_s="g16"), v_pv="col_seq", k_s_bwd="row"),
        Scheme("Pg32b = Pg32, per-token K copy for the backward", **bwd_do,
               **dict(qk_fold, k_s="g32"), v_pv="col_seq", k_s_bwd="row"),
        Scheme("T32 per-block 32x32", block_m=32, block_n=32),
        Scheme("T16 per-block 16x16", block_m=16, block_n=16),
        Scheme("T32+H 32x32 dS row/col, P col", block_m=32, block_n=32, **bwd),
        Scheme("T32+I 32x32 dS row/col, P col, dO ch", block_m=32, block_n=32, **bwd_do),
        Scheme("T16+I 16x16 dS row/col, P col, dO ch", block_m=16, block_n=16, **bwd_do),
    ]
    if quick:
        keep = ("A ", "H ", "J ", "K ", "T32 ")  # names start with these
        out = [s for s in out if s.name.startswith(keep)]
    return out


def sweep(n: int, heads: int, sigmas: Sequence[float], configs: Sequence[Scheme],
          seed: int = 0, dtype: str = "bfloat16", d: int = 128,
          log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Every scheme at every sigma against exact float64 attention on the same inputs.

    Schemes sharing a forward (tiles, Q/K/V granules) reuse it; the order of
    ``configs`` is kept but the evaluation is grouped by forward.
    """
    rows: list[dict[str, Any]] = []
    order = sorted(range(len(configs)), key=lambda i: _fwd_key(configs[i]))
    for sigma in sigmas:
        spec = accuracy.Inputs(n=n, d=d, heads=heads, sigma=sigma, dtype=dtype)
        x = accuracy.make_inputs(spec, seed)
        start = time.monotonic()
        ref = accuracy.exact_attention(*(np.asarray(x[name], np.float64)
                                         for name in ("q", "k", "v", "do")), d ** -0.5, False)
        log(f"sigma={sigma:g}: exact attention {time.monotonic() - start:.1f} s "
            f"(seed {spec.seed(seed)})")
        cache: dict = {}
        found: dict[int, dict[str, Any]] = {}
        for i in order:
            scheme = configs[i]
            start = time.monotonic()
            got = emulate(x["q"], x["k"], x["v"], x["do"], scheme, dtype, cache=cache)
            m = {name: accuracy.metrics(got[name], ref[name]) for name in TENSORS}
            ratios = {name: m[name]["rel_l2"] / accuracy.PAPER_TABLE1[sigma][name][1]
                      for name in TENSORS}
            found[i] = {"scheme": scheme.name, "sigma": sigma, "metrics": m, "ratio": ratios,
                        "pass": all(r <= PAPER_FACTOR for r in ratios.values()),
                        "seconds": time.monotonic() - start}
            log(f"  {scheme.name}: " + " ".join(
                f"{LABELS[t]} {m[t]['rel_l2']:.4f} ({ratios[t]:.2f}x)" for t in TENSORS)
                + f"  [{found[i]['seconds']:.1f} s]")
        del cache
        rows += [found[i] for i in range(len(configs))]
    return rows


def summarise(configs: Sequence[Scheme], rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per scheme: worst ratio per tensor over sigma, where it is worst, PASS/FAIL."""
    out = []
    for s in configs:
        mine = [r for r in rows if r["scheme"] == s.name]
        worst = {t: max(mine, key=lambda r: r["ratio"][t]) for t in TENSORS}
        out.append({"scheme": s.name, "describe": s.describe(), "copies": s.copies(),
                    "worst": {t: (worst[t]["ratio"][t], worst[t]["sigma"]) for t in TENSORS},
                    "pass": all(r["pass"] for r in mine), "cost": cost(s)})
    return out


# --------------------------------------------------------------------------- rendering

def render(configs: Sequence[Scheme], rows: Sequence[dict[str, Any]],
           validation: Sequence[dict[str, Any]], info: dict[str, Any]) -> str:
    lines = [f"## Granularity study (CPU emulation, numpy): N={info['n']}, D={info['d']}, "
             f"heads={info['heads']}, {info['dtype']}, non-causal, K-smoothing, seed base "
             f"{info['seed']}", ""]
    if validation:
        lines += ["### Vectorised emulation vs `sage.reference.sagebwd` (per-block; rel-L2, "
                  f"pass <= {VALIDATION_TOLERANCE:g})", ""]
        lines.append(common.markdown_table(
            ["case"] + [LABELS[t] for t in ("o", "dq", "dk", "dv", "p", "ds")] + ["result"],
            [[v["case"]] + [f"{v['rel_l2'][t]:.1e}" for t in ("o", "dq", "dk", "dv", "p", "ds")]
             + ["PASS" if v["pass"] else "FAIL"] for v in validation]))
        lines.append("")
    summary = summarise(configs, rows)
    lines += ["### Summary: worst ratio to [SA3] Table 1 over sigma (at sigma)", ""]
    lines.append(common.markdown_table(
        ["configuration", "granules (non-block)", "O", "dQ", "dK", "dV", "<= 1.1x everywhere",
         "extra INT8 work / memory"],
        [[r["scheme"], r["describe"]]
         + [f"{r['worst'][t][0]:.2f}x (s={r['worst'][t][1]:g})" for t in TENSORS]
         + ["PASS" if r["pass"] else "FAIL", r["cost"]] for r in summary],
        right=[False, False, True, True, True, True, True, False]))
    lines += ["", COST_LEGEND]
    lines += ["### Every configuration x sigma: rel-L2 (ratio to the paper)", ""]
    table_rows = []
    for r in rows:
        table_rows.append([r["scheme"], f"{r['sigma']:g}"]
                          + [f"{r['metrics'][t]['rel_l2']:.4f} ({r['ratio'][t]:.2f}x)"
                             + ("" if r["ratio"][t] <= PAPER_FACTOR else " !")
                             for t in TENSORS]
                          + ["PASS" if r["pass"] else "FAIL"])
    lines.append(common.markdown_table(["configuration", "sigma", "O", "dQ", "dK", "dV", "all"],
                                       table_rows, right=[False] + [True] * 6))
    lines += ["", "Paper ([SA3] Table 1) rel-L2: " + "; ".join(
        f"s={s:g}: " + ", ".join(f"{LABELS[t]} {accuracy.PAPER_TABLE1[s][t][1]}"
                                 for t in TENSORS) for s in sorted({r['sigma'] for r in rows})),
              "`!` marks a ratio above 1.1x."]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("md", type=Path, help="markdown output")
    parser.add_argument("--json", type=Path, help="JSON output")
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--heads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0, help="base seed (accuracy.make_inputs)")
    parser.add_argument("--sigmas", default=",".join(f"{s:g}" for s in SIGMAS))
    parser.add_argument("--configs", default="", help="comma-separated name prefixes")
    parser.add_argument("--quick", action="store_true", help="N=1024 and five configurations")
    parser.add_argument("--validate-only", action="store_true")
    parser.add_argument("--no-validate", action="store_true")
    parser.add_argument("--from-json", type=Path,
                        help="re-render the markdown of an earlier --json run (no computation)")
    options = parser.parse_args(argv)
    started = time.monotonic()

    def log(text: str) -> None:
        print(f"[{time.monotonic() - started:6.1f} s] {text}", flush=True)

    if options.from_json:
        saved = json.loads(options.from_json.read_text())
        configs = [Scheme(**fields) for fields in saved["schemes"]]
        text = render(configs, saved["rows"], saved["validation"], saved["info"])
        options.md.write_text(text)
        print(text)
        return 0
    validation = [] if options.no_validate else validate(seed=options.seed, log=log)
    if validation and not all(v["pass"] for v in validation):
        log("validation FAILED")
    configs = schemes(options.quick)
    if options.configs:
        prefixes = [p.lstrip() for p in options.configs.split(",") if p.strip()]
        configs = [s for s in configs if s.name.startswith(tuple(prefixes))]
    n = 1024 if options.quick else options.n
    rows: list[dict[str, Any]] = []
    if not options.validate_only:
        sigmas = [float(s) for s in options.sigmas.split(",")]
        rows = sweep(n, options.heads, sigmas, configs, options.seed, log=log)
    info = {"n": n, "d": 128, "heads": options.heads, "dtype": "bfloat16",
            "seed": options.seed, "seconds": time.monotonic() - started,
            "command": " ".join(["python3", "bench/granularity_study.py"]
                                + list(argv if argv is not None else sys.argv[1:]))}
    text = render(configs, rows, validation, info) if rows else render([], [], validation, info)
    options.md.write_text(text)
    if options.json:
        options.json.write_text(json.dumps(
            {"info": info, "validation": validation, "rows": rows,
             "schemes": [asdict(s) for s in configs],
             "summary": summarise(configs, rows) if rows else []}, indent=1))
    print(text)
    log("done")
    ok = all(v["pass"] for v in validation)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
