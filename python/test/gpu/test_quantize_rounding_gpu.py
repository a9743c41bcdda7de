"""INT8 rounding on the GPU is bit-identical to the reference.

The quantizer's round/clamp/convert lowers to a clamp plus a magic-number
``add.rn.f32`` (no F2I: ``lib/Conversion/SageToLLVM/ScalarMathToNVVM.cpp``).
These kernels quantize tiles built to hit every corner of round-half-to-even
(ties on both sides of zero and of every integer up to 127, the clamp edges,
zeros, negative zeros, tiny values) with given scales, plus random rows,
all-zero rows and rows at the edge of the subnormal-scale flush with absmax
scales (whose quantize has no clamp), and compare every byte and every scale
with ``sage.reference.quant.quantize``. f16 values quantized with scale 1
round in f16 pairs (the SageBwd forward's P~): their bytes are compared the
same way. Skipped without a GPU (conftest).
"""

from __future__ import annotations

import numpy as np
import pytest

import sage
import sage.language as sl
from sage.reference.quant import quantize as reference_quantize

torch = pytest.importorskip("torch")

ROWS, COLS = 64, 256


def quantize_given(x, s, q, ROWS: sl.constexpr, COLS: sl.constexpr):
    """Per-token INT8 of one tile with the scales in ``s``."""
    t = sl.load(x, shape=(ROWS, COLS), offsets=(0, 0), strides=(COLS, 1), bounds=(ROWS, COLS))
    st = sl.load(s, shape=(ROWS, 1), offsets=(0, 0), strides=(1, 1), bounds=(ROWS, 1))
    tq, _ = sl.quantize(t, sl.int8_per_token, scale=st)
    sl.store(q, tq, offsets=(0, 0), strides=(COLS, 1), bounds=(ROWS, COLS))


def quantize_absmax(x, q, s, ROWS: sl.constexpr, COLS: sl.constexpr):
    """Per-token INT8 of one tile with absmax scales, written to ``q`` and ``s``."""
    t = sl.load(x, shape=(ROWS, COLS), offsets=(0, 0), strides=(COLS, 1), bounds=(ROWS, COLS))
    tq, st = sl.quantize(t, sl.int8_per_token)
    sl.store(q, tq, offsets=(0, 0), strides=(COLS, 1), bounds=(ROWS, COLS))
    sl.store(s, st, offsets=(0, 0), strides=(1, 1), bounds=(ROWS, 1))


def quantize_f16_unit(x, q, ROWS: sl.constexpr, COLS: sl.constexpr):
    """INT8 of one f32 tile rounded to f16, scale 1, unclamped (the forward's
    P~ rounds so, to unsigned bytes: the same instructions)."""
    t = sl.load(x, shape=(ROWS, COLS), offsets=(0, 0), strides=(COLS, 1), bounds=(ROWS, COLS))
    ones = sl.full((ROWS, 1), 1.0, sl.float32)
    tq, _ = sl.quantize(t.to(sl.float16), sl.int8_per_token, scale=ones, saturate=False)
    sl.store(q, tq, offsets=(0, 0), strides=(COLS, 1), bounds=(ROWS, COLS))


def _corner_rows() -> tuple[np.ndarray, np.ndarray]:
    """Rows of values whose scaled form lands on ties and clamp edges."""
    rng = np.random.default_rng(7)
    halves = np.arange(-128, 128, dtype=np.float32) + np.float32(0.5)  # every tie in range
    edges = np.array([127.0, -127.0, 127.49998, -127.49998, 127.5, -127.5, 128.0, -128.0,
                      300.0, -300.0, 0.0, -0.0, 1e-30, -1e-30, 0.49999997, -0.49999997,
                      0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 126.5, -126.5], dtype=np.float32)
    rows, scales = [], []
    for scale in (1.0, 0.5, 0.25, 2.0):  # exact reciprocals: y = x * inv is x / scale
        rows.append(halves * np.float32(scale))
        scales.append(scale)
        edge_row = np.resize(edges, COLS) * np.float32(scale)
        rows.append(edge_row)
        scales.append(scale)
    while len(rows) < ROWS:  # random values with arbitrary (inexact) reciprocals
        scale = np.float32(rng.uniform(0.01, 3.0))
        rows.append((rng.standard_normal(COLS) * 60 * scale).astype(np.float32))
        scales.append(scale)
    x = np.stack(rows).astype(np.float32)
    return x, np.array(scales, dtype=np.float32).reshape(ROWS, 1)


def test_given_scales_round_half_to_even_bit_exactly(record):
    x, s = _corner_rows()
    q = torch.zeros(ROWS, COLS, dtype=torch.int8, device="cuda")
    sage.jit(quantize_given)[(1,)](torch.from_numpy(x).cuda(), torch.from_numpy(s).cuda(), q,
                                   ROWS=ROWS, COLS=COLS)
    expected, _ = reference_quantize(x, "per_token", scale=s)
    got = q.cpu().numpy()
    mismatches = int(np.count_nonzero(got != expected))
    record("quantize_rounding_given_scale_mismatches", mismatches)
    assert mismatches == 0, np.argwhere(got != expected)[:8]
    # The corners really are there: ties went both ways and the clamp bit.
    assert {-127, 127} <= set(np.unique(got[:2]).tolist())
    assert got[0, 128] == 0 and got[0, 129] == 2  # 0.5 -> 0, 1.5 -> 2
    assert got[0, 127] == 0 and got[0, 126] == -2  # -0.5 -> 0, -1.5 -> -2


def test_absmax_scales_zeros_and_random_rows_bit_exactly(record):
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((ROWS, COLS)) * rng.uniform(1e-3, 1e3, (ROWS, 1))).astype(np.float32)
    x[3] = 0.0
    x[4] = -0.0
    x[5, :] = 0.0
    x[5, 17] = -2.5  # absmax ties on the negative side
    x[6] = np.float32(127.0) * np.sign(rng.standard_normal(COLS)).astype(np.float32)
    tiny = np.finfo(np.float32).tiny
    x[7] = rng.uniform(-1, 1, COLS).astype(np.float32) * tiny  # scale flushed to 0
    x[8] = np.float32(127 * tiny) * np.sign(rng.standard_normal(COLS)).astype(np.float32)
    q = torch.zeros(ROWS, COLS, dtype=torch.int8, device="cuda")
    s = torch.full((ROWS, 1), float("nan"), device="cuda")
    sage.jit(quantize_absmax)[(1,)](torch.from_numpy(x).cuda(), q, s, ROWS=ROWS, COLS=COLS)
    expected_q, expected_s = reference_quantize(x, "per_token")
    got_q, got_s = q.cpu().numpy(), s.cpu().numpy()
    mismatches = int(np.count_nonzero(got_q != expected_q))
    record("quantize_rounding_absmax_mismatches", mismatches)
    assert mismatches == 0, np.argwhere(got_q != expected_q)[:8]
    assert np.array_equal(got_s.view(np.uint32), expected_s.view(np.uint32))
    assert not got_q[3:5].any() and got_s[3, 0] == 0 and got_s[4, 0] == 0
    assert got_q[5, 17] == -127 and np.abs(got_q[6]).min() == 127
    # A scale below 2^-126 is flushed (q 0); the smallest normal one is kept.
    assert got_s[7, 0] == 0 and not got_q[7].any()
    assert got_s[8, 0] == tiny and np.abs(got_q[8]).min() == 127


def test_f16_pairs_round_half_to_even_bit_exactly(record):
    rng = np.random.default_rng(5)
    ties = np.arange(-127, 127, dtype=np.float32) + np.float32(0.5)  # f16 holds every one
    # Just off a tie: f16 rounds onto it (then to even), f32 would not.
    below = ties - np.float32(1e-3)
    edges = np.array([0.0, -0.0, 1e-30, -1e-30, 6e-8, 0.49999997, 0.5, -0.5, 1.5, -1.5,
                      126.5, -126.5, 127.0, -127.0, 127.43, -127.43], dtype=np.float32)
    rows = [np.resize(ties, COLS), np.resize(below, COLS), np.resize(edges, COLS)]
    while len(rows) < ROWS:  # |f16(x)| < 127.5: bytes in range
        rows.append(rng.uniform(-127.43, 127.43, COLS).astype(np.float32))
    x = np.stack(rows)
    q = torch.zeros(ROWS, COLS, dtype=torch.int8, device="cuda")
    sage.jit(quantize_f16_unit)[(1,)](torch.from_numpy(x).cuda(), q, ROWS=ROWS, COLS=COLS)
    expected, _ = reference_quantize(x.astype(np.float16).astype(np.float32), "per_token",
                                     scale=np.ones((ROWS, 1), np.float32))
    got = q.cpu().numpy()
    mismatches = int(np.count_nonzero(got != expected))
    record("quantize_rounding_f16_pairs_mismatches", mismatches)
    assert mismatches == 0, np.argwhere(got != expected)[:8]
    # Ties to even on both sides, and the f16 step's double rounding:
    # 100.499 -> f16 100.5 -> 100; 101.499 -> 101.5 -> 102 (f32: 101).
    assert got[0, 127] == 0 and got[0, 128] == 2 and got[0, 126] == 0 and got[0, 125] == -2
    assert got[1, 228] == 102 and got[1, 227] == 100
