"""Hand-checked cases for the numpy reference semantics (python/sage/reference).

Expected values are written out (worked by hand in the comments), not
recomputed with the formulas under test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import sage
from sage import reference as ref

# Any warning (RuntimeWarning from a division by zero, overflow, ...) fails.
pytestmark = pytest.mark.filterwarnings("error")

F32 = np.float32
INF = np.inf


def f32(rows) -> np.ndarray:
    return np.array(rows, dtype=np.float32)


def test_package_metadata():
    assert sage.__version__ == "0.1.0"
    for name in ref.__all__:
        assert callable(getattr(ref, name)) or name.isupper()


# --------------------------------------------------------------------------- to_bf16

def test_to_bf16_rounds_to_nearest_even():
    # bf16 keeps 8 significand bits, so the spacing just above 1 is 2^-7.
    x = f32([[1.0 + 2**-8,             # tie between 1 and 1+2^-7 -> even (1.0)
              1.0 + 3 * 2**-8,         # tie between 1+2^-7 and 1+2^-6 -> even (1+2^-6)
              1.0 + 2**-8 + 2**-20,    # just above the tie -> 1+2^-7
              1.0 + 2**-8 - 2**-20,    # just below the tie -> 1.0
              -(1.0 + 3 * 2**-8),      # sign is kept
              3.0, 0.0, -0.0]])
    got = ref.to_bf16(x)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(
        got, f32([[1.0, 1.0 + 2**-6, 1.0 + 2**-7, 1.0, -(1.0 + 2**-6), 3.0, 0.0, -0.0]]))
    assert np.signbit(got[0, 7])


def test_to_bf16_overflow_nan_and_subnormals():
    bits = np.array([0x7F7FFFFF,   # largest f32: rounds past the largest bf16 -> inf
                     0x7F7F7FFF,   # below the midpoint -> largest bf16 0x7F7F0000
                     0x7F800000,   # inf stays inf
                     0x7F800001,   # NaN with a low payload only: must stay NaN, not inf
                     0xFFC00000,   # negative quiet NaN
                     0x00018000],  # subnormal tie: 0x0001 is odd -> rounds up to 0x0002
                    dtype=np.uint32)
    got = ref.to_bf16(bits.view(np.float32)).view(np.uint32)
    assert got[0] == 0x7F800000
    assert got[1] == 0x7F7F0000
    assert got[2] == 0x7F800000
    assert np.isnan(got[3:5].view(np.float32)).all()
    assert (got[3:5] & 0xFFFF).max() == 0   # the NaNs are bf16 values too
    assert got[4] >> 31 == 1
    assert got[5] == 0x00020000


# --------------------------------------------------------------------------- quantize

@pytest.mark.parametrize("granularity", ["per_block", "per_token", "per_channel"])
def test_absmax_scales_are_quantize_s(granularity):
    """absmax_scales gives the scales quantize computes: absmax / qmax, 0 for
    a zero granule and for a subnormal one, for either qmax."""
    x = f32([[0.0, 0.0, 2.0], [0.0, 1e-40, -254.0], [0.0, 0.0, 3.0]])
    for qmax in (127, 255):
        got = ref.absmax_scales(x, granularity, qmax)
        _, expected = ref.quantize(np.abs(x), granularity, qmax=qmax, unsigned=qmax == 255)
        np.testing.assert_array_equal(got, expected)
    assert ref.absmax_scales(x, "per_token")[0, 0] == F32(2.0) / F32(127)
    assert ref.absmax_scales(x, "per_channel")[0, 0] == 0.0  # a zero column
    assert ref.absmax_scales(f32([[1e-40]]), "per_block")[0, 0] == 0.0  # subnormal


def test_quantize_rounding_ties():
    # absmax 127 -> scale 127/127 = 1, inv 1, so y = x and every .5 is a tie.
    x = f32([[0.5, 1.5, 2.5, -2.5, -0.5, 126.5, -127.0, 127.0]])
    q, s = ref.quantize(x, "per_block", "rne")
    assert s.dtype == np.float32 and s.shape == (1, 1) and s[0, 0] == 1.0
    assert q.dtype == np.int8
    np.testing.assert_array_equal(q, [[0, 2, 2, -2, 0, 126, -127, 127]])
    q, s = ref.quantize(x, "per_block", "rna")
    np.testing.assert_array_equal(q, [[1, 2, 3, -3, -1, 127, -127, 127]])


def test_quantize_scale_two():
    # absmax 254 -> scale 2, inv 0.5 (both exact): x = 1, 3, 5 give y = 0.5, 1.5, 2.5.
    x = f32([[254.0, 1.0, 3.0, 5.0, -5.0, 0.75]])
    q, s = ref.quantize(x, "per_block")
    assert s[0, 0] == 2.0
    np.testing.assert_array_equal(q, [[127, 0, 2, 2, -2, 0]])
    q, _ = ref.quantize(x, "per_block", "rna")
    np.testing.assert_array_equal(q, [[127, 1, 2, 3, -3, 0]])   # 0.375 -> 0


def test_quantize_absmax_2_54():
    x = f32([[2.54, -2.54, 1.27, 0.01, 0.03, 0.05, -0.05, 0.0]])
    q, s = ref.quantize(x, "per_block")
    # float32(2.54) / 127 rounds to 0x1.47ae14p-6, the float32 nearest to 0.02;
    # 1 / that rounds to exactly 50, and in float32 1.27 * 50 = 63.5,
    # 0.01 * 50 = 0.5, 0.03 * 50 = 1.5 and 0.05 * 50 = 2.5: all ties.
    assert s[0, 0] == F32(float.fromhex("0x1.47ae14p-6")) == F32(0.02)
    np.testing.assert_array_equal(q, [[127, -127, 64, 0, 2, 2, -2, 0]])
    q, _ = ref.quantize(x, "per_block", "rna")
    np.testing.assert_array_equal(q, [[127, -127, 64, 1, 2, 3, -3, 0]])


def test_quantize_uses_f32_product_with_reciprocal():
    # float16 absmax a = 1.0341796875, x = a / 2 = 0.51708984375. In float32:
    #   scale = a / 127 = 0x1.0ad5acp-7, inv = 1 / scale = 0x1.eb35e8p+6,
    #   x * inv rounds to exactly 63.5 (the exact x / scale is 63.4999976),
    # so q = 64 with either rounding; dividing by scale instead would give 63.
    x = np.array([[1.0341796875, 0.51708984375]], dtype=np.float16)
    q, s = ref.quantize(x, "per_block", "rne")
    assert s[0, 0] == F32(float.fromhex("0x1.0ad5acp-7"))
    assert F32(0.51708984375) * F32(float.fromhex("0x1.eb35e8p+6")) == F32(63.5)
    np.testing.assert_array_equal(q, [[127, 64]])
    q, _ = ref.quantize(x, "per_block", "rna")
    np.testing.assert_array_equal(q, [[127, 64]])


def test_quantize_scale_and_reciprocal_are_float32_steps():
    # absmax 3: x = fl32(3 * 5 / 254) is 2.50000007 steps in exact arithmetic
    # (it would round to 3), but the f32 steps give x * inv == 2.5 exactly, a
    # tie that rounds to even: 2.
    x = np.array([[3.0, np.float32(3.0) * np.float32(5) / np.float32(254)]], np.float32)
    q, s = ref.quantize(x, "per_block")
    assert s[0, 0] == np.float32(3) / np.float32(127)
    assert float(x[0, 1]) * 127 / 3 > 2.5
    assert q.tolist() == [[127, 2]]


def test_quantize_negative_zero_in_a_nonzero_block():
    q, _ = ref.quantize(f32([[-0.0, 1.0]]), "per_block")
    assert q.tolist() == [[0, 127]]


@pytest.mark.parametrize("zero", [0.0, -0.0])
@pytest.mark.parametrize("granularity", ["per_block", "per_token", "per_channel"])
def test_quantize_all_zero_granules(zero, granularity):
    x = np.full((3, 4), zero, dtype=np.float32)
    x[0, 0] = -0.0
    q, s = ref.quantize(x, granularity)      # warnings are errors in this module
    assert (s == 0).all() and not np.isnan(s).any()
    assert (q == 0).all()
    assert (ref.dequantize(q, s, granularity) == 0).all()


def test_quantize_flushes_subnormal_scales_so_the_clip_never_acts():
    """A computed scale below 2**-126 is flushed to 0 (its granule quantizes
    to 0); every other computed scale keeps |x * inv| below 127.5, so the
    clip the kernels leave out for computed scales never changes a value."""
    tiny = np.float32(np.finfo(np.float32).tiny)
    x = f32([[tiny, -tiny / 2],                 # absmax / 127 subnormal: flushed
             [tiny * 127, -tiny * 127],         # the smallest normal scale: kept
             [np.float32(1e-44), 0.0]])         # a subnormal absmax
    q, s = ref.quantize(x, "per_token")
    assert s[0, 0] == 0 and (q[0] == 0).all() and s[2, 0] == 0 and (q[2] == 0).all()
    assert s[1, 0] == tiny and q[1].tolist() == [127, -127]
    # The worst element of a granule is its absmax itself: over absmax values
    # at every binade that keeps the scale normal (a million mantissas),
    # round(absmax * RN(1 / RN(absmax / 127))) never passes 127.
    rng = np.random.default_rng(5)
    bits = rng.integers(0x0400_0000, 0x7F00_0000, 1 << 20, dtype=np.uint32)
    absmax = bits.view(np.float32).reshape(-1, 1)
    absmax = absmax[absmax[:, 0] >= tiny * 127]
    _, scales = ref.quantize(absmax, "per_token")
    assert (scales >= tiny).all()
    inv = (np.float32(1) / scales).astype(np.float32)
    for rounding in ("rne", "rna"):
        assert np.abs(ref.round_to_integer(absmax * inv, rounding)).max() <= 127


def test_quantize_absmax_maps_to_127_and_never_minus_128():
    # Every positive normal float16 as absmax: +-absmax must give exactly +-127.
    a = np.arange(0x0400, 0x7C00, dtype=np.uint16).view(np.float16).reshape(-1, 1)
    x = np.concatenate([a, -a, a / 3], axis=1)
    q, s = ref.quantize(x, "per_token")
    assert (q[:, 0] == 127).all() and (q[:, 1] == -127).all()
    for rounding in ("rne", "rna"):
        rng = np.random.default_rng(1)
        y = (rng.standard_normal((64, 64)) * 10).astype(np.float32)
        q, _ = ref.quantize(y, "per_block", rounding)
        assert q.min() == -127 or q.max() == 127
        assert q.min() >= -127


def test_quantize_per_token_and_per_channel():
    # Row 0: absmax 127 -> scale 1; row 1: absmax 254 -> scale 2.
    rows = [[127.0, 1.0, -0.5], [254.0, 3.0, -5.0]]
    q, s = ref.quantize(f32(rows), "per_token")
    assert s.shape == (2, 1)
    np.testing.assert_array_equal(s, [[1.0], [2.0]])
    np.testing.assert_array_equal(q, [[127, 1, 0], [127, 2, -2]])
    q, _ = ref.quantize(f32(rows), "per_token", "rna")
    np.testing.assert_array_equal(q, [[127, 1, -1], [127, 2, -3]])
    # The same numbers as columns, in float16.
    q, s = ref.quantize(np.array(rows, np.float16).T, "per_channel")
    assert s.shape == (1, 2) and s.dtype == np.float32
    np.testing.assert_array_equal(s, [[1.0, 2.0]])
    np.testing.assert_array_equal(q, [[127, 127], [1, 2], [0, -2]])
    # Per block, the whole tile shares scale 2.
    q, s = ref.quantize(np.array(rows, np.float16), "per_block")
    np.testing.assert_array_equal(s, [[2.0]])
    np.testing.assert_array_equal(q, [[64, 0, 0], [127, 2, -2]])   # 63.5 -> 64


def test_quantize_granularities_with_inexact_scales():
    x = f32([[1.0, -4.0], [0.5, 0.25]])
    q, s = ref.quantize(x, "per_token")
    # Row scales 4/127 and 0.5/127: 1 -> 31.75 -> 32, 0.25 -> 63.5 -> 64 (ties to even).
    assert s[:, 0].tolist() == [np.float32(4) / 127, np.float32(0.5) / 127]
    assert q.tolist() == [[32, -127], [127, 64]]
    q, s = ref.quantize(x, "per_channel")
    assert s.shape == (1, 2)
    assert q.tolist() == [[127, -127], [64, 8]]   # 0.25 * 127 / 4 = 7.94 -> 8


def test_quantize_float16_input_is_exact():
    x = np.array([[0.1, -0.2]], np.float16)   # f16(0.1) is exactly half of f16(0.2)
    q, s = ref.quantize(x, "per_block")
    assert s[0, 0] == np.float32(np.float16(0.2)) / np.float32(127)
    assert q.tolist() == [[64, -127]]


def test_quantize_given_scale():
    # P~ style: the per-row scale comes from the softmax row max: pmax / 127.
    scale = f32([[0.5], [0.25]])                 # pmax 63.5 and 31.75
    x = f32([[63.5, 1.0, 0.75], [31.75, 0.125, -0.375]])
    q, s = ref.quantize(x, "per_token", scale=scale)
    np.testing.assert_array_equal(s, scale)      # the given scale is returned
    assert s is not scale                        # as a new array
    np.testing.assert_array_equal(q, [[127, 2, 2], [127, 0, -2]])   # y: 1.5 and 0.5, -1.5
    q, _ = ref.quantize(x, "per_token", "rna", scale=scale)
    np.testing.assert_array_equal(q, [[127, 2, 2], [127, 1, -2]])
    # A given scale smaller than absmax clamps; a zero scale gives zeros.
    q, _ = ref.quantize(f32([[300.0, -300.0, 2.0]]), "per_block", scale=f32([[1.0]]))
    np.testing.assert_array_equal(q, [[127, -127, 2]])
    q, s = ref.quantize(f32([[5.0, 1.0]]), "per_block", scale=f32([[0.0]]))
    assert (q == 0).all() and s[0, 0] == 0


def test_quantize_given_scale_clamps_and_never_gives_minus_128():
    q, _ = ref.quantize(f32([[-3.0, 1.0]]), "per_block", scale=f32([[0.001]]))
    assert q.tolist() == [[-127, 127]]            # clamped, not wrapped
    # p rows with scales 1/127 and 0.5/127 (row max / 127).
    p = f32([[1.0, 0.5, 0.25], [0.5, 0.125, 0.0]])
    given = f32([[1.0], [0.5]]) / np.float32(127)
    q, _ = ref.quantize(p, "per_token", scale=given)
    assert q.tolist() == [[127, 64, 32], [127, 32, 0]]


def test_quantize_softmax_probabilities_with_pmax_scale():
    s = np.array([[0.0, 1.0, -2.0, 0.5], [3.0, -np.inf, 2.0, 2.5]])
    p, _, _, _, p_max = ref.softmax_update(s, np.full((2, 1), -np.inf), np.zeros((2, 1)))
    scale = (p_max / 127).astype(np.float32)
    q, _ = ref.quantize(p.astype(np.float32), "per_token", scale=scale)
    np.testing.assert_array_equal(q.max(axis=1), [127, 127])
    # Row 0: p = 2^(s-1) = [0.5, 1, 0.125, 0.7071]; scale f32(1/127) has
    # inv = 127 exactly, so y = 127 p = [63.5 (a tie), 127, 15.875, 89.80].
    np.testing.assert_array_equal(q[0], [64, 127, 16, 90])
    assert q[1, 1] == 0


def test_quantize_nan_and_inf_granules():
    x = f32([[1.0, np.nan, 2.0], [127.0, 3.0, -1.0], [np.inf, 1.0, 0.0], [-np.inf, 2.0, 1.0]])
    q, s = ref.quantize(x, "per_token")
    assert np.isnan(s[0, 0])
    assert s[1, 0] == 1.0 and s[2, 0] == INF and s[3, 0] == INF
    np.testing.assert_array_equal(q[1], [127, 3, -1])
    assert (q[[0, 2, 3]] == 0).all()             # unspecified by the dialect; 0 here
    q, s = ref.quantize(x, "per_block")
    assert np.isnan(s[0, 0]) and (q == 0).all()
    q, s = ref.quantize(x[1:], "per_block")
    assert s[0, 0] == INF and (q == 0).all()


def test_quantize_qmax():
    q, s = ref.quantize(f32([[7.0, -7.0, 3.5, 2.5]]), "per_block", qmax=7)
    assert s[0, 0] == 1.0
    np.testing.assert_array_equal(q, [[7, -7, 4, 2]])


@pytest.mark.parametrize("granularity", ["per_block", "per_token", "per_channel"])
@pytest.mark.parametrize("rounding", ["rne", "rna"])
def test_dequantize_error_at_most_half_a_step(granularity, rounding):
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((32, 48)) * rng.uniform(0.01, 50, (32, 1))).astype(np.float32)
    q, s = ref.quantize(x, granularity, rounding)
    back = ref.dequantize(q, s, granularity)
    assert back.dtype == np.float32 and back.shape == x.shape
    # Half a step, plus the float32 error of x * inv (a few ulps of <= 127)
    # and of the dequantizing product.
    bound = np.broadcast_to(s, x.shape) * (0.5 + 1e-4) + np.abs(x) * 2.0**-22
    assert (np.abs(back.astype(np.float64) - x) <= bound).all()


def test_dequantize_values():
    q = np.array([[1, -2], [127, 0]], np.int8)
    np.testing.assert_array_equal(ref.dequantize(q, f32([[0.5], [2.0]]), "per_token"),
                                  [[0.5, -1.0], [254.0, 0.0]])
    np.testing.assert_array_equal(ref.dequantize(q, f32([[0.5, 2.0]]), "per_channel"),
                                  [[0.5, -4.0], [63.5, 0.0]])


def test_quantize_argument_errors():
    x = f32([[1.0, 2.0]])
    with pytest.raises(ValueError, match="2-D"):
        ref.quantize(np.ones(3, np.float32), "per_block")
    with pytest.raises(ValueError, match="2-D"):
        ref.quantize(np.ones((2, 2, 2), np.float32), "per_block")
    with pytest.raises(ValueError, match="granularity"):
        ref.quantize(x, "per_row")
    with pytest.raises(ValueError, match="rounding"):
        ref.quantize(x, "per_block", "rtz")
    with pytest.raises(ValueError, match="shape"):
        ref.quantize(x, "per_token", scale=f32([[1.0, 1.0]]))
    with pytest.raises(ValueError, match="float32"):
        ref.quantize(x, "per_block", scale=np.ones((1, 1)))
    with pytest.raises(ValueError, match="float16 or float32"):
        ref.quantize(np.ones((2, 2), np.int32), "per_block")
    with pytest.raises(ValueError, match="qmax"):
        ref.quantize(x, "per_block", qmax=128)
    with pytest.raises(ValueError, match="shape"):
        ref.dequantize(np.ones((2, 3), np.int8), f32([[1.0, 1.0]]), "per_channel")


# --------------------------------------------------------------------------- int8 matmuls

def _python_dot(a: list, b: list) -> list:
    """lhs (M x K) times rhs (N x K)^T with Python integers."""
    return [[sum(x * y for x, y in zip(row, col)) for col in b] for row in a]


@pytest.mark.parametrize("lhs_contract,rhs_contract", [(1, 1), (0, 0), (1, 0), (0, 1)])
def test_int8_dot_exact_in_every_layout(lhs_contract, rhs_contract):
    rng = np.random.default_rng(3)
    a = rng.integers(-128, 128, (5, 17), dtype=np.int8)   # M x K
    b = rng.integers(-128, 128, (4, 17), dtype=np.int8)   # N x K
    a[0, :] = -128
    b[0, :] = -128                                         # 17 * 16384 each
    expected = _python_dot(a.tolist(), b.tolist())
    lhs = a if lhs_contract == 1 else np.ascontiguousarray(a.T)
    rhs = b if rhs_contract == 1 else np.ascontiguousarray(b.T)
    dot = ref.int8_dot(lhs, rhs, lhs_contract, rhs_contract)
    assert dot.dtype == np.int32 and dot.shape == (5, 4)
    assert dot.tolist() == expected
    assert dot[0, 0] == 17 * 16384


def test_int8_dot_contraction_limit():
    k = 131072
    ones = np.full((1, k), 127, np.int8)
    assert ref.int8_dot(ones, ones)[0, 0] == 127 * 127 * k == 2_114_060_288
    with pytest.raises(ValueError, match="131072"):
        ref.int8_dot(np.ones((1, k + 1), np.int8), np.ones((1, k + 1), np.int8))
    with pytest.raises(ValueError, match="131072"):
        ref.qmatmul(np.ones((1, k + 1), np.int8), f32([[1.0]]),
                    np.ones((1, k + 1), np.int8), f32([[1.0]]))
    lows = np.full((1, k), -128, np.int8)   # 2^14 * 2^17 = 2^31 does not fit int32
    with pytest.raises(ValueError, match="int32"):
        ref.int8_dot(lows, lows)


def test_qmatmul_scales_contract_1_1():
    lhs = np.array([[1, 2], [3, 4]], np.int8)     # M x K
    rhs = np.array([[1, 0], [0, 1]], np.int8)     # N x K: dot = lhs
    out = ref.qmatmul(lhs, f32([[0.5], [2.0]]), rhs, f32([[0.25]]))
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, [[0.125, 0.25], [1.5, 2.0]])
    out = ref.qmatmul(lhs, f32([[0.5], [2.0]]), rhs, f32([[0.25]]), acc=np.ones((2, 2), np.float32))
    np.testing.assert_array_equal(out, [[1.125, 1.25], [2.5, 3.0]])
    out = ref.qmatmul(lhs, f32([[1.0]]), rhs, f32([[1.0], [-1.0]]))   # per-row rhs scale
    np.testing.assert_array_equal(out, [[1.0, -2.0], [3.0, -4.0]])


def test_qmatmul_scales_contract_0_0_and_1_0():
    lhs = np.array([[1, 2], [3, 4]], np.int8)     # K x M: lhs^T = [[1, 3], [2, 4]]
    rhs = np.array([[1, 0], [0, 1]], np.int8)     # K x N
    out = ref.qmatmul(lhs, f32([[1.0, 10.0]]), rhs, f32([[1.0, 0.5]]), 0, 0)
    np.testing.assert_array_equal(out, [[1.0, 1.5], [20.0, 20.0]])
    # contract(1, 0): lhs @ rhs with rhs = [[0, 1], [1, 0]] swaps the columns.
    swap = np.array([[0, 1], [1, 0]], np.int8)
    out = ref.qmatmul(lhs, f32([[1.0], [2.0]]), swap, f32([[1.0, 3.0]]), 1, 0)
    np.testing.assert_array_equal(out, [[2.0, 3.0], [8.0, 18.0]])


def test_qmatmul_row_and_column_scales_with_acc():
    a = np.array([[1, 2], [3, 4]], np.int8)
    b = np.array([[1, 0], [0, 1], [1, 1]], np.int8)
    out = ref.qmatmul(a, f32([[2.0], [0.5]]), b, f32([[1.0], [10.0], [100.0]]),
                      acc=np.ones((2, 3)))
    assert out.tolist() == [[1 + 2 * 1, 1 + 4 * 10, 1 + 6 * 100],
                            [1 + 1.5 * 1, 1 + 2 * 10, 1 + 3.5 * 100]]


def test_qmatmul_scale_errors():
    a = np.ones((2, 3), np.int8)
    with pytest.raises(ValueError, match="scale varies along the contracted dimension"):
        ref.qmatmul(a, f32([[1.0, 1.0, 1.0]]), a, f32([[1.0]]))          # (1, K)
    with pytest.raises(ValueError, match="scale varies along the contracted dimension"):
        ref.qmatmul(a, f32([[1.0]]), np.ones((3, 2), np.int8), f32([[1.0], [1.0], [1.0]]), 1, 0)
    p = np.ones((4, 3), np.int8)                  # contract(0, 0): K = 4 rows
    with pytest.raises(ValueError, match="scale varies along the contracted dimension"):
        ref.qmatmul(p, np.ones((4, 1), np.float32), p, f32([[1.0]]), 0, 0)
    with pytest.raises(ValueError, match="size 1 or 2"):
        ref.qmatmul(a, f32([[1.0], [1.0], [1.0]]), a, f32([[1.0]]))
    with pytest.raises(ValueError, match="contracted sizes differ"):
        ref.qmatmul(a, f32([[1.0]]), a, f32([[1.0]]), 1, 0)
    with pytest.raises(ValueError, match="int8"):
        ref.int8_dot(a.astype(np.int16), a)
    with pytest.raises(ValueError, match="acc"):
        ref.qmatmul(a, f32([[1.0]]), a, f32([[1.0]]), acc=np.zeros((3, 3)))


def test_qmatmul_of_quantized_tiles_approximates_float_product():
    rng = np.random.default_rng(11)
    a = rng.standard_normal((16, 64)).astype(np.float32)
    b = rng.standard_normal((8, 64)).astype(np.float32)
    qa, sa = ref.quantize(a, "per_token")
    qb, sb = ref.quantize(b, "per_token")
    out = ref.qmatmul(qa, sa, qb, sb)
    exact = a.astype(np.float64) @ b.astype(np.float64).T
    # a.b - qa.qb sa sb = sum_k (a - â) b + â (b - b̂), each factor within half a step.
    a_hat = ref.dequantize(qa, sa, "per_token").astype(np.float64)
    bound = (sa / 2) * np.abs(b).sum(axis=1) + np.abs(a_hat).sum(axis=1, keepdims=True) * (sb.T / 2)
    assert (np.abs(out - exact) <= bound * 1.001).all()


# --------------------------------------------------------------------------- 16-bit matmul

def test_matmul_contracts_the_named_dimensions():
    a = np.array([[1, 2], [3, 4]], np.float16)
    assert ref.matmul(a, a, 1, 0).tolist() == [[7, 10], [15, 22]]   # a @ a
    assert ref.matmul(a, a, 0, 0).tolist() == [[10, 14], [14, 20]]  # a.T @ a
    assert ref.matmul(a, a, 0, 1).tolist() == [[7, 15], [10, 22]]   # a.T @ a.T


def test_matmul_f16_and_bf16():
    lhs = np.array([[1.0, 2.0], [0.5, -1.0]], np.float16)
    rhs = np.array([[3.0, 1.0], [0.25, 4.0]], np.float16)
    out = ref.matmul(lhs, rhs)                  # lhs @ rhs^T
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, [[5.0, 8.25], [0.5, -3.875]])
    np.testing.assert_array_equal(ref.matmul(lhs, rhs, 1, 0), [[3.5, 9.0], [1.25, -3.5]])
    np.testing.assert_array_equal(ref.matmul(lhs, rhs, 0, 0, acc=np.ones((2, 2))),
                                  [[4.125, 4.0], [6.75, -1.0]])   # 1 + lhs^T @ rhs
    bf = ref.to_bf16(f32([[1.0 + 2**-7, 3.0]]))
    np.testing.assert_array_equal(ref.matmul(bf, bf), [[(1 + 2**-7) ** 2 + 9.0]])
    with pytest.raises(ValueError, match="bf16"):
        ref.matmul(f32([[1.0 + 2**-10]]), f32([[1.0]]))
    with pytest.raises(ValueError, match="both"):
        ref.matmul(lhs, ref.to_bf16(lhs.astype(np.float32)))



def test_matmul_int8_accumulates_exactly_in_int32_and_wraps():
    lhs = np.array([[1, -2], [127, 127]], np.int8)
    rhs = np.array([[3, 4], [-127, 127]], np.int8)
    out = ref.matmul(lhs, rhs)                  # lhs @ rhs^T, exact
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, [[-5, -381], [889, 0]])
    acc = np.array([[1, 2], [3, np.iinfo(np.int32).max]], np.int32)
    summed = ref.matmul(lhs, rhs, acc=acc)
    assert summed.dtype == np.int32
    # The last sum is int32 max + 0; the one before it crosses nothing.
    np.testing.assert_array_equal(summed, [[-4, -379], [892, np.iinfo(np.int32).max]])
    # Past int32 max the sum wraps modulo 2^32, as the tensor cores' does.
    top = np.full((1, 1), np.iinfo(np.int32).max, np.int32)
    one = np.ones((1, 1), np.int8)
    assert ref.matmul(one, one, acc=top)[0, 0] == np.iinfo(np.int32).min
    with pytest.raises(ValueError, match="acc must be int32"):
        ref.matmul(lhs, rhs, acc=np.zeros((2, 2)))


# --------------------------------------------------------------------------- softmax

def _assert_stats(got: tuple, expected: tuple) -> None:
    for g, e in zip(got, expected):
        assert g.dtype == np.float64 and g.shape == (1, 1)
        assert g[0, 0] == e


def test_softmax_update_first_and_later_steps():
    m0, l0 = np.array([[-INF]]), np.array([[0.0]])
    p, m1, l1, alpha, p_max = ref.softmax_update(np.array([[0.0, 1.0]]), m0, l0)
    # rowmax 1, base 1: p = [2^-1, 2^0], alpha = 2^-inf.
    np.testing.assert_array_equal(p, [[0.5, 1.0]])
    _assert_stats((m1, l1, alpha, p_max), (1.0, 1.5, 0.0, 1.0))
    # New maximum 3: alpha = 2^(1-3) = 0.25, p = [2^0, 2^-1], l = 0.25*1.5 + 1.5.
    p, m2, l2, alpha, p_max = ref.softmax_update(np.array([[3.0, 2.0]]), m1, l1)
    np.testing.assert_array_equal(p, [[1.0, 0.5]])
    _assert_stats((m2, l2, alpha, p_max), (3.0, 1.875, 0.25, 1.0))
    # A block below the running max (with scale 0.5: t = [0, -1]): alpha 1,
    # p = [2^-3, 2^-4], p_max = 2^-3.
    p, m3, l3, alpha, p_max = ref.softmax_update(np.array([[0.0, -2.0]]), m2, l2, scale=0.5)
    np.testing.assert_array_equal(p, [[0.125, 0.0625]])
    _assert_stats((m3, l3, alpha, p_max), (3.0, 2.0625, 1.0, 0.125))


def test_softmax_update_rescales_the_running_sum():
    # rowmax 3 over m = 1: alpha = 2^-2, p = [1, 2^-2], l = 0.25 * 1.5 + 1.25.
    p, m, l, alpha, pmax = ref.softmax_update(
        np.array([[3.0, 1.0]]), np.array([[1.0]]), np.array([[1.5]]))
    assert p.tolist() == [[1.0, 0.25]]
    assert (m.item(), alpha.item(), l.item(), pmax.item()) == (3.0, 0.25, 1.625, 1.0)


def test_softmax_update_fully_masked_row():
    s = np.array([[-INF, -INF, -INF], [2.0, -INF, 1.0]])
    m, l = np.full((2, 1), -INF), np.zeros((2, 1))
    p, new_max, new_sum, alpha, p_max = ref.softmax_update(s, m, l)
    np.testing.assert_array_equal(p, [[0.0, 0.0, 0.0], [1.0, 0.0, 0.5]])
    np.testing.assert_array_equal(new_max, [[-INF], [2.0]])
    np.testing.assert_array_equal(new_sum, [[0.0], [1.5]])
    np.testing.assert_array_equal(alpha, [[0.0], [0.0]])
    np.testing.assert_array_equal(p_max, [[0.0], [1.0]])
    # The masked row's first finite block later starts it normally.
    p, new_max, new_sum, alpha, _ = ref.softmax_update(np.array([[1.0], [2.0]]), new_max, new_sum)
    np.testing.assert_array_equal(p, [[1.0], [1.0]])
    np.testing.assert_array_equal(new_sum, [[1.0], [2.5]])
    np.testing.assert_array_equal(alpha, [[0.0], [1.0]])


def test_softmax_update_chained_blocks_equal_full_softmax():
    rng = np.random.default_rng(5)
    d = 64
    scale = math.log2(math.e) / math.sqrt(d)
    s = rng.standard_normal((4, 96)) * 8
    s[:, 90:] = -INF                              # a masked key tail
    m, l = np.full((4, 1), -INF), np.zeros((4, 1))
    blocks = []
    for start in range(0, 96, 32):
        p, m, l, alpha, _ = ref.softmax_update(s[:, start:start + 32], m, l, scale)
        blocks = [b * alpha for b in blocks] + [p]
    online = np.concatenate(blocks, axis=1) / l
    z = s / math.sqrt(d)                          # natural-log softmax of the whole row
    e = np.exp(z - z.max(axis=1, keepdims=True))
    np.testing.assert_allclose(online, e / e.sum(axis=1, keepdims=True), rtol=1e-12, atol=1e-300)
    assert (online[:, 90:] == 0).all()
    # Equivalently: exp2(t - final max) / final sum.
    np.testing.assert_allclose(np.exp2(s * scale - m) / l, online, rtol=1e-12)


def test_softmax_update_shape_errors():
    with pytest.raises(ValueError, match="m must have shape"):
        ref.softmax_update(np.zeros((2, 3)), np.zeros((1, 2)), np.zeros((2, 1)))


# --------------------------------------------------------------------------- tile ops

def test_smooth():
    x = np.array([[1.0, 2.0], [3.0, 6.0]], np.float16)
    smoothed, mean = ref.smooth(x)                # over tokens (rows)
    assert smoothed.dtype == mean.dtype == np.float64
    np.testing.assert_array_equal(mean, [[2.0, 4.0]])
    np.testing.assert_array_equal(smoothed, [[-1.0, -2.0], [1.0, 2.0]])
    smoothed, mean = ref.smooth(x, axis=1)
    np.testing.assert_array_equal(mean, [[1.5], [4.5]])
    np.testing.assert_array_equal(smoothed, [[-0.5, 0.5], [-1.5, 1.5]])
    rng = np.random.default_rng(2)
    k = (rng.standard_normal((64, 32)) + rng.uniform(-5, 5, (1, 32))).astype(np.float32)
    smoothed, _ = ref.smooth(k, axis=0)
    assert np.abs(smoothed.mean(axis=0)).max() < 1e-12
    with pytest.raises(ValueError, match="axis"):
        ref.smooth(x, axis=2)


def test_smooth_removes_the_token_mean():
    k = np.array([[10.0, 1.0], [12.0, -1.0]])
    ks, mean = ref.smooth(k, axis=0)
    assert mean.tolist() == [[11.0, 0.0]]
    assert ks.tolist() == [[-1.0, 1.0], [1.0, -1.0]]


def test_reduce_float32():
    x = f32([[1.0, -5.0], [3.0, 2.0]])
    assert ref.reduce(x, "sum", 1).tolist() == [[-4.0], [5.0]]
    assert ref.reduce(x, "max", 0).tolist() == [[3.0, 2.0]]
    assert ref.reduce(x, "min", 1).tolist() == [[-5.0], [2.0]]
    assert ref.reduce(x, "absmax", 1).tolist() == [[5.0], [3.0]]


def test_reduce():
    x = np.array([[1.0, -3.0], [2.0, 0.5]], np.float16)
    s = ref.reduce(x, "sum", 0)
    assert s.dtype == np.float64
    np.testing.assert_array_equal(s, [[3.0, -2.5]])
    mx = ref.reduce(x, "max", 1)
    assert mx.dtype == np.float16
    np.testing.assert_array_equal(mx, [[1.0], [2.0]])
    np.testing.assert_array_equal(ref.reduce(x, "min", 0), [[1.0, -3.0]])
    np.testing.assert_array_equal(ref.reduce(x, "absmax", 1), [[3.0], [2.0]])
    # float16 accumulation would stick at 2048 (2049 is not a float16).
    assert ref.reduce(np.array([[2048, 1, 1, 1, 1]], np.float16), "sum", 1)[0, 0] == 2052.0
    assert np.isnan(ref.reduce(f32([[1.0, np.nan]]), "max", 1)[0, 0])
    assert ref.reduce(np.array([[-128, 5]], np.int8), "absmax", 1)[0, 0] == 128
    assert ref.reduce(np.array([[100, 100]], np.int8), "sum", 1)[0, 0] == 200
    with pytest.raises(ValueError, match="reduction"):
        ref.reduce(x, "mean", 0)


def test_broadcast():
    col = f32([[1.0], [2.0]])
    np.testing.assert_array_equal(ref.broadcast(col, (2, 3)), [[1, 1, 1], [2, 2, 2]])
    np.testing.assert_array_equal(ref.broadcast(f32([[7.0]]), (2, 2)), [[7, 7], [7, 7]])
    out = ref.broadcast(f32([[1.0, 2.0]]), (2, 2))
    out[0, 0] = 5.0                                # a fresh, writable array
    with pytest.raises(ValueError, match="only size-1"):
        ref.broadcast(np.ones((2, 3)), (3, 3))
    with pytest.raises(ValueError, match="2 entries"):
        ref.broadcast(col, (2,))


def test_grouped_reduce_and_broadcast():
    x = f32(np.arange(16).reshape(2, 8) * [[1], [-1]])
    np.testing.assert_array_equal(ref.group_index(0b110, 8), [0, 0, 1, 1, 2, 2, 3, 3])
    np.testing.assert_array_equal(ref.group_index(0b101, 8), [0, 1, 0, 1, 2, 3, 2, 3])
    # Columns with equal (c // 2) % 2: {0, 1, 4, 5} and {2, 3, 6, 7}.
    np.testing.assert_array_equal(ref.reduce(x, "max", 1, groups=0b10), [[5, 7], [-8, -10]])
    np.testing.assert_array_equal(ref.reduce(x, "sum", 0, groups=None), [[-8] * 8])
    np.testing.assert_array_equal(ref.reduce(f32(np.arange(8)[:, None]), "sum", 0, groups=0b1),
                                  [[12], [16]])
    np.testing.assert_array_equal(ref.broadcast(f32([[1, 2]]), (2, 8), groups=0b10),
                                  [[1, 1, 2, 2, 1, 1, 2, 2]] * 2)
    with pytest.raises(ValueError, match="some, not all"):
        ref.reduce(x, "max", 1, groups=0b111)
    with pytest.raises(ValueError, match="power-of-two extent"):
        ref.reduce(f32(np.ones((2, 6))), "max", 1, groups=0b10)
    with pytest.raises(ValueError, match="take 2 entries"):
        ref.broadcast(f32([[1, 2, 3, 4]]), (2, 8), groups=0b10)
    with pytest.raises(ValueError, match="neither 1 nor"):
        ref.broadcast(f32([[1, 2]]), (2, 2), groups=0b1)


def test_iota():
    rows = ref.iota((2, 3), 0)
    assert rows.dtype == np.int32
    np.testing.assert_array_equal(rows, [[0, 0, 0], [1, 1, 1]])
    np.testing.assert_array_equal(ref.iota((2, 3), 1), [[0, 1, 2], [0, 1, 2]])
    np.testing.assert_array_equal(ref.iota((3, 1), 0), [[0], [1], [2]])


# --------------------------------------------------------------------------- memory

def _memory() -> np.ndarray:
    """A 3 x 4 row-major matrix holding 1..12 (element k holds k + 1)."""
    return np.arange(1, 13, dtype=np.float32)


def test_load_masks_tails_and_negative_offsets():
    buf = _memory()
    tail = ref.load(buf, (1, 2), (4, 1), (3, 4), (3, 3))
    assert tail.dtype == np.float32
    np.testing.assert_array_equal(tail, [[7, 8, 0], [11, 12, 0], [0, 0, 0]])
    np.testing.assert_array_equal(ref.load(buf, (-1, -1), (4, 1), (3, 4), (2, 3)),
                                  [[0, 0, 0], [0, 1, 2]])
    # Bounds narrower than the memory: column 3 is outside.
    np.testing.assert_array_equal(ref.load(buf, (0, 2), (4, 1), (3, 3), (1, 2)), [[3, 0]])
    # Strides (1, 4) read the transpose.
    np.testing.assert_array_equal(ref.load(buf, (0, 0), (1, 4), (4, 3), (4, 3)),
                                  [[1, 5, 9], [2, 6, 10], [3, 7, 11], [4, 8, 12]])
    ints = ref.load(np.arange(4, dtype=np.int8), (0, 0), (2, 1), (2, 2), (3, 2))
    assert ints.dtype == np.int8
    np.testing.assert_array_equal(ints, [[0, 1], [2, 3], [0, 0]])


def test_load_tail_and_negative_row_offset():
    mem = np.arange(12, dtype=np.float32)        # a 3x4 row-major matrix holding 0..11
    t = ref.load(mem, offsets=(2, 2), strides=(4, 1), bounds=(3, 4), shape=(2, 3))
    assert t.tolist() == [[10, 11, 0], [0, 0, 0]]
    t = ref.load(mem, offsets=(-1, 0), strides=(4, 1), bounds=(3, 4), shape=(2, 2))
    assert t.tolist() == [[0, 0], [0, 1]]


def test_store_writes_only_in_bounds():
    buf = np.zeros(12, np.float32)
    ref.store(buf, np.full((2, 3), 5.0, np.float32), (2, 2), (4, 1), (3, 4))
    expected = np.zeros(12, np.float32)
    expected[[10, 11]] = 5.0                     # row 2, columns 2 and 3
    np.testing.assert_array_equal(buf, expected)
    ref.store(buf, f32([[1.0, 2.0], [3.0, 4.0]]), (-1, -1), (4, 1), (3, 4))
    expected[0] = 4.0                            # only value[1, 1] lands, at (0, 0)
    np.testing.assert_array_equal(buf, expected)


def test_store_atomic_add():
    buf = _memory()
    value = f32([[0.5, 0.25], [1.0, 2.0]])
    ref.store(buf, value, (1, 3), (4, 1), (3, 4), atomic_add=True)
    ref.store(buf, value, (1, 3), (4, 1), (3, 4), atomic_add=True)
    expected = _memory()
    expected[7] += 1.0                           # (1, 3) gets 0.5 twice
    expected[11] += 2.0                          # (2, 3) gets 1.0 twice
    np.testing.assert_array_equal(buf, expected)
    # Stride 0: every element lands on one address and all add up.
    ref.store(buf, value, (0, 0), (0, 0), (2, 2), atomic_add=True)
    assert buf[0] == 1.0 + 3.75
    with pytest.raises(ValueError, match="atomic_add"):
        ref.store(np.zeros(4, np.float16), np.ones((1, 1), np.float16), (0, 0), (1, 1),
                  (1, 1), atomic_add=True)
    with pytest.raises(ValueError, match="dtype"):
        ref.store(np.zeros(4, np.float32), np.ones((1, 1)), (0, 0), (1, 1), (1, 1))


def test_leading_dimensions():
    """Leading dimensions (a batch and a head) pick one index each and move the
    base; an index outside its bound empties the tile (loads read 0, stores
    drop it)."""
    buf = np.arange(2 * 3 * 4, dtype=np.float32)  # (2, 3, 4): batch, row, col
    tile = ref.load(buf, (1, 1, 1), (12, 4, 1), (2, 3, 4), (2, 2))
    np.testing.assert_array_equal(tile, [[17, 18], [21, 22]])
    np.testing.assert_array_equal(tile, ref.load(buf[12:], (1, 1), (4, 1), (3, 4), (2, 2)))
    for batch in (-1, 2):
        assert not ref.load(buf, (batch, 0, 0), (12, 4, 1), (2, 3, 4), (2, 2)).any()
    heads = ref.load(buf, (1, 0, 2, 0), (12, 0, 4, 1), (2, 5, 3, 4), (1, 4))  # stride 0
    np.testing.assert_array_equal(heads, [[20, 21, 22, 23]])
    out = np.zeros(24, np.float32)
    ref.store(out, np.ones((1, 2), np.float32), (1, 2, 1), (12, 4, 1), (2, 3, 4))
    assert out.nonzero()[0].tolist() == [21, 22]
    ref.store(out, np.ones((1, 2), np.float32), (2, 0, 0), (12, 4, 1), (2, 3, 4))
    assert out.sum() == 2
    with pytest.raises(ValueError, match="2 to 5 entries each, as many of each, got 3, 2 and 3"):
        ref.load(buf, (0, 0, 0), (4, 1), (2, 3, 4), (1, 1))
    with pytest.raises(ValueError, match="got 6, 6 and 6"):
        ref.load(buf, (0,) * 6, (1,) * 6, (1,) * 6, (1, 1))


def test_memory_errors():
    with pytest.raises(ValueError, match="1-D"):
        ref.load(np.zeros((2, 2)), (0, 0), (2, 1), (2, 2), (2, 2))
    with pytest.raises(ValueError, match="outside the buffer"):
        ref.load(np.zeros(4), (0, 0), (4, 1), (2, 4), (2, 4))


def test_unsigned_quantize_and_product():
    """The unsigned scheme: scale absmax / 255, values in [0, 255] (negative
    inputs 0), uint8 storage; qmax up to 255; its promise under
    saturate=False is [0, qmax]; int8_dot reads a uint8 lhs as unsigned, with
    a contraction of at most 65536."""
    from sage.reference import MAX_UINT8_CONTRACTION, int8_dot, quantize
    x = np.array([[255.0, 127.6, -3.0, 0.4]], np.float32)
    q, s = quantize(x, "per_token", unsigned=True)
    assert q.dtype == np.uint8 and s[0, 0] == np.float32(1.0)
    np.testing.assert_array_equal(q, [[255, 128, 0, 0]])
    with pytest.raises(ValueError, match=r"reaches \[-6, 510\], outside \[0, 255\]"):
        quantize(x * 2, "per_token", scale=s, saturate=False, unsigned=True)
    with pytest.raises(ValueError, match=r"qmax must be an integer in \[1, 255\]"):
        quantize(x, "per_token", qmax=256, unsigned=True)
    rhs = np.array([[1, -1, 2, 3]], np.int8)
    assert int8_dot(q, rhs)[0, 0] == 255 - 128
    with pytest.raises(ValueError, match="rhs must be int8"):
        int8_dot(q, q)
    long = np.zeros((1, MAX_UINT8_CONTRACTION + 1), np.uint8)
    with pytest.raises(ValueError, match="at most 65536"):
        int8_dot(long, long.astype(np.int8))


def test_unsaturated_quantize_checks_its_promise():
    """saturate=False keeps every value of an in-range tile and refuses one whose
    rounded value leaves [-127, 127] (the GPU would wrap it)."""
    from sage.reference import quantize
    x = np.array([[0.0, 0.5, 1.0, -1.0]], np.float32)
    scale = np.array([[1.0 / 127]], np.float32)
    q, _ = quantize(x, "per_token", scale=scale, saturate=False)
    np.testing.assert_array_equal(q, quantize(x, "per_token", scale=scale)[0])
    with pytest.raises(ValueError, match=r"saturate=False: round\(x \* inv\) reaches "
                       r"\[-254, 254\], outside \[-127, 127\]"):
        quantize(x * 2, "per_token", scale=scale, saturate=False)
    with pytest.raises(ValueError, match="needs a given scale"):
        quantize(x, "per_token", saturate=False)
