"""SageBwd in float64 numpy: an exact emulation of the kernels and a full-precision reference.

Two things live here (spec: ``../shared/spec/sagebwd.md``; kernels:
``sage.kernels.sagebwd``; docs/sagebwd.md):

* :func:`emulate_forward` / :func:`emulate_backward` run the SageBwd algorithm
  with *the kernels' quantization decisions*: the same tiles (``block_m`` query
  rows, ``block_n`` key rows), the same float32 quantizer inputs, the same
  int8 values and scales (computed with the dialect's reference quantizer
  :func:`sage.reference.quantize`), the same per-token P~ scales taken from
  the online-softmax maxima. Everything that is not a quantizer input is
  float64. A kernel that computes SageBwd and nothing else matches it to
  float32 rounding (relative L2 ~1e-6; issue 5 asks for <= 1e-3).
* :func:`attention_reference`: exact attention and its exact gradients in
  float64 (no quantization, no smoothing), for the accuracy report.

Shapes: q, do (B, H, N, D); k, v (B, Hkv, Nkv, D) with H % Hkv == 0 (query
head h reads kv head h // (H // Hkv)). Inputs are float16 arrays, or float32
arrays holding bfloat16 values (``dtype="bfloat16"``).

Units: the pre-pass folds ``c = sm_scale * log2(e)`` into Q, so the logits S
are in log2 units, softmax uses exp2 and the LSE is ``log2`` of the row sum
(of the *smoothed* logits). dS is the gradient with respect to the natural
logits ``sm_scale * Q K^T``; then dQ = sm_scale * dS K_s and
dK = ln(2) * dS^T (s_Q Q^) (spec section 4.4).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from sage.reference.matmul import int8_dot
from sage.reference.quant import INT8_MAX, UINT8_MAX, absmax_scales, quantize
from sage.reference.tiles import broadcast, reduce, to_bf16

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
DTYPES = ("float16", "bfloat16", "float32")


#: The INT8 scale granularities (``scales=``): "fine" and "block" (see
#: :class:`SageBwdConfig` and docs/sagebwd.md). The one list the API checks.
SCALES = ("fine", "block")

#: How far (log2) below the running max the forward's units may go: the
#: units of a key block are 2^max(block max, running max - UNIT_RANGE), so
#: moving O from one block's units to the next multiplies it by at most
#: 2^UNIT_RANGE (no f32 overflow), while the P~ values the floor drops are
#: below 2^-UNIT_RANGE of the row sum (docs/sagebwd.md, "Units").
UNIT_RANGE = 64.0


#: K's scale groups with fine scales: within each pre-pass block of
#: ``block_n`` keys, the keys whose indices agree on these bits (a mask,
#: ``sage.reduce``'s ``groups``) share one scale, the absmax of the group
#: over 127. 0b110 puts key c in group (c // 2) % 4: the keys one thread of
#: a lane quad holds in a tensor-core accumulator (columns 2 * (lane % 4) +
#: {0, 1} + 8 j), so the forward applies K's scale once per row and group
#: instead of once per element (docs/sagebwd.md, "Scale granularity").
K_SCALE_GROUPS = 0b110


#: With fine scales (and no Q-smoothing) the forward takes S's integer
#: part T from the tensor cores already as a float: they accumulate onto the
#: bits of SCORE_BIAS = 1.5 * 2^23, so that the accumulator read as f32 is
#: SCORE_BIAS + T exactly (|T| < 2^22: int8 products over at most 256
#: channels), and no conversion a score remains. Each exponent's FMA takes
#: SCORE_BIAS + T with its constant lowered by SCORE_BIAS * factor; for that
#: FMA to round as the FMA of T alone, the row-and-group factor keeps
#: FACTOR_BITS significant bits (SCORE_BIAS * factor is then exact) and the
#: exponent's constant log2(Q) - unit is rounded down onto the grid 2^-GRID
#: of the power of two of the row's largest SCORE_BIAS * factor (the unit
#: rising by what it lost): :func:`snap_units` (docs/sagebwd.md, "Scores
#: from a biased accumulator").
SCORE_BIAS = 12582912.0
SCORE_BIAS_BITS = int(np.float32(SCORE_BIAS).view(np.int32))
FACTOR_BITS = 21
#: The f32 bits a factor keeps (its low 24 - FACTOR_BITS mantissa bits cleared).
FACTOR_MASK = ~((1 << (24 - FACTOR_BITS)) - 1)
GRID = 22


def truncate_factors(factor: np.ndarray) -> np.ndarray:
    """``factor`` (float32 values) with FACTOR_BITS significant bits, the
    rest cleared (toward zero), as float64."""
    bits = np.asarray(factor, np.float32).view(np.int32) & FACTOR_MASK
    return bits.view(np.float32).astype(np.float64)


def snap_units(unit: np.ndarray, top_factor: np.ndarray, qmax: float) -> np.ndarray:
    """The units the forward uses for a key block: ``unit`` (a column) raised
    so that log2(qmax) - unit lies on the grid 2^-GRID of the power of two of
    SCORE_BIAS * ``top_factor`` (the row's largest truncated factor)."""
    _, exponent = np.frexp(np.asarray(SCORE_BIAS * top_factor, np.float32))
    grid = np.exp2(exponent.astype(np.float64) - 1 - GRID)
    constant = np.floor((np.log2(qmax) - unit) / grid) * grid
    return np.log2(qmax) - constant


@dataclass(frozen=True)
class SageBwdConfig:
    """The settings of one SageBwd call, as the kernels are specialised.

    ``out_dtype`` is the dtype O is stored in ("float16", "bfloat16" or
    "float32"); the backward's delta is computed from that stored O.
    """

    sm_scale: float
    causal: bool = False
    smooth_k: bool = True
    smooth_q: bool = False
    block_m: int = 64
    block_n: int = 64
    #: The forward's key block (None: ``block_n``); with fine scales it sets
    #: P~'s granule and may differ from the backward's.
    forward_block_n: int | None = None
    out_dtype: str = "float16"
    #: "fine" (default): Q per token, K per group of 16 keys
    #: (:data:`K_SCALE_GROUPS`), P per key column, dO per channel, dS
    #: per query row for dQ and per key column for dK; "block": one scale per
    #: tile for every operand, as the papers write it.
    scales: str = "fine"
    #: The forward's scores from a biased accumulator (fine scales without
    #: Q-smoothing: :data:`SCORE_BIAS`): its factors truncated and its units
    #: snapped as the kernel's (:func:`snap_units`).
    biased_scores: bool = False

    def __post_init__(self) -> None:
        if self.scales not in SCALES:
            raise ValueError(f"scales must be one of {list(SCALES)}, got {self.scales!r}")
        if self.forward_block_n not in (None, self.block_n) and self.scales != "fine":
            raise ValueError(f"forward_block_n ({self.forward_block_n}) must be block_n "
                             f"({self.block_n}) with block scales")

    @property
    def forward_keys(self) -> int:
        """The forward's key block."""
        return self.block_n if self.forward_block_n is None else self.forward_block_n

    @property
    def fine(self) -> bool:
        """Whether the fine granularities are used."""
        return self.scales == "fine"

    @property
    def qk_scale(self) -> np.float32:
        """``c = sm_scale * log2(e)`` as the f32 the pre-pass multiplies Q by."""
        return qk_scale(self.sm_scale)


def qk_scale(sm_scale: float) -> np.float32:
    """The float32 factor folded into Q: ``sm_scale * log2(e)``."""
    return np.float32(float(sm_scale) * LOG2E)


def round_to(x: np.ndarray, dtype: str) -> np.ndarray:
    """``x`` rounded to ``dtype`` and returned as float64 values."""
    if dtype == "float16":
        return np.asarray(x).astype(np.float16).astype(np.float64)
    if dtype == "bfloat16":
        return to_bf16(np.asarray(x, np.float32)).astype(np.float64)
    if dtype == "float32":
        return np.asarray(x).astype(np.float32).astype(np.float64)
    raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")


@dataclass
class QuantizedInputs:
    """What the pre-pass produces (and the forward saves for the backward).

    ``q_q`` encodes ``c * Q`` (Q-smoothed when ``q_mean`` is given, with
    ``q_mean`` in the same scaled units); ``k_q`` encodes ``K - k_mean``.
    Scales are float32, one per block: ``q_scale`` (B, H, ceil(N/block_m)),
    ``k_scale``/``v_scale`` (B, Hkv, ceil(Nkv/block_n)); with fine scales
    ``q_scale`` is (B, H, N) and ``k_scale`` (B, Hkv, Nkv), one per token, and
    ``v_scale`` (B, Hkv, D), one per channel over all the tokens
    (:func:`dequantized_v`). ``k_mean`` is
    (B, Hkv, D) float32 (zeros without K-smoothing); ``q_mean`` is
    (B, H, ceil(N/block_m), D) float32 or None.
    """

    q_q: np.ndarray
    q_scale: np.ndarray
    q_mean: np.ndarray | None
    k_q: np.ndarray
    k_scale: np.ndarray
    v_q: np.ndarray
    v_scale: np.ndarray
    k_mean: np.ndarray
    #: The fine granularities (``SageBwdConfig.scales == "fine"``).
    fine: bool = False


@dataclass
class ForwardResult:
    """The forward's outputs: O rounded to ``out_dtype`` (float64 values), LSE
    (float32 values, log2 units, smoothed-logit domain; (B, H, N)) and the
    quantized inputs saved for the backward."""

    o: np.ndarray
    lse: np.ndarray
    saved: QuantizedInputs


@dataclass
class Gradients:
    """dQ (B, H, N, D), dK and dV (B, Hkv, Nkv, D), plus the intermediates
    P and dS (B, H, N, Nkv; zero where masked) and delta (B, H, N)."""

    dq: np.ndarray
    dk: np.ndarray
    dv: np.ndarray
    p: np.ndarray
    ds: np.ndarray
    delta: np.ndarray


def blocks(n: int, size: int) -> Iterator[tuple[int, int, int]]:
    """``(index, start, stop)`` of the ``size``-row blocks covering ``n`` rows."""
    for index, start in enumerate(range(0, n, size)):
        yield index, start, min(start + size, n)


def num_blocks(n: int, size: int) -> int:
    """``ceil(n / size)``."""
    return -(-n // size)


def kv_head(h: int, heads: int, kv_heads: int) -> int:
    """The kv head that query head ``h`` reads (GQA / MQA)."""
    if heads % kv_heads:
        raise ValueError(f"heads ({heads}) must be a multiple of kv heads ({kv_heads})")
    return h // (heads // kv_heads)


def _check_inputs(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool) -> None:
    if q.ndim != 4 or k.shape != v.shape or k.ndim != 4:
        raise ValueError(f"q (B,H,N,D), k and v (B,Hkv,Nkv,D); got {q.shape}, {k.shape}, "
                         f"{v.shape}")
    if q.shape[0] != k.shape[0] or q.shape[3] != k.shape[3] or q.shape[1] % k.shape[1]:
        raise ValueError(f"incompatible q {q.shape} and k/v {k.shape}")
    if causal and q.shape[2] > k.shape[2]:
        raise ValueError(f"causal attention needs seq <= seq_kv, got {q.shape[2]} "
                         f"and {k.shape[2]}")


def _quantize_block(x32: np.ndarray) -> tuple[np.ndarray, np.float32]:
    """Per-block INT8 of a float32 tile (the dialect's quantizer, rne)."""
    q, scale = quantize(np.ascontiguousarray(x32, np.float32), "per_block")
    return q, scale[0, 0]


def _quantize(x32: np.ndarray, granularity: str,
              unsigned: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """INT8 (or, ``unsigned``, unsigned bytes) of a float32 tile with its
    (keep-dim) scales as float64."""
    q, scale = quantize(np.ascontiguousarray(x32, np.float32), granularity, unsigned=unsigned)
    return q, scale.astype(np.float64)


def _f32_product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a * b`` rounded to float32, as the kernels fold a scale into dS."""
    return (np.asarray(a, np.float32) * np.asarray(b, np.float32)).astype(np.float32)


def _valid_mask(rows: np.ndarray, cols: np.ndarray, causal: bool,
                offset: int = 0) -> np.ndarray:
    """Which (query row, key column) pairs are visible. Causal is aligned
    bottom-right (as FlashAttention): query i sees key j iff
    j <= i + offset, with offset = seq_kv - seq (0 for seq == seq_kv)."""
    mask = np.ones((rows.size, cols.size), bool)
    if causal:
        mask &= cols[None, :] <= rows[:, None] + offset
    return mask


def k_mean(k: np.ndarray, block_n: int) -> np.ndarray:
    """The per-(batch, kv head) token mean of K in float32, summed as the kernel does.

    The kernel adds the block_n-row tiles element by element into an f32
    tile (rows past Nkv are 0), sums its rows once at the end and divides by
    Nkv in f32; the interpreter rounds that row sum from float64.
    """
    batch, heads, n, d = k.shape
    rows = np.zeros((batch, heads, block_n, d), np.float32)
    for _, start, stop in blocks(n, block_n):
        rows[:, :, :stop - start] = (rows[:, :, :stop - start]
                                     + k[:, :, start:stop].astype(np.float32))
    total = rows.astype(np.float64).sum(axis=2).astype(np.float32)
    return (total / np.float32(n)).astype(np.float32)


def key_group_quantize(ks: np.ndarray, block_n: int) -> tuple[np.ndarray, np.ndarray]:
    """INT8 of one pre-pass block of smoothed keys (rows), K's scales per
    :data:`K_SCALE_GROUPS` group: the group's absmax / 127 in f32 (0 below
    the smallest normal), each token quantized with its group's scale,
    unclamped (``|K| <= 127 * scale``). Returns the INT8 rows and the
    per-token scales (each its group's), an (n, 1) float32 column. A short
    tail block is padded with 0 rows, as the kernel's tile is: 0 leaves an
    absmax as it is."""
    rows = ks.shape[0]
    peaks = np.zeros((block_n, 1), np.float32)
    peaks[:rows, 0] = np.abs(ks).max(axis=1)
    grouped = reduce(peaks, "max", 0, groups=K_SCALE_GROUPS)
    tokens = broadcast(grouped, (block_n, 1), groups=K_SCALE_GROUPS)[:rows]
    scale = absmax_scales(tokens, "per_token")
    k_q, _ = quantize(ks, "per_token", scale=scale, saturate=False)
    return k_q, scale


def prepass(q: np.ndarray, k: np.ndarray, v: np.ndarray, cfg: SageBwdConfig) -> QuantizedInputs:
    """K mean, smoothing, ``c``-scaling of Q and per-block INT8 of Q, K, V."""
    batch, heads, n, d = q.shape
    kv_heads, n_kv = k.shape[1], k.shape[2]
    c = cfg.qk_scale
    nq, nk = num_blocks(n, cfg.block_m), num_blocks(n_kv, cfg.block_n)
    mean = k_mean(k, cfg.block_n) if cfg.smooth_k else np.zeros((batch, kv_heads, d), np.float32)
    q_q = np.zeros(q.shape, np.int8)
    q_scale = np.zeros((batch, heads, n if cfg.fine else nq), np.float32)
    q_mean = np.zeros((batch, heads, nq, d), np.float32) if cfg.smooth_q else None
    k_q, v_q = np.zeros(k.shape, np.int8), np.zeros(v.shape, np.int8)
    k_scale = np.zeros((batch, kv_heads, n_kv if cfg.fine else nk), np.float32)
    v_scale = np.zeros((batch, kv_heads, d) if cfg.fine else (batch, kv_heads, nk),
                       np.float32)
    for b in range(batch):
        for h in range(heads):
            for i, start, stop in blocks(n, cfg.block_m):
                x = (q[b, h, start:stop].astype(np.float32) * c).astype(np.float32)
                if cfg.smooth_q:
                    total = x.astype(np.float64).sum(axis=0).astype(np.float32)
                    block_mean = (total / np.float32(stop - start)).astype(np.float32)
                    q_mean[b, h, i] = block_mean
                    x = (x - block_mean).astype(np.float32)
                if cfg.fine:
                    q_q[b, h, start:stop], scale = _quantize(x, "per_token")
                    q_scale[b, h, start:stop] = scale[:, 0]
                else:
                    q_q[b, h, start:stop], q_scale[b, h, i] = _quantize_block(x)
        for h in range(kv_heads):
            for j, start, stop in blocks(n_kv, cfg.block_n):
                ks = (k[b, h, start:stop].astype(np.float32) - mean[b, h]).astype(np.float32)
                if cfg.fine:
                    k_q[b, h, start:stop], scale = key_group_quantize(ks, cfg.block_n)
                    k_scale[b, h, start:stop] = scale[:, 0]
                else:
                    k_q[b, h, start:stop], k_scale[b, h, j] = _quantize_block(ks)
                if not cfg.fine:
                    vs = v[b, h, start:stop].astype(np.float32)
                    v_q[b, h, start:stop], v_scale[b, h, j] = _quantize_block(vs)
            if cfg.fine:  # per channel over all the tokens
                # The kernel takes the channel's absmax scale, then rounds
                # the exact products, unclamped (|V| <= 127 * scale).
                v32 = v[b, h].astype(np.float32)
                scale = absmax_scales(v32, "per_channel")
                v_q[b, h], _ = quantize(v32, "per_channel", scale=scale, saturate=False)
                v_scale[b, h] = scale[0]
    return QuantizedInputs(q_q, q_scale, q_mean, k_q, k_scale, v_q, v_scale, mean, cfg.fine)


def dequantized_v(saved: QuantizedInputs, b: int, hk: int, block_n: int) -> np.ndarray:
    """V^ of (b, hk) times its scales, (Nkv, D) float64: per block, or per
    channel (fine scales)."""
    v_q = saved.v_q[b, hk].astype(np.float64)
    if saved.fine:
        return v_q * np.asarray(saved.v_scale[b, hk], np.float64)[None, :]
    scales = np.asarray(saved.v_scale[b, hk], np.float64)[:, None]
    return v_q * np.repeat(scales, block_n, axis=0)[:v_q.shape[0]]


def _qk_scales(saved: QuantizedInputs, b: int, h: int, hk: int, i: int, qs: slice,
               j: int, ks: slice) -> tuple[np.ndarray, np.ndarray]:
    """The scales of Q^ tile i and K^ tile j as (rows, 1) and (keys, 1) float64
    columns: one per token (fine) or the block's scale repeated."""
    rows, keys = qs.stop - qs.start, ks.stop - ks.start
    if saved.fine:
        return (saved.q_scale[b, h, qs].astype(np.float64)[:, None],
                saved.k_scale[b, hk, ks].astype(np.float64)[:, None])
    return (np.full((rows, 1), np.float64(saved.q_scale[b, h, i])),
            np.full((keys, 1), np.float64(saved.k_scale[b, hk, j])))


def biased_factors(sq: np.ndarray, sk: np.ndarray) -> np.ndarray:
    """The forward's row-and-key factors with biased scores: the float32
    product of the row's scale (at least the smallest normal) and the key's
    group scale, at least the smallest normal, truncated to FACTOR_BITS
    (:func:`truncate_factors`); ``sq`` a (rows, 1), ``sk`` a (keys, 1) column."""
    tiny = np.float32(np.finfo(np.float32).tiny)
    row = np.maximum(sq.astype(np.float32), tiny)
    return truncate_factors(np.maximum(row * sk.T.astype(np.float32), tiny))


def _logits(saved: QuantizedInputs, b: int, h: int, hk: int, i: int, qs: slice,
            j: int, ks: slice, factors: np.ndarray | None = None) -> np.ndarray:
    """The (i, j) tile of S in log2 units: INT8 Q^ K^^T, plus the Q-smoothing GEMV.

    With Q-smoothing, ``q_mean_i . (s_K K^_j)^T`` is added to every row (the
    kernels compute this term in f32 from the dequantized K tile). ``factors``
    (rows x keys), where given, replace the product of the scales
    (:func:`biased_factors`).
    """
    s = int8_dot(saved.q_q[b, h, qs], saved.k_q[b, hk, ks]).astype(np.float64)
    sq, sk = _qk_scales(saved, b, h, hk, i, qs, j, ks)
    s *= sq * sk.T if factors is None else factors
    if saved.q_mean is not None:
        k_deq = saved.k_q[b, hk, ks].astype(np.float64) * sk
        s = s + (k_deq @ saved.q_mean[b, h, i].astype(np.float64))[None, :]
    return s


def emulate_forward(q: np.ndarray, k: np.ndarray, v: np.ndarray,
                    cfg: SageBwdConfig) -> ForwardResult:
    """The SageBwd forward with the kernels' tiles and quantization decisions.

    Per query tile, per key tile (causal: up to the diagonal): S from INT8
    Q^ K^^T, masked to -inf, then one step of the online softmax in the
    block's units (docs/sagebwd.md, "Units"): with block max b, running max
    m' = max(m, b) and units u' = max(b, m' - UNIT_RANGE) (0 while m' is
    -inf), P~ is quantized per row as P^ = rint(f16(Q * 2^(S - u'))) (Q = 255,
    unsigned, with fine scales, else 127: the per-token scale p_max / Q of
    the spec, p_max from the running maxima), and O and l, kept in units of
    2^u, are moved to the new units by 2^(u - u') before P^ V^ (times V^'s
    block scale) and the row sum of P^ (the bytes, as the kernel sums them)
    are added. With fine
    scales V^'s channel scales multiply O once, after the last block. O =
    acc / l rounded to ``cfg.out_dtype``; LSE = u + log2(l / Q) rounded to
    float32.
    """
    _check_inputs(q, k, v, cfg.causal)
    saved = prepass(q, k, v, cfg)
    batch, heads, n, d = q.shape
    kv_heads, n_kv = k.shape[1], k.shape[2]
    qmax = UINT8_MAX if cfg.fine else INT8_MAX
    biased = cfg.fine and not cfg.smooth_q and cfg.biased_scores
    o = np.zeros(q.shape, np.float64)
    lse = np.zeros((batch, heads, n), np.float64)
    for b in range(batch):
        for h in range(heads):
            hk = kv_head(h, heads, kv_heads)
            for i, q0, q1 in blocks(n, cfg.block_m):
                rows = np.arange(q0, q1)
                m = np.full((q1 - q0, 1), -np.inf)
                unit = np.zeros((q1 - q0, 1))
                l = np.zeros((q1 - q0, 1))
                acc = np.zeros((q1 - q0, d))
                stop = min(q0 + cfg.block_m + n_kv - n, n_kv) if cfg.causal else n_kv
                for j, k0, k1 in blocks(stop, cfg.forward_keys):
                    factors = biased_factors(*_qk_scales(
                        saved, b, h, hk, i, slice(q0, q1), j, slice(k0, k1))) if biased else None
                    s = _logits(saved, b, h, hk, i, slice(q0, q1), j, slice(k0, k1), factors)
                    s = np.where(_valid_mask(rows, np.arange(k0, k1), cfg.causal, n_kv - n),
                                 s, -np.inf)
                    block_max = s.max(axis=1, keepdims=True)
                    m = np.maximum(m, block_max)
                    new_unit = np.where(m == -np.inf, 0.0,
                                        np.maximum(block_max, m - UNIT_RANGE))
                    if biased:
                        new_unit = snap_units(new_unit, factors.max(axis=1, keepdims=True),
                                              qmax)
                    shift = np.exp2(unit - new_unit)
                    p = qmax * np.exp2(s - new_unit)
                    # Rounded to f16 first, as the kernel does (docs/sagebwd.md).
                    p_q, _ = quantize(p.astype(np.float16).astype(np.float32), "per_token",
                                      scale=np.ones((q1 - q0, 1), np.float32),
                                      unsigned=cfg.fine)
                    pv = int8_dot(p_q, saved.v_q[b, hk, k0:k1], 1, 0).astype(np.float64)
                    if not cfg.fine:
                        pv = pv * np.float64(saved.v_scale[b, hk, j])
                    acc = acc * shift + pv
                    # The row sum of the bytes, exact (docs/sagebwd.md).
                    l = l * shift + p_q.sum(axis=1, keepdims=True, dtype=np.float64)
                    unit = new_unit
                if cfg.fine:  # V's channel scales, once
                    acc = acc * saved.v_scale[b, hk].astype(np.float64)[None, :]
                o[b, h, q0:q1] = acc / l
                lse[b, h, q0:q1] = (unit + np.log2(l / qmax))[:, 0]
    return ForwardResult(round_to(o, cfg.out_dtype), round_to(lse, "float32"), saved)


def emulate_backward(fwd: ForwardResult, do: np.ndarray, v: np.ndarray, cfg: SageBwdConfig,
                     dtype: str) -> Gradients:
    """The SageBwd backward with the kernels' tiles and quantization decisions.

    ``do`` and ``v`` are the 16-bit inputs (``dtype`` "float16" or
    "bfloat16"). delta = rowsum(dO o O) from the stored O (f32); dO^ per
    query block. Per (query tile i, key tile j): S recomputed from the saved
    INT8 tensors, P = exp2(S - L) (0 where masked), P^ per block (fine: per
    key column, unsigned bytes), dV_j += P^^T dO^_i; dP = dO_i V_j^T in
    16-bit inputs (exact products); dS = P o (dP - delta) quantized per
    block into dS^;
    dQ_i += sm_scale * dS^ K^_j; dK_j += ln2 * (dS^^T Q^_i [+ colsum(dS)^T q_mean_i]).
    Fine scales: dO^ per channel, and dS quantized twice, (dS o s_K^T) per
    query row for dQ and (dS o s_Q) per key column for dK.
    dK, dV are reduced over the query heads of each kv head.
    """
    saved = fwd.saved
    batch, heads, n, d = do.shape
    kv_heads, n_kv = v.shape[1], v.shape[2]
    o_saved = fwd.o
    delta = round_to((do.astype(np.float64) * o_saved).sum(axis=3), "float32")
    dq = np.zeros(do.shape)
    dk = np.zeros(v.shape)
    dv = np.zeros(v.shape)
    p_full = np.zeros((batch, heads, n, n_kv))
    ds_full = np.zeros((batch, heads, n, n_kv))
    do64 = round_to(do, dtype)
    v64 = round_to(v, dtype)
    for b in range(batch):
        for h in range(heads):
            hk = kv_head(h, heads, kv_heads)
            for i, q0, q1 in blocks(n, cfg.block_m):
                rows = np.arange(q0, q1)
                do_q, do_scale = _quantize(do[b, h, q0:q1].astype(np.float32),
                                           "per_channel" if cfg.fine else "per_block")
                lse_i = fwd.lse[b, h, q0:q1, None]
                delta_i = delta[b, h, q0:q1, None]
                for j, k0, k1 in blocks(n_kv, cfg.block_n):
                    mask = _valid_mask(rows, np.arange(k0, k1), cfg.causal, n_kv - n)
                    if not mask.any():
                        continue  # the kernels skip these tiles (or they add zeros)
                    s = _logits(saved, b, h, hk, i, slice(q0, q1), j, slice(k0, k1))
                    p = np.where(mask, np.exp2(s - lse_i), 0.0)
                    # Fine: per key column, as unsigned bytes (P >= 0).
                    p_q, p_scale = _quantize(p.astype(np.float32),
                                             "per_channel" if cfg.fine else "per_block",
                                             unsigned=cfg.fine)
                    # Scales of dV's rows (keys) and columns (channels).
                    dv[b, hk, k0:k1] += int8_dot(p_q, do_q, 0, 0) * (p_scale.T * do_scale)
                    dp = do64[b, h, q0:q1] @ v64[b, hk, k0:k1].T
                    ds = p * (dp - delta_i)
                    ds32 = ds.astype(np.float32)
                    sq, sk = _qk_scales(saved, b, h, hk, i, slice(q0, q1), j, slice(k0, k1))
                    if cfg.fine:
                        # Token scales folded into dS: dQ = (dS o s_K^T) K^, dK = (dS o s_Q)^T Q^.
                        dsq, s_dsq = _quantize(_f32_product(ds32, sk.T), "per_token")
                        dq[b, h, q0:q1] += int8_dot(dsq, saved.k_q[b, hk, k0:k1], 1, 0) * (
                            s_dsq * cfg.sm_scale)
                        dsk, s_dsk = _quantize(_f32_product(ds32, sq), "per_channel")
                        dk_tile = int8_dot(dsk, saved.q_q[b, h, q0:q1], 0, 0) * s_dsk.T
                    else:
                        ds_q, ds_scale = _quantize(ds32, "per_block")
                        dq[b, h, q0:q1] += int8_dot(ds_q, saved.k_q[b, hk, k0:k1], 1, 0) * (
                            ds_scale * sk[0, 0] * cfg.sm_scale)
                        dk_tile = int8_dot(ds_q, saved.q_q[b, h, q0:q1], 0, 0) * (
                            ds_scale * sq[0, 0])
                    if saved.q_mean is not None:
                        dk_tile = dk_tile + np.outer(ds.sum(axis=0),
                                                     saved.q_mean[b, h, i].astype(np.float64))
                    dk[b, hk, k0:k1] += LN2 * dk_tile
                    p_full[b, h, q0:q1, k0:k1] = p
                    ds_full[b, h, q0:q1, k0:k1] = ds
    return Gradients(dq, dk, dv, p_full, ds_full, delta)


@dataclass
class ReferenceResult:
    """Exact attention in float64: O (B,H,N,D), LSE (natural log, true logits),
    dQ, dK, dV and the intermediates P, dS (B,H,N,Nkv)."""

    o: np.ndarray
    lse: np.ndarray
    dq: np.ndarray
    dk: np.ndarray
    dv: np.ndarray
    p: np.ndarray
    ds: np.ndarray


def attention_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, do: np.ndarray,
                        sm_scale: float, causal: bool = False) -> ReferenceResult:
    """Full-precision attention (softmax(sm_scale Q K^T) V) and its exact gradients."""
    _check_inputs(q, k, v, causal)
    batch, heads, n, d = q.shape
    kv_heads, n_kv = k.shape[1], k.shape[2]
    group = heads // kv_heads
    q64, do64 = q.astype(np.float64), do.astype(np.float64)
    k64 = np.repeat(k.astype(np.float64), group, axis=1)
    v64 = np.repeat(v.astype(np.float64), group, axis=1)
    z = sm_scale * np.einsum("bhid,bhjd->bhij", q64, k64)
    if causal:
        z = np.where(_valid_mask(np.arange(n), np.arange(n_kv), True, n_kv - n), z, -np.inf)
    zmax = z.max(axis=3, keepdims=True)
    e = np.exp(z - zmax)
    total = e.sum(axis=3, keepdims=True)
    p = e / total
    o = p @ v64
    dp = do64 @ v64.transpose(0, 1, 3, 2)
    ds = p * (dp - (do64 * o).sum(axis=3, keepdims=True))
    dq = sm_scale * ds @ k64
    dk = sm_scale * ds.transpose(0, 1, 3, 2) @ q64
    dv = p.transpose(0, 1, 3, 2) @ do64
    shape = (batch, kv_heads, group, n_kv, d)
    return ReferenceResult(o, (zmax + np.log(total))[..., 0], dq,
                           dk.reshape(shape).sum(axis=2), dv.reshape(shape).sum(axis=2), p, ds)


def relative_l2(x: np.ndarray, ref: np.ndarray) -> float:
    """``||x - ref||_2 / ||ref||_2`` over the flattened tensors (0 if both are 0)."""
    x64, r64 = np.asarray(x, np.float64).ravel(), np.asarray(ref, np.float64).ravel()
    norm = np.linalg.norm(r64)
    diff = np.linalg.norm(x64 - r64)
    return float(diff / norm) if norm else float(diff)


def cosine_similarity(x: np.ndarray, ref: np.ndarray) -> float:
    """Cosine of the angle between the flattened tensors."""
    x64, r64 = np.asarray(x, np.float64).ravel(), np.asarray(ref, np.float64).ravel()
    return float(x64 @ r64 / (np.linalg.norm(x64) * np.linalg.norm(r64)))


def relative_l1(x: np.ndarray, ref: np.ndarray) -> float:
    """``sum |x - ref| / sum |ref|``."""
    x64, r64 = np.asarray(x, np.float64), np.asarray(ref, np.float64)
    return float(np.abs(x64 - r64).sum() / np.abs(r64).sum())


__all__ = [
    "DTYPES", "ForwardResult", "Gradients", "LN2", "LOG2E", "QuantizedInputs",
    "ReferenceResult", "SageBwdConfig", "attention_reference", "blocks", "cosine_similarity",
    "emulate_backward", "emulate_forward", "k_mean", "kv_head", "num_blocks", "prepass",
    "qk_scale", "relative_l1", "relative_l2", "round_to",
]
