"""The reference semantics on hand-checked cases.

Expected numbers are written out, not recomputed with the formula under test.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from sage import reference as ref


def f32(*values) -> np.ndarray:
    return np.array([values], dtype=np.float32)


# --- quantize: scale, rounding, clamping ------------------------------------


def test_absmax_127_gives_unit_scale_and_ties_round_per_mode():
    x = f32(0.5, 1.5, 2.5, -2.5, -0.5, 127.0)
    q, s = ref.quantize(x, "per_block", "rne")
    assert s.tolist() == [[1.0]]
    assert q.tolist() == [[0, 2, 2, -2, 0, 127]]  # ties to even
    q, _ = ref.quantize(x, "per_block", "rna")
    assert q.tolist() == [[1, 2, 3, -3, -1, 127]]  # ties away from zero


def test_values_at_plus_minus_absmax_map_to_plus_minus_127():
    x = f32(2.54, -2.54, 1.27, 0.0)
    q, s = ref.quantize(x, "per_block")
    assert s[0, 0] == np.float32(2.54) / np.float32(127)
    assert q.tolist() == [[127, -127, 64, 0]]  # 1.27 * (1/s) = 63.5000.. -> 64


def test_q_never_reaches_minus_128():
    x = f32(-3.0, 1.0)
    q, _ = ref.quantize(x, "per_block")
    assert q.min() == -127
    q, _ = ref.quantize(x, "per_block", scale=np.array([[0.001]], np.float32))
    assert q.tolist() == [[-127, 127]]  # clamped, not wrapped


def test_scale_and_reciprocal_are_float32_steps():
    # absmax 3: x = fl32(3 * 5 / 254) is 2.50000007 steps in exact arithmetic
    # (rounds to 3), but the dialect's f32 steps give x * inv == 2.5 exactly,
    # a tie that rounds to even: 2.
    x = np.array([[3.0, np.float32(3.0) * np.float32(5) / np.float32(254)]], np.float32)
    q, s = ref.quantize(x, "per_block")
    assert s[0, 0] == np.float32(3) / np.float32(127)
    assert float(x[0, 1]) * 127 / 3 > 2.5
    assert q.tolist() == [[127, 2]]


def test_all_zero_block_gives_zero_scale_without_warnings():
    x = np.zeros((4, 8), np.float32)
    x[1, 2] = -0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        q, s = ref.quantize(x, "per_block")
        d = ref.dequantize(q, s, "per_block")
    assert s.tolist() == [[0.0]]
    assert not q.any() and not d.any()
    assert not np.signbit(q.astype(np.float32)).any()


def test_negative_zero_in_a_nonzero_block_quantizes_to_zero():
    q, s = ref.quantize(f32(-0.0, 1.0), "per_block")
    assert q.tolist() == [[0, 127]]


def test_nan_and_inf_show_in_the_scale():
    q, s = ref.quantize(f32(1.0, np.nan), "per_block")
    assert np.isnan(s[0, 0])
    _, s = ref.quantize(f32(1.0, np.inf), "per_block")
    assert np.isinf(s[0, 0])


def test_granularities_give_independent_scales():
    x = np.array([[1.0, -4.0], [0.5, 0.25]], np.float32)
    q, s = ref.quantize(x, "per_token")
    assert s.shape == (2, 1)
    assert s[:, 0].tolist() == [np.float32(4) / 127, np.float32(0.5) / 127]
    assert q.tolist() == [[32, -127], [127, 64]]
    q, s = ref.quantize(x, "per_channel")
    assert s.shape == (1, 2)
    assert q.tolist() == [[127, -127], [64, 8]]


def test_float16_input_is_exact():
    x = np.array([[0.1, -0.2]], np.float16)
    q, s = ref.quantize(x, "per_block")
    assert s[0, 0] == np.float32(np.float16(0.2)) / np.float32(127)
    assert q.tolist() == [[64, -127]]


def test_given_scale_is_used_and_returned():
    # The forward's P~ scale: row max / 127 taken from the softmax maxima.
    p = np.array([[1.0, 0.5, 0.25], [0.5, 0.125, 0.0]], np.float32)
    given = np.array([[1.0], [0.5]], np.float32) / np.float32(127)
    q, s = ref.quantize(p, "per_token", scale=given)
    assert s is not given and np.array_equal(s, given)
    assert q.tolist() == [[127, 64, 32], [127, 32, 0]]


def test_dequantize_error_is_at_most_half_a_step():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 32)).astype(np.float32)
    for granularity in ref.GRANULARITIES:
        q, s = ref.quantize(x, granularity)
        err = np.abs(ref.dequantize(q, s, granularity) - x)
        assert np.all(err <= np.broadcast_to(s, x.shape) * 0.5000001)


def test_bad_arguments_are_rejected_with_clear_errors():
    x = np.ones((2, 2), np.float32)
    with pytest.raises(ValueError, match="unknown granularity 'per_row'"):
        ref.quantize(x, "per_row")
    with pytest.raises(ValueError, match="unknown rounding 'floor'"):
        ref.quantize(x, "per_block", "floor")
    with pytest.raises(ValueError, match=r"per_token scales of a \(2, 2\) tile have shape \(2, 1\)"):
        ref.quantize(x, "per_token", scale=np.ones((1, 1), np.float32))
    with pytest.raises(ValueError, match="non-empty 2-D array"):
        ref.quantize(np.ones(3, np.float32))


# --- matmuls -------------------------------------------------------------------


@pytest.mark.parametrize("lc,rc", [(1, 1), (0, 0), (1, 0), (0, 1)])
def test_int8_dot_is_exact_in_every_layout(lc, rc):
    rng = np.random.default_rng(lc * 2 + rc)
    a = rng.integers(-127, 128, (5, 7), dtype=np.int8)
    b = rng.integers(-127, 128, (6, 7) if rc == 1 else (7, 6), dtype=np.int8)
    a_op = a if lc == 1 else a.T.copy()
    dot = ref.int8_dot(a_op, b, lc, rc)
    bb = b if rc == 1 else b.T
    expected = [[sum(int(a[i, k]) * int(bb[j, k]) for k in range(7)) for j in range(6)]
                for i in range(5)]
    assert dot.dtype == np.int32 and dot.tolist() == expected


def test_int8_dot_at_the_extremes_does_not_overflow():
    a = np.full((1, 131072), -127, np.int8)
    assert ref.int8_dot(a, a)[0, 0] == 127 * 127 * 131072
    big = np.ones((1, 131073), np.int8)
    with pytest.raises(ValueError, match="may overflow int32"):
        ref.int8_dot(big, big)


def test_qmatmul_applies_row_and_column_scales():
    a = np.array([[1, 2], [3, 4]], np.int8)
    b = np.array([[1, 0], [0, 1], [1, 1]], np.int8)
    out = ref.qmatmul(a, np.array([[2.0], [0.5]], np.float32), b,
                      np.array([[1.0], [10.0], [100.0]], np.float32),
                      acc=np.ones((2, 3)))
    assert out.tolist() == [[1 + 2 * 1, 1 + 4 * 10, 1 + 6 * 100],
                            [1 + 1.5 * 1, 1 + 2 * 10, 1 + 3.5 * 100]]


def test_qmatmul_rejects_a_scale_along_the_contraction():
    p = np.ones((4, 3), np.int8)
    with pytest.raises(ValueError, match="varies along the contracted dimension"):
        ref.qmatmul(p, np.ones((4, 1), np.float32), p, np.ones((1, 1), np.float32), 0, 0)


def test_matmul_contracts_the_named_dimensions():
    a = np.array([[1, 2], [3, 4]], np.float16)
    assert ref.matmul(a, a, 1, 0).tolist() == [[7, 10], [15, 22]]  # a @ a
    assert ref.matmul(a, a, 0, 0).tolist() == [[10, 14], [14, 20]]  # a.T @ a


# --- online softmax ---------------------------------------------------------------


def test_softmax_update_first_step_by_hand():
    p, m, l, alpha, pmax = ref.softmax_update(
        np.array([[0.0, 1.0]]), np.array([[-np.inf]]), np.array([[0.0]]))
    assert p.tolist() == [[0.5, 1.0]]
    assert (m.item(), l.item(), alpha.item(), pmax.item()) == (1.0, 1.5, 0.0, 1.0)


def test_softmax_update_rescales_the_running_sum():
    p, m, l, alpha, pmax = ref.softmax_update(
        np.array([[3.0, 1.0]]), np.array([[1.0]]), np.array([[1.5]]))
    assert m.item() == 3.0 and alpha.item() == 0.25
    assert l.item() == 0.25 * 1.5 + 1.0 + 0.25
    assert pmax.item() == 1.0


def test_fully_masked_rows_stay_zero_without_nan():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p, m, l, alpha, pmax = ref.softmax_update(
            np.full((1, 3), -np.inf), np.array([[-np.inf]]), np.array([[0.0]]))
    assert not p.any() and m.item() == -np.inf
    assert (l.item(), alpha.item(), pmax.item()) == (0.0, 0.0, 0.0)


def test_chained_updates_equal_a_float64_softmax():
    rng = np.random.default_rng(1)
    s = rng.standard_normal((3, 96)) * 4
    scale = np.log2(np.e) / np.sqrt(64)
    m, l = np.full((3, 1), -np.inf), np.zeros((3, 1))
    acc = np.zeros((3, 96))
    for j in range(0, 96, 32):
        p, m, l, alpha, _ = ref.softmax_update(s[:, j:j + 32], m, l, scale)
        acc *= alpha
        acc[:, j:j + 32] = p
    logits = s / np.sqrt(64)
    exact = np.exp(logits - logits.max(1, keepdims=True))
    exact /= exact.sum(1, keepdims=True)
    # acc holds exp2(t - m_j) per block; bring earlier blocks to the final max.
    np.testing.assert_allclose(np.exp2(s * scale - m) / l, exact, rtol=1e-12)


# --- tiles ----------------------------------------------------------------------


def test_smooth_removes_the_token_mean():
    k = np.array([[10.0, 1.0], [12.0, -1.0]])
    ks, mean = ref.smooth(k, axis=0)
    assert mean.tolist() == [[11.0, 0.0]]
    assert ks.tolist() == [[-1.0, 1.0], [1.0, -1.0]]


def test_reduce_broadcast_iota():
    x = np.array([[1.0, -5.0], [3.0, 2.0]], np.float32)
    assert ref.reduce(x, "sum", 1).tolist() == [[-4.0], [5.0]]
    assert ref.reduce(x, "max", 0).tolist() == [[3.0, 2.0]]
    assert ref.reduce(x, "min", 1).tolist() == [[-5.0], [2.0]]
    assert ref.reduce(x, "absmax", 1).tolist() == [[5.0], [3.0]]
    assert ref.broadcast(np.array([[1], [2]]), (2, 3)).tolist() == [[1, 1, 1], [2, 2, 2]]
    with pytest.raises(ValueError, match="only size-1 dimensions expand"):
        ref.broadcast(np.ones((2, 2)), (2, 4))
    assert ref.iota((2, 3), 1).tolist() == [[0, 1, 2], [0, 1, 2]]
    assert ref.iota((2, 3), 0).tolist() == [[0, 0, 0], [1, 1, 1]]


def test_masked_load_and_store_respect_bounds():
    mem = np.arange(12, dtype=np.float32)  # a 3x4 row-major matrix
    t = ref.load(mem, offsets=(2, 2), strides=(4, 1), bounds=(3, 4), shape=(2, 3))
    assert t.tolist() == [[10, 11, 0], [0, 0, 0]]
    t = ref.load(mem, offsets=(-1, 0), strides=(4, 1), bounds=(3, 4), shape=(2, 2))
    assert t.tolist() == [[0, 0], [0, 1]]
    out = np.zeros(12, np.float32)
    ref.store(out, np.ones((2, 3), np.float32), (2, 2), (4, 1), (3, 4))
    assert out.nonzero()[0].tolist() == [10, 11]
    ref.store(out, np.ones((2, 3), np.float32), (2, 2), (4, 1), (3, 4), atomic_add=True)
    assert out[10] == 2.0
    with pytest.raises(ValueError, match="atomic_add needs a float32 buffer"):
        ref.store(np.zeros(4, np.int32), np.ones((1, 1), np.int32), (0, 0), (1, 1),
                  (1, 1), atomic_add=True)


def test_to_bf16_rounds_to_nearest_even():
    x = np.array([1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-7), np.nan], np.float32)
    y = ref.to_bf16(x)
    assert y[:3].tolist() == [1.0, 1 + 2**-6, -(1 + 2**-7)]
    assert np.isnan(y[3])
