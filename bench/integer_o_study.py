"""Can the SageBwd forward keep O in int32 across key blocks ("integer O")? A CPU study (numpy).

    python3 bench/integer_o_study.py OUT.md [--json OUT.json]            # the full study
    python3 bench/integer_o_study.py OUT.md --quick                      # N=1024, no 16K cases
    python3 bench/integer_o_study.py OUT.md --from-json OUT.json         # re-render only

Today (docs/sagebwd.md, "Units") the forward keeps O in f32 units 2^u with u the key block's own
row max (floored ``UNIT_RANGE`` below the running max): P^ = rint(Q 2^(S - u)), Q = 255, and every
key block costs one int32 -> f32 conversion and one FMA per O element (O = shift O + P^V^).
"Integer O" keeps O exactly in int32 on the tensor cores across key blocks, in an *integer* unit
u per row (log2 units, like S) that changes rarely, so that most key blocks need no per-element
work at all. Per row and key block with row max b (:func:`update_units`):

* rise: if ceil(b) > u (P^ would exceed Q), u' = ceil(b) + H (headroom H >= 0) and the int
  accumulator is shifted right by u' - u, rounded ("round": add 2^(k-1) first, ties up) or
  floored ("floor": the plain arithmetic shift); l (the f32 row sum of the unrounded
  Q 2^(S - u), as today) is multiplied by 2^(u - u');
* re-anchor (optional): if b < u - R, u' = ceil(b) + H and the accumulator is shifted *left*
  by u - u' (exact), but only while bound(|acc|) 2^(u - u') + the block's largest possible
  contribution stays below 2^31 (otherwise u is kept). ``guard="acc"`` bounds |acc| by the
  row's exact max |acc| (a row reduction over O's columns); ``guard="l"`` by 2 * 127 * l + the
  rounding slack of the right shifts so far (per-row scalars the kernel has anyway: rint(p) <= 2p
  for every p that does not round to 0, and |V^| <= 127);
* overflow guard: if the bound plus the block's largest contribution would reach 2^31 even after
  the rise, the unit rises further (:data:`INT32_LIMIT`; each key adds at most Q * 127 per
  element, so with units that only rise N_kv <= ``MAX_UINT8_CONTRACTION`` = 65536 keys can never
  overflow, :func:`overflow_bound`);
* at the end O = acc * s_V(channel) / l, as today.

Everything else is the emulation of ``sage.reference.sagebwd`` (its pre-pass, its logits, its
mask, its quantizer for P^, fine scales: Q, K per token, P~ unsigned per token, V per channel
over all the tokens), so the only difference from (a) ``emulate_forward`` is where O's units
are. The rows of a head are processed together (they are independent); the 64-row query tiles
and their 16-row warps only matter for the *slow-path fractions*: the share of key blocks
(after each tile's first) in which at least one row of a 16-row warp, or of the 64-row
warpgroup, changes its unit, which is how often a kernel would take its rescaling path.

Inputs: ``bench/accuracy.py``'s (Gaussian Q, K with sigma in [SA3] Table 1's sweep, sigma_V = 1,
bf16, K-smoothing), and adversarial sets: an attention sink (key 0 gets a logit ``sink`` log2
units above the bulk's mean for every query), keys sorted by a shared query direction (every
row's max keeps rising), a flat softmax over 128K keys with a constant V channel (the int32
worst case), and 16K sequences. O's relative L2 against float64 attention
(``accuracy.exact_attention``), compared with [SA3] Table 1 x :data:`BAR` (issue #12's bar) and
with today's emulation. Tests: python/test/test_integer_o_study.py.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import accuracy  # noqa: E402  (bench/accuracy.py: inputs, exact attention, Table 1)
import common  # noqa: E402

common.add_python_path()

from sage.reference import INT8_MAX, UINT8_MAX, quantize  # noqa: E402
from sage.reference.matmul import MAX_UINT8_CONTRACTION  # noqa: E402
# The emulation's own logits and mask (private helpers), so that S is bit-identical to (a)'s.
from sage.reference.sagebwd import (SageBwdConfig, _logits, _valid_mask,  # noqa: E402
                                    blocks, emulate_forward, kv_head, num_blocks, prepass,
                                    qk_scale, relative_l2, round_to)

#: Issue #12's accuracy bar: O's rel-L2 <= 1.05 x [SA3] Table 1 at every sigma.
BAR = 1.05
SIGMAS = (1.0, 3.0, 5.0, 8.0, 10.0)
#: int32's range: |acc| must stay below it.
INT32_LIMIT = 2 ** 31
#: Rows of a query tile (one warpgroup) and of one warp's share of it.
BLOCK_M = 64
WARP_ROWS = 16
#: The largest |acc| the "l" guard allows per unit of l: rint(p) <= 2p, |V^| <= 127; the
#: (1 + 2^-20) covers l's f32 sums in a kernel.
L_BOUND = 2 * INT8_MAX * (1 + 2.0 ** -20)
#: What one right shift adds to |acc| at most (its rounding), per rounding.
SHIFT_SLACK = {"round": 0.5, "floor": 1.0}
SHIFTS = tuple(SHIFT_SLACK)
GUARDS = ("acc", "l")
#: The 2^-62 shift already takes any |acc| < 2^61 to 0 (round) or -1/0 (floor).
MAX_SHIFT = 62
#: Sink heights (log2 units above the bulk's mean logit) and the sorted keys' query bias.
SINKS = (5.0, 10.0, 20.0)
SORTED_BIASES = (1.0, 4.0)
#: The constant query channel that carries the sink logit (sigma_Q = 1 elsewhere).
SINK_CHANNEL_VALUE = 2.0


def forward_keys(d: int) -> int:
    """The forward's key block: 128 keys at D = 128, 256 at D = 64 (docs/sagebwd.md, the
    forward's plans with fine scales)."""
    return 128 if d >= 128 else 256


# --------------------------------------------------------------------------- the variants

@dataclass(frozen=True)
class Variant:
    """One integer-O rule (see the module docstring)."""

    #: H: the unit set on a rise or re-anchor is ceil(b) + H.
    headroom: int = 0
    #: R: re-anchor when the block's max is below u - R (inf: never; 0: whenever it could).
    reanchor: float = math.inf
    #: How the accumulator is shifted right on a rise: "round" or "floor".
    shift: str = "round"
    #: How the guards bound |acc|: "acc" (the row's exact max) or "l" (from the row sum).
    guard: str = "acc"
    #: Raise the unit further where the next block could overflow the accumulator.
    overflow_guard: bool = True
    #: The accumulator's range (2^31: int32; the tests use small ones).
    limit: int = INT32_LIMIT

    def __post_init__(self) -> None:
        if self.shift not in SHIFTS:
            raise ValueError(f"shift must be one of {SHIFTS}, got {self.shift!r}")
        if self.guard not in GUARDS:
            raise ValueError(f"guard must be one of {GUARDS}, got {self.guard!r}")
        if self.headroom < 0 or self.reanchor < 0:
            raise ValueError("headroom and reanchor must be >= 0")

    @property
    def name(self) -> str:
        """E.g. ``H0 R2 round`` (``R-`` for no re-anchoring)."""
        r = "-" if math.isinf(self.reanchor) else f"{self.reanchor:g}"
        text = f"H{self.headroom} R{r} {self.shift}"
        if self.guard != "acc":
            text += f" {self.guard}-guard"
        if not self.overflow_guard:
            text += " unguarded"
        if self.limit != INT32_LIMIT:
            text += f" limit 2^{math.log2(self.limit):g}"
        return text

    def to_json(self) -> dict[str, Any]:
        """The fields, with R = inf as None (JSON has no infinity)."""
        fields = asdict(self)
        fields["reanchor"] = None if math.isinf(self.reanchor) else self.reanchor
        return fields

    @classmethod
    def from_json(cls, fields: dict[str, Any]) -> "Variant":
        """The inverse of :meth:`to_json`."""
        fields = dict(fields)
        fields["reanchor"] = math.inf if fields["reanchor"] is None else fields["reanchor"]
        return cls(**fields)


def variants() -> list[Variant]:
    """The sweep: H in {0, 1} x R in {inf, 4, 2} x both shifts; the bracket R = 0 (the unit
    follows every block); and R = 2 with the cheap l guard."""
    out = [Variant(h, r, s) for h in (0, 1) for r in (math.inf, 4.0, 2.0) for s in SHIFTS]
    out += [Variant(h, 0.0) for h in (0, 1)]
    out += [Variant(h, 2.0, guard="l") for h in (0, 1)]
    return out


def overflow_variants() -> list[Variant]:
    """For the int32 worst case: no re-anchoring with and without the overflow guard, and
    the guard from l."""
    return [Variant(0, math.inf, overflow_guard=False), Variant(1, math.inf, overflow_guard=False),
            Variant(0, math.inf), Variant(1, math.inf), Variant(0, math.inf, guard="l"),
            Variant(0, 2.0), Variant(0, 2.0, guard="l")]


def overflow_bound(headroom: int, qmax: int = UINT8_MAX) -> dict[str, int]:
    """The int32 worst case of units that only rise: each key adds at most P^max * 127 per
    O element (P^max = rint(Q 2^-H): 255 at H = 0, 128 at H = 1); the longest key sequence
    that cannot overflow is floor((2^31 - 1) / (P^max * 127)). A right shift never grows
    |acc| (|x| / 2^k + 1/2 <= |x| for |x| >= 1), so the sum over all keys bounds it."""
    p_max = int(np.rint(np.float32(qmax * 2.0 ** -headroom)))
    per_key = p_max * INT8_MAX
    return {"p_max": p_max, "per_key": per_key, "max_keys": (INT32_LIMIT - 1) // per_key}


# --------------------------------------------------------------------------- the accumulator

def shift_right(acc: np.ndarray, k: np.ndarray, rounding: str) -> np.ndarray:
    """``acc`` (int64) shifted right by ``k`` >= 0 (broadcast per row): "round" adds
    2^(k-1) first (round to nearest, ties toward +inf: one integer add before the shift in a
    kernel), "floor" is the arithmetic shift (toward -inf). ``k`` is clamped to
    :data:`MAX_SHIFT`."""
    k = np.minimum(np.asarray(k, np.int64), MAX_SHIFT)
    if rounding == "round":
        half = np.where(k > 0, np.left_shift(np.int64(1), np.maximum(k - 1, 0)), 0)
        return np.right_shift(acc + half, k)
    if rounding == "floor":
        return np.right_shift(acc, k)
    raise ValueError(f"rounding must be one of {SHIFTS}, got {rounding!r}")


@dataclass
class Counts:
    """What one variant did on one case (summed over heads)."""

    row_blocks: int = 0       # (row, key block) pairs after each tile's first block
    row_changes: int = 0      # ... in which the row's unit changed
    warp_blocks: int = 0      # (16-row warp, key block) pairs after the first block
    warp_slow: int = 0        # ... in which some row of the warp changed its unit
    group_blocks: int = 0     # the same for the 64-row warpgroup
    group_slow: int = 0
    rises: int = 0            # row unit changes by kind
    reanchors: int = 0
    refused: int = 0          # re-anchors the guard refused
    forced: int = 0           # extra rises of the overflow guard
    max_acc: float = 0.0      # the largest |acc| seen (int64 in the emulation)
    bound_violations: int = 0  # rows where the guard's bound was below the real |acc|

    def add(self, other: "Counts") -> None:
        """Sums ``other`` into this (max_acc: the larger)."""
        for name, value in asdict(other).items():
            mine = getattr(self, name)
            setattr(self, name, max(mine, value) if name == "max_acc" else mine + value)

    def fractions(self) -> dict[str, float]:
        """Slow-path fractions: per row, per warp and per warpgroup."""
        def ratio(a: int, b: int) -> float:
            return a / b if b else float("nan")
        return {"row": ratio(self.row_changes, self.row_blocks),
                "warp": ratio(self.warp_slow, self.warp_blocks),
                "warpgroup": ratio(self.group_slow, self.group_blocks)}


@dataclass
class RowState:
    """One variant's per-row state for one head: units (-inf before a row's first key),
    the int accumulator, l, and the rounding slack the right shifts have added to |acc|."""

    unit: np.ndarray
    acc: np.ndarray
    l: np.ndarray
    slack: np.ndarray
    counts: Counts = field(default_factory=Counts)

    @classmethod
    def empty(cls, rows: int, d: int) -> "RowState":
        """Before the first key block."""
        return cls(np.full((rows, 1), -np.inf), np.zeros((rows, d), np.int64),
                   np.zeros((rows, 1)), np.zeros((rows, 1)))

    def bound(self, guard: str) -> np.ndarray:
        """A (rows, 1) upper bound of |acc| per row (exact with ``guard="acc"``)."""
        if guard == "acc":
            return np.abs(self.acc).max(axis=1, keepdims=True).astype(np.float64)
        return L_BOUND * self.l + self.slack


def update_units(state: RowState, block_max: np.ndarray, variant: Variant,
                 block_bound: float) -> np.ndarray:
    """Moves ``state`` to the units of the next key block, whose row maxima are
    ``block_max`` (rows, 1; -inf for a row that sees none of its keys), and whose largest
    possible contribution to any |acc| element is ``block_bound``. Returns the (rows,) mask
    of the rows whose unit changed (a row's first unit is not a change: its accumulator is
    0). The rules are the module docstring's."""
    u = state.unit
    seen = np.isfinite(block_max)
    started = np.isfinite(u)
    ceil_b = np.where(seen, np.ceil(np.where(seen, block_max, 0.0)), 0.0)
    target = ceil_b + variant.headroom
    first = seen & ~started
    rise = seen & started & (ceil_b > u)
    fall = seen & started & ~rise & (block_max < u - variant.reanchor) & (target < u)
    bound = state.bound(variant.guard)
    with np.errstate(over="ignore"):
        fits = bound * np.exp2(np.where(fall, u - target, 0.0)) + block_bound < variant.limit
    fall_ok = fall & fits
    new = np.where(first | rise | fall_ok, target, u)
    forced = np.zeros_like(seen)
    if variant.overflow_guard:
        k = np.where(started, new - np.where(started, u, 0.0), 0.0)
        step = np.where(k > 0, SHIFT_SLACK[variant.shift], 0.0)
        after = bound * np.exp2(-k) + step
        # a row that sees none of the block's keys adds nothing to its accumulator
        forced = started & seen & (after + block_bound >= variant.limit)
        if forced.any():
            room = variant.limit - block_bound - SHIFT_SLACK[variant.shift]
            if room <= 0:
                raise ValueError(f"a key block can add {block_bound:g} > the limit "
                                 f"{variant.limit}")
            # the smallest k' with bound / 2^k' + slack + block_bound < limit
            need = np.floor(np.log2(np.maximum(bound, 1.0) / room)) + 1
            new = np.where(forced, np.maximum(new, u + need), new)
    k = np.where(started, new - np.where(started, u, 0.0), 0.0).astype(np.int64)
    right, left = np.maximum(k, 0), np.minimum(np.maximum(-k, 0), MAX_SHIFT)
    state.acc = np.left_shift(shift_right(state.acc, right, variant.shift), left)
    state.l = state.l * np.exp2(-k)
    state.slack = np.where(k > 0, state.slack * np.exp2(-k) + SHIFT_SLACK[variant.shift],
                           state.slack * np.exp2(-k))
    state.unit = new
    changed = (k != 0)[:, 0]
    c = state.counts
    c.rises += int((rise & (k > 0)).sum())
    c.reanchors += int(fall_ok.sum())
    c.refused += int((fall & ~fits).sum())
    c.forced += int(forced.sum())
    return changed


def integer_o_forward(q: np.ndarray, k: np.ndarray, v: np.ndarray, cfg: SageBwdConfig,
                      chosen: Sequence[Variant]) -> list[tuple[np.ndarray, Counts]]:
    """The forward with integer O, one result per variant: O (B, H, N, D) rounded to
    ``cfg.out_dtype`` (float64 values) and the variant's :class:`Counts`.

    ``cfg`` must use fine scales without Q-smoothing (the kernels' default). S, its mask and
    P^'s quantizer are the emulation's (:func:`sage.reference.sagebwd.emulate_forward`);
    the key blocks are ``cfg.forward_keys`` long, the query tiles ``cfg.block_m`` rows.
    """
    if not cfg.fine or cfg.smooth_q:
        raise ValueError("integer O is studied with fine scales and no Q-smoothing")
    saved = prepass(q, k, v, cfg)
    batch, heads, n, d = q.shape
    kv_heads, n_kv = k.shape[1], k.shape[2]
    keys = cfg.forward_keys
    rows = np.arange(n)
    tiles = num_blocks(n, cfg.block_m)
    # The kernel's key loop per query tile stops at the causal diagonal (emulate_forward's).
    stops = np.array([min(t * cfg.block_m + cfg.block_m + n_kv - n, n_kv) if cfg.causal
                      else n_kv for t in range(tiles)])
    pad = tiles * cfg.block_m - n
    outs = [np.zeros(q.shape) for _ in chosen]
    totals = [Counts() for _ in chosen]
    ones = np.ones((n, 1), np.float32)
    for b in range(batch):
        for h in range(heads):
            hk = kv_head(h, heads, kv_heads)
            states = [RowState.empty(n, d) for _ in chosen]
            for j, k0, k1 in blocks(n_kv, keys):
                s = _logits(saved, b, h, hk, 0, slice(0, n), j, slice(k0, k1))
                s = np.where(_valid_mask(rows, np.arange(k0, k1), cfg.causal, n_kv - n),
                             s, -np.inf)
                block_max = s.max(axis=1, keepdims=True)
                v_q = saved.v_q[b, hk, k0:k1].astype(np.float64)
                block_bound = float((k1 - k0) * UINT8_MAX * INT8_MAX)
                visited = stops > k0
                for variant, state in zip(chosen, states):
                    changed = update_units(state, block_max, variant, block_bound)
                    unit = np.where(np.isfinite(state.unit), state.unit, 0.0)
                    p = UINT8_MAX * np.exp2(s - unit)
                    p_q, _ = quantize(p.astype(np.float32), "per_token", scale=ones,
                                      unsigned=True)
                    # P^ V^ in float64 is exact: |sum| <= 256 * 255 * 127 < 2^53.
                    state.acc += (p_q.astype(np.float64) @ v_q).astype(np.int64)
                    # The row sum of the bytes, as the kernels take it (since the
                    # sixteenth session; the 2026-11-26 record summed the f32 P~).
                    state.l += p_q.sum(axis=1, keepdims=True, dtype=np.float64)
                    c = state.counts
                    c.max_acc = max(c.max_acc, float(np.abs(state.acc).max()))
                    c.bound_violations += int((state.bound(variant.guard)[:, 0] <
                                               np.abs(state.acc).max(axis=1)).sum())
                    if j == 0:
                        continue  # each tile's first block only sets the units
                    by_row = np.pad(changed, (0, pad)).reshape(tiles, cfg.block_m)
                    warps = by_row.reshape(tiles, -1, WARP_ROWS).any(axis=2)
                    real = np.pad(np.ones(n, bool), (0, pad)).reshape(tiles, cfg.block_m)
                    c.row_blocks += int(real[visited].sum())
                    c.row_changes += int(by_row[visited].sum())
                    c.warp_blocks += int(visited.sum()) * warps.shape[1]
                    c.warp_slow += int(warps[visited].sum())
                    c.group_blocks += int(visited.sum())
                    c.group_slow += int(by_row[visited].any(axis=1).sum())
            for i, state in enumerate(states):
                outs[i][b, h] = (state.acc * saved.v_scale[b, hk].astype(np.float64)[None, :]
                                 / state.l)
                totals[i].add(state.counts)
    return [(round_to(o, cfg.out_dtype), c) for o, c in zip(outs, totals)]


# --------------------------------------------------------------------------- the cases

@dataclass(frozen=True)
class Case:
    """One input set and mask. ``group``: "sweep" ([SA3] Table 1's inputs), "sink",
    "sorted", "flat" (the int32 worst case) or "long-keys" (few queries, many keys)."""

    group: str
    n: int
    d: int = 128
    sigma: float = 1.0
    causal: bool = False
    heads: int = 1
    n_kv: int = 0
    sink: float = 0.0
    query_bias: float = 0.0

    @property
    def name(self) -> str:
        """A short unique name."""
        nkv = f"x{self.n_kv}" if self.n_kv and self.n_kv != self.n else ""
        text = f"{self.group} N{self.n}{nkv} D{self.d} s={self.sigma:g}"
        if self.sink:
            text += f" sink+{self.sink:g}"
        if self.query_bias:
            text += f" qbias={self.query_bias:g}"
        return text + (" causal" if self.causal else "")

    def spec(self) -> accuracy.Inputs:
        """The accuracy report's input description."""
        return accuracy.Inputs(n=self.n, d=self.d, heads=self.heads, n_kv=self.n_kv,
                               sigma=self.sigma, query_bias=self.query_bias)

    def config(self) -> SageBwdConfig:
        """The forward as the kernels run it: fine scales, K-smoothing, 64-row tiles."""
        return SageBwdConfig(sm_scale=self.d ** -0.5, causal=self.causal, block_m=BLOCK_M,
                             forward_block_n=forward_keys(self.d), out_dtype="bfloat16",
                             scales="fine")

    def variants(self) -> list[Variant]:
        """The variants this case is run with."""
        return overflow_variants() if self.group in ("flat", "long-keys") else variants()


def make_inputs(case: Case, seed: int) -> dict[str, np.ndarray]:
    """q, k, v, do of ``case`` (bf16 values in float32 arrays).

    sink: one query channel is the constant :data:`SINK_CHANNEL_VALUE` and key 0 is zero but
    in that channel, where it is set so that its logit is ``sink`` log2 units for every query
    (the Gaussian bulk's logits have mean 0 and std ~1.44 sigma^2). sorted: the keys of each
    head sorted by their score against the queries' mean (their shared bias), so every row's
    max keeps rising along the key blocks. flat: Q = K = 0 (a uniform softmax) and V's
    channel 0 constant 1 (V^ = 127 at every key): the largest |acc| there is.
    """
    spec = case.spec()
    x = accuracy.make_inputs(spec, seed)
    if case.sink:
        c = float(qk_scale(case.config().sm_scale))
        x["q"][..., 0] = SINK_CHANNEL_VALUE
        x["k"][:, :, 0, :] = 0.0
        x["k"][:, :, 0, 0] = case.sink / (c * SINK_CHANNEL_VALUE)
    if case.query_bias:
        for h in range(x["k"].shape[1]):
            direction = x["q"][0, h].astype(np.float64).mean(axis=0)
            order = np.argsort(x["k"][0, h].astype(np.float64) @ direction, kind="stable")
            x["k"][0, h] = x["k"][0, h][order]
    if case.group == "flat":
        x["v"][..., 0] = 1.0
    return {name: accuracy.to_storage(a, spec.dtype) for name, a in x.items()}


def sweep_cases(ns: Sequence[int], sigmas: Sequence[float], heads: int) -> list[Case]:
    """[SA3] Table 1's inputs at D = 128 and 64, with and without the causal mask."""
    return [Case("sweep", n, d, s, causal, heads) for n in ns for d in (128, 64)
            for causal in (False, True) for s in sigmas]


def adversarial_cases(n: int, long_n: int, flat_keys: int) -> list[Case]:
    """Sinks and sorted keys at ``n`` (both D, both masks), 16K sequences (``long_n``, 0:
    none), the int32 worst case and realistic rows over ``flat_keys`` keys."""
    cases = [Case("sink", n, d, 1.0, causal, sink=h) for d in (128, 64)
             for causal in (False, True) for h in SINKS]
    cases += [Case("sorted", n, d, 1.0, causal, query_bias=qb) for d in (128, 64)
              for causal in (False, True) for qb in SORTED_BIASES]
    if long_n:
        cases += [Case("long", long_n, 128, s) for s in (1.0, 10.0)]
        cases += [Case("long", long_n, 128, 1.0, sink=10.0)]
    if flat_keys:
        cases += [Case("flat", BLOCK_M, 128, 0.0, n_kv=flat_keys)]
        cases += [Case("long-keys", BLOCK_M, 128, s, n_kv=flat_keys) for s in (0.25, 1.0)]
    return cases


def run_case(case: Case, seed: int, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Today's emulation and every variant of ``case`` against float64 attention."""
    start = time.monotonic()
    x = make_inputs(case, seed)
    cfg = case.config()
    ref = accuracy.exact_attention(*(np.asarray(x[name], np.float64)
                                     for name in ("q", "k", "v", "do")),
                                   cfg.sm_scale, case.causal)
    today = relative_l2(emulate_forward(x["q"], x["k"], x["v"], cfg).o, ref["o"])
    chosen = case.variants()
    found = integer_o_forward(x["q"], x["k"], x["v"], cfg, chosen)
    paper = accuracy.PAPER_TABLE1.get(case.sigma, {}).get("o", (None, None))[1]
    row: dict[str, Any] = {"case": case.name, "group": case.group, "fields": asdict(case),
                           "today": today, "paper": paper, "variants": {}}
    if case.sink:
        z0 = cfg.sm_scale * np.einsum("bhnd,bhd->bhn", np.asarray(x["q"], np.float64),
                                      np.asarray(x["k"][:, :, 0], np.float64))
        row["sink_mass"] = float(np.exp(z0 - ref["lse"]).mean())
    for variant, (o, counts) in zip(chosen, found):
        row["variants"][variant.name] = {"rel_l2": relative_l2(o, ref["o"]),
                                         "counts": asdict(counts),
                                         "slow": counts.fractions()}
    row["seconds"] = time.monotonic() - start
    worst = max(row["variants"].values(), key=lambda r: r["rel_l2"])["rel_l2"]
    best = min(r["rel_l2"] for r in row["variants"].values())
    log(f"{case.name}: today {today:.5f}, integer O {best:.5f}..{worst:.5f} "
        f"[{row['seconds']:.1f} s]")
    return row


# --------------------------------------------------------------------------- rendering

def _fmt(x: float | None, digits: int = 2) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.{digits}f}"


def summarise(rows: Sequence[dict[str, Any]], names: Sequence[str],
              table1_n: int) -> list[dict[str, Any]]:
    """Per variant over the sweep: the worst ratio to the paper in Table 1's setting (D = 128,
    non-causal, N = ``table1_n``) and over every sweep shape, the worst ratio to today's
    emulation, PASS (<= BAR x the paper at every sigma of Table 1's setting), and the mean
    slow-path fractions."""
    sweep = [r for r in rows if r["group"] == "sweep"]
    table1 = [r for r in sweep if r["fields"]["d"] == 128 and not r["fields"]["causal"]
              and r["fields"]["n"] == table1_n]
    out = []
    for name in names:
        mine = [r for r in sweep if name in r["variants"]]
        if not mine:
            continue

        def worst(rs: Sequence[dict[str, Any]], key: Callable[[dict[str, Any]], float]
                  ) -> tuple[float, str]:
            if not rs:
                return float("nan"), "-"
            r = max(rs, key=key)
            return key(r), r["case"]
        to_paper = worst([r for r in table1 if name in r["variants"]],
                         lambda r: r["variants"][name]["rel_l2"] / r["paper"])
        any_paper = worst(mine, lambda r: r["variants"][name]["rel_l2"] / r["paper"])
        to_today = worst(mine, lambda r: r["variants"][name]["rel_l2"] / r["today"])
        slow = {k: float(np.nanmean([r["variants"][name]["slow"][k] for r in mine]))
                for k in ("row", "warp", "warpgroup")}
        out.append({"variant": name, "table1": to_paper, "any": any_paper, "today": to_today,
                    "pass": bool(table1) and to_paper[0] <= BAR, "slow": slow,
                    "max_acc": max(r["variants"][name]["counts"]["max_acc"] for r in mine)})
    return out


def render(rows: Sequence[dict[str, Any]], names: Sequence[str], info: dict[str, Any]) -> str:
    """The markdown report."""
    lines = [f"## Integer O (CPU emulation, numpy float64): sweep N={info['ns']}, heads="
             f"{info['heads']}, bf16, K-smoothing, fine scales, seed base {info['seed']}", ""]
    summary = summarise(rows, names, max(info["ns"]))
    today_t1 = [r for r in rows if r["group"] == "sweep" and r["fields"]["d"] == 128
                and not r["fields"]["causal"] and r["fields"]["n"] == max(info["ns"])]
    if today_t1:
        lines.append("Today's emulation in Table 1's setting (D=128, non-causal, N="
                     f"{max(info['ns'])}): " + ", ".join(
                         f"s={r['fields']['sigma']:g} {r['today']:.5f} "
                         f"({r['today'] / r['paper']:.2f}x)" for r in today_t1))
        lines.append("")
    lines += [f"### Summary over the sweep (PASS: O <= {BAR}x [SA3] Table 1 at every sigma, "
              "D=128 non-causal at the largest N)", ""]
    lines.append(common.markdown_table(
        ["variant", "worst / paper, Table 1 setting", "PASS", "worst / paper, any shape",
         "worst / today", "slow path: rows", "warps", "warpgroups", "max |acc| / 2^31"],
        [[s["variant"], f"{_fmt(s['table1'][0])}x ({s['table1'][1]})",
          "PASS" if s["pass"] else "FAIL", f"{_fmt(s['any'][0])}x ({s['any'][1]})",
          f"{_fmt(s['today'][0])}x ({s['today'][1]})", _fmt(s["slow"]["row"], 3),
          _fmt(s["slow"]["warp"], 3), _fmt(s["slow"]["warpgroup"], 3),
          _fmt(s["max_acc"] / INT32_LIMIT, 4)] for s in summary],
        right=[False, False, False, False, False, True, True, True, True]))
    lines += ["", "Slow path: the share of key blocks after each query tile's first in which a "
              "row changes its unit (rows), some row of a 16-row warp does (warps), some row of "
              "the 64-row tile does (warpgroups); the mean over the sweep's cases.", ""]
    short = {name: name.replace(" round", "r").replace(" floor", "f").replace("-guard", "")
             .replace(" ", "") for name in names}
    for group, title in (("sweep", "The sweep: O rel-L2 of today's emulation (ratio to the "
                                   "paper) and each variant's ratio to today"),
                         ("sink", "Attention sink (sigma = 1 bulk; sink mass = mean P of key 0)"),
                         ("sorted", "Keys sorted by a shared query direction (rising maxima)"),
                         ("long", "16K sequences, one head"),
                         ("flat", "int32 worst case: uniform softmax, V channel 0 constant"),
                         ("long-keys", "64 query rows over many keys (realistic |acc|)")):
        mine = [r for r in rows if r["group"] == group]
        if not mine:
            continue
        cols = [n for n in names if n in mine[0]["variants"]]
        extra = ["sink mass"] if group == "sink" else []
        lines += [f"### {title}", ""]
        table = []
        for r in mine:
            ratio = f" ({r['today'] / r['paper']:.2f}x)" if r["paper"] else ""
            cells = [r["case"]] + ([_fmt(r["sink_mass"], 3)] if extra else [])
            cells.append(f"{r['today']:.5f}{ratio}")
            cells += [_fmt(r["variants"][n]["rel_l2"] / r["today"]) for n in cols]
            table.append(cells)
        lines.append(common.markdown_table(["case"] + extra + ["today"]
                                           + [short[n] for n in cols], table))
        lines.append("")
        lines += [f"Slow path (warps / warpgroups) and guard events, {title.split(' (')[0]}:",
                  ""]
        lines.append(common.markdown_table(
            ["case"] + [short[n] for n in cols],
            [[r["case"]] + [_event(r["variants"][n]) for n in cols] for r in mine]))
        lines.append("")
    lines += ["Column names: H<headroom> R<re-anchor distance, - = never><r = round, f = floor "
              "shift>, 'l': the re-anchor/overflow guard from l instead of max |acc|, "
              "'unguarded': no overflow guard. Cells of the per-group tables: rel-L2 / today's.",
              "Events: warp/warpgroup slow-path fractions; F = forced rises (overflow guard), "
              "X = refused re-anchors, A = max |acc| / 2^31, V = guard bound below |acc| (must "
              "be 0).", "",
              "Paper ([SA3] Table 1) O rel-L2: " + "; ".join(
                  f"s={s:g}: {accuracy.PAPER_TABLE1[s]['o'][1]}" for s in SIGMAS)
              + f"; the bar is {BAR}x."]
    return "\n".join(lines) + "\n"


def _event(v: dict[str, Any]) -> str:
    c = v["counts"]
    text = f"{_fmt(v['slow']['warp'])}/{_fmt(v['slow']['warpgroup'])}"
    if c["forced"]:
        text += f" F{c['forced']}"
    if c["refused"]:
        text += f" X{c['refused']}"
    text += f" A{c['max_acc'] / INT32_LIMIT:.3f}"
    if c["bound_violations"]:
        text += f" V{c['bound_violations']}"
    return text


def rerender(json_path: Path, md_path: Path) -> int:
    """Writes (and prints) the markdown of an earlier ``--json`` output; no computation."""
    saved = json.loads(json_path.read_text())
    text = render(saved["rows"], saved["variants"], saved["info"])
    md_path.write_text(text)
    print(text)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("md", type=Path, help="markdown output")
    parser.add_argument("--json", type=Path, help="JSON output")
    parser.add_argument("--quick", action="store_true",
                        help="sweep and adversarial cases at N=1024, no 16K cases, 16K flat keys")
    parser.add_argument("--n", default="", help="sweep lengths, comma-separated "
                        "(default 1024,4096; --quick 1024)")
    parser.add_argument("--adversarial-n", type=int, default=0,
                        help="length of the sink/sorted cases (default: the largest sweep N)")
    parser.add_argument("--long-n", type=int, default=-1,
                        help="16K cases' length (0: none; default 16384, --quick 0)")
    parser.add_argument("--flat-keys", type=int, default=-1,
                        help="keys of the flat/long-keys cases (0: none; default 131072, "
                             "--quick 16384)")
    parser.add_argument("--heads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0, help="base seed (accuracy.make_inputs)")
    parser.add_argument("--sigmas", default=",".join(f"{s:g}" for s in SIGMAS))
    parser.add_argument("--groups", default="", help="only these groups, comma-separated")
    parser.add_argument("--from-json", type=Path,
                        help="re-render the markdown of an earlier --json run")
    options = parser.parse_args(argv)
    if options.from_json:
        return rerender(options.from_json, options.md)
    clock = common.Budget(math.inf)  # only its elapsed time

    def log(text: str) -> None:
        common.log(f"[{clock.elapsed():7.1f} s] {text}")

    ns = ([int(n) for n in options.n.split(",") if n] if options.n
          else [1024] if options.quick else [1024, 4096])
    long_n = options.long_n if options.long_n >= 0 else (0 if options.quick else 16384)
    flat = options.flat_keys if options.flat_keys >= 0 else (16384 if options.quick else 131072)
    sigmas = [float(s) for s in options.sigmas.split(",")]
    cases = sweep_cases(ns, sigmas, options.heads) + adversarial_cases(
        options.adversarial_n or max(ns), long_n, flat)
    if options.groups:
        keep = {g.strip() for g in options.groups.split(",")}
        cases = [c for c in cases if c.group in keep]
    rows = [run_case(case, options.seed, log) for case in cases]
    names = [v.name for v in variants()] + [v.name for v in overflow_variants()
                                            if v.name not in {w.name for w in variants()}]
    info = {"ns": ns, "heads": options.heads, "seed": options.seed, "sigmas": sigmas,
            "long_n": long_n, "flat_keys": flat, "seconds": clock.elapsed(),
            "commit": common.git_commit(),
            "overflow": {f"H{h}": overflow_bound(h) for h in (0, 1)},
            "max_uint8_contraction": MAX_UINT8_CONTRACTION,
            "command": " ".join(["python3", "bench/integer_o_study.py"]
                                + list(argv if argv is not None else sys.argv[1:]))}
    text = render(rows, names, info)
    options.md.write_text(text)
    if options.json:
        options.json.write_text(json.dumps(
            {"info": info, "variants": names, "rows": rows,
             "variant_fields": {v.name: v.to_json() for v in variants() + overflow_variants()},
             "summary": summarise(rows, names, max(ns))}, indent=1))
    print(text)
    log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
