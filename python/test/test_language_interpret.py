"""Kernels run by the CPU interpreter, checked against float64 numpy."""

from __future__ import annotations

import numpy as np
import pytest

import sage.language as sl
from sage.reference import to_bf16
from test_language_kernels import (attention_forward, every_op, half_matmul, half_operands,
                                   quant_matmul_example, row_softmax)

RNG = np.random.default_rng(7)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def test_quant_matmul_with_tails_matches_the_quantized_product():
    m, n, k = 70, 90, 100
    a = RNG.standard_normal((m, k)).astype(np.float16)
    b = RNG.standard_normal((n, k)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float32)
    sl.interpret(quant_matmul_example.quant_matmul, (_cdiv(m, 32), _cdiv(n, 64)),
                 [a, b, c, m, n, k], dict(BLOCK_M=32, BLOCK_N=64, BLOCK_K=64))
    expected = np.zeros((m, n))
    for i in range(0, m, 32):
        for j in range(0, n, 64):
            expected[i:i + 32, j:j + 64] = quant_matmul_example.reference(
                a[i:i + 32], b[j:j + 64], 64)
    np.testing.assert_allclose(c, expected, rtol=1e-5, atol=1e-4)
    exact = a.astype(np.float64) @ b.astype(np.float64).T
    assert np.abs(c - exact).max() < 0.05 * np.abs(exact).max()


def test_example_main_passes_in_the_interpreter(monkeypatch):
    """The README's example through @sage.jit with SAGE_INTERPRET=1."""
    monkeypatch.setenv("SAGE_INTERPRET", "1")
    assert quant_matmul_example.main() == 0


@pytest.mark.parametrize("dtype", [sl.float16, sl.bfloat16])
def test_half_matmul(dtype):
    m, n, k = 50, 40, 70
    (a, b), args = half_operands(RNG, dtype, (m, k), (k, n))
    c = np.zeros((m, n), np.float32)
    sl.interpret(half_matmul, (_cdiv(m, 32), _cdiv(n, 32)), [*args, c, m, n, k],
                 dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=16))
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64),
                               rtol=1e-5, atol=1e-5)


def test_row_softmax_and_reductions():
    m, n = 45, 64
    x = (RNG.standard_normal((m, n)) * 4).astype(np.float32)
    y = np.zeros_like(x)
    stats = np.zeros((m, 2), np.float32)
    sl.interpret(row_softmax, _cdiv(m, 16), [x, y, stats, m], dict(N=n, BLOCK_M=16))
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(stats[:, 0], x.max(axis=1))
    np.testing.assert_array_equal(stats[:, 1], np.abs(x).max(axis=1))


@pytest.mark.parametrize("causal", [False, True])
def test_attention_forward_with_runtime_loop(causal):
    heads, n, n_kv, d = 2, 100, 150, 64
    if causal:
        n_kv = n
    q = RNG.standard_normal((heads, n, d)).astype(np.float16)
    k = RNG.standard_normal((heads, n_kv, d)).astype(np.float16)
    v = RNG.standard_normal((heads, n_kv, d)).astype(np.float16)
    o = np.zeros((heads, n, d), np.float32)
    lse = np.zeros((heads, n), np.float32)
    scale = d ** -0.5
    sl.interpret(attention_forward, (_cdiv(n, 32), heads), [q, k, v, o, lse, n, n_kv],
                 dict(D=d, BLOCK_M=32, BLOCK_N=64, SCALE=scale * np.log2(np.e),
                      CAUSAL=causal))
    s = np.einsum("hqd,hkd->hqk", q.astype(np.float64), k.astype(np.float64)) * scale
    if causal:
        s = np.where(np.tril(np.ones((n, n_kv), bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=2, keepdims=True))
    expected = np.einsum("hqk,hkd->hqd", p / p.sum(axis=2, keepdims=True), v.astype(np.float64))
    # INT8 Q, K, P~ and V: errors of a few percent of the output's scale.
    np.testing.assert_allclose(o, expected, atol=0.03 * np.abs(expected).max())
    expected_lse = np.log2(np.exp(s).sum(axis=2))
    np.testing.assert_allclose(lse, expected_lse, atol=0.05)


def test_every_op_runs_and_matches_its_trace_semantics():
    d, n = 32, 32
    x = RNG.standard_normal((n, d)).astype(np.float16)
    h = to_bf16(RNG.standard_normal((n, d)).astype(np.float32))
    i8 = RNG.integers(-100, 100, (n, d)).astype(np.int8)
    out = np.zeros((n, d), np.float32)
    acc = np.zeros((d, 1), np.float32)
    sl.interpret(every_op, 1, [x, sl.Buffer(h, sl.bfloat16), i8, out, acc, n, 0.5],
                 dict(D=d, SCHEME=sl.int8_per_token.with_rounding("rna")))
    assert np.isfinite(out).all() and np.isfinite(acc).all()
    assert (to_bf16(out) == out).all()  # stored through a bf16 round trip


def test_integer_division_truncates_and_pointer_offsets_work():
    def kernel(x, out, a, b):
        base = out + 1
        t = sl.full((1, 4), 0, sl.int32)
        t = sl.where(sl.iota((1, 4), 1) == 0, a // b, t)
        t = sl.where(sl.iota((1, 4), 1) == 1, a % b, t)
        t = sl.where(sl.iota((1, 4), 1) == 2, sl.load(x + 2, (1, 1), (0, 0), (1, 1), (1, 1)), t)
        t = sl.where(sl.iota((1, 4), 1) == 3, -sl.abs(t) + (a > b).to(sl.int32), t)
        sl.store(base, t, (0, 0), (1, 1), (1, 4))

    x = np.arange(5, dtype=np.int32)
    out = np.zeros(5, np.int32)
    sl.interpret(kernel, 1, [x, out, -7, 2], {})
    assert out.tolist() == [0, -3, -1, 2, 0]


def test_loop_zero_trips_and_loop_variables():
    def kernel(out, n, STEP: sl.constexpr):
        total = 0
        count = sl.zeros((1, 1), sl.int64)
        for i in sl.range(1, n, STEP):
            total = total + i
            for j in sl.range(i):
                count = count + 1
        sl.store(out, sl.splat(total.to(sl.int64), (1, 1)) * 1000 + count,
                 (0, 0), (1, 1), (1, 1))

    out = np.zeros(1, np.int64)
    sl.interpret(kernel, 1, [out, 7], dict(STEP=2))
    assert out[0] == (1 + 3 + 5) * 1000 + (1 + 3 + 5)
    sl.interpret(kernel, 1, [out, 0], dict(STEP=2))
    assert out[0] == 0


def test_leading_dimensions_and_loops_in_helpers():
    """A load with leading dimensions (batch, head) reads the tile of that
    batch and head; a loop inside a nested helper function (a persistent
    kernel's per-tile body) carries that function's values."""
    def kernel(x, out, B, H, n):
        def tile(b, h):
            acc = sl.zeros((1, 4), sl.float32)
            for i in sl.range(0, n):
                acc = acc + sl.load(x, (1, 4), (b, h, i, 0), (H * n * 4, n * 4, 4, 1),
                                    (B, H, n, 4))
            sl.store(out, acc, (b, h, 0, 0), (H * 4, 4, 1, 1), (B, H, 1, 4))

        for t in sl.range(sl.program_id(0), B * H, sl.num_programs(0)):
            tile(t // H, t % H)

    x = np.arange(2 * 3 * 5 * 4, dtype=np.float32)
    out = np.zeros(2 * 3 * 4, np.float32)
    sl.interpret(kernel, 2, [x, out, 2, 3, 5], {})
    np.testing.assert_array_equal(out.reshape(2, 3, 4), x.reshape(2, 3, 5, 4).sum(axis=2))


def test_grid_covers_three_axes():
    def kernel(out):
        p = (sl.program_id(2) * sl.num_programs(1) + sl.program_id(1)) * sl.num_programs(0) \
            + sl.program_id(0)
        sl.store(out, sl.splat(p, (1, 1)), (p, 0), (1, 1), (24, 1))

    out = np.full(24, -1, np.int32)
    sl.interpret(kernel, (2, 3, 4), [out], {})
    assert out.tolist() == list(range(24))



def test_interpreter_takes_strided_tensors_by_their_memory():
    """A strided torch tensor is handed over as its memory from its first
    element to its last, and written back there."""
    torch = pytest.importorskip("torch")
    from sage.jit.interpret import _torch_to_host
    base = torch.arange(24.0).reshape(4, 6)
    view = base[1:, 2:4].t()  # offset 8, strides (1, 6)
    host, write_back = _torch_to_host("x", view)
    np.testing.assert_array_equal(host, np.arange(8.0, 22.0))
    host[:] = -1.0
    write_back()
    assert (base[1:, 2:4] == -1).all() and base[0].eq(torch.arange(6.0)).all()


def _sigma16_pv(p, vt, o, n):
    """P (64 x 32 i8) times V from a sigma16-ordered copy: rows of V read in
    sigma16 order, stored transposed as they are, then contracted with
    ``rhs_sigma16``."""
    pt = sl.load(p, (64, 32), (0, 0), (32, 1), (64, 32))
    vs = sl.load(vt, (32, 16), (0, 0), (16, 1), (n, 16), sigma16_rows=True)
    one = sl.full((1, 1), 1.0, sl.float32)
    sl.store(vt, vs, (0, 0), (1, 32), (32, 16))  # V^T, tokens in slot order
    vq = sl.load(vt, (16, 32), (0, 0), (32, 1), (16, 32))
    sl.store(o, sl.qmatmul(pt, one, vq, one, contract=(1, 1), rhs_sigma16=True),
             (0, 0), (16, 1), (64, 16))


def test_sigma16_order_round_trip_leaves_the_product_unchanged():
    """A V stored in sigma16 order and contracted with rhs_sigma16 gives P V;
    the order itself is the documented permutation, its inverse included."""
    from sage.reference import sigma16_slot, sigma16_token
    t = np.arange(48)
    assert sorted(sigma16_slot(t)) == list(t)
    np.testing.assert_array_equal(sigma16_token(sigma16_slot(t)), t)
    np.testing.assert_array_equal(sigma16_slot(np.arange(16)),
                                  [0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15])
    p = RNG.integers(-127, 128, (64, 32)).astype(np.int8)
    v = RNG.integers(-127, 128, (32, 16)).astype(np.int8)
    vt = np.zeros(16 * 32 + 32 * 16, np.int8)
    vt[:32 * 16] = v.reshape(-1)
    o = np.zeros((64, 16), np.float32)
    # 30 valid rows: the two past the end read as 0 wherever their slots are.
    sl.interpret(_sigma16_pv, 1, [p, vt, o, 30], {})
    want = p.astype(np.int64)[:, :30] @ v.astype(np.int64)[:30]
    np.testing.assert_array_equal(o, want.astype(np.float32))


def _fma_kernel(a, out, s, N: sl.constexpr):
    """out = a * s + column offsets, one rounding (sl.fma broadcasts its operands)."""
    x = sl.load(a, (16, N), (0, 0), (N, 1), (16, N))
    col = sl.iota((16, 1), 0).to(sl.float32)
    sl.store(out, sl.fma(x, s, -col), (0, 0), (N, 1), (16, N))


def test_fma_broadcasts_and_rounds_once():
    n = 32
    x = RNG.standard_normal((16, n)).astype(np.float32)
    out = np.zeros_like(x)
    scale = np.float32(1.4426950408889634)
    sl.interpret(_fma_kernel, (1,), [x, out, scale], dict(N=n))
    exact = x.astype(np.float64) * np.float64(scale) - np.arange(16, dtype=np.float64)[:, None]
    np.testing.assert_array_equal(out, exact.astype(np.float32))
    ir = sl.trace(_fma_kernel, [sl.ArgSpec.pointer(sl.float32), sl.ArgSpec.pointer(sl.float32),
                                sl.ArgSpec.scalar(sl.float32)], dict(N=n))
    assert "math.fma" in ir

    def integers(a):
        sl.fma(sl.iota((16, 1), 0), 2, 3)

    with pytest.raises(sl.CompilationError, match="sl.fma needs float operands, got "
                                                  "tensor<16x1xi32>"):
        sl.trace(integers, [sl.ArgSpec.pointer(sl.float32)], {})


def _unsigned_pv(p, v, o, BLOCK: sl.constexpr):
    """P (non-negative) quantized to unsigned bytes per row, times INT8 V."""
    x = sl.load(p, (BLOCK, BLOCK), (0, 0), (BLOCK, 1), (BLOCK, BLOCK))
    vt = sl.load(v, (BLOCK, BLOCK), (0, 0), (BLOCK, 1), (BLOCK, BLOCK))
    p_q, p_scale = sl.quantize(x, sl.uint8_per_token)
    one = sl.full((1, 1), 1.0, sl.float32)
    sl.store(o, sl.qmatmul(p_q, p_scale, vt, one), (0, 0), (BLOCK, 1), (BLOCK, BLOCK))


def _unsigned_row_sums(p, sums, floats, BLOCK: sl.constexpr):
    """P quantized to unsigned bytes, widened (unsigned) and summed per row."""
    x = sl.load(p, (BLOCK, BLOCK), (0, 0), (BLOCK, 1), (BLOCK, BLOCK))
    p_q, _ = sl.quantize(x, sl.uint8_per_token)
    sl.store(sums, sl.sum(p_q.to(sl.int32), 1), (0, 0), (1, 0), (BLOCK, 1))
    sl.store(floats, p_q.to(sl.float32), (0, 0), (BLOCK, 1), (BLOCK, BLOCK))


def test_unsigned_bytes_widen_as_unsigned():
    """A uint8 tile widens to int32 (zero-extended) and to float32 (as
    unsigned): bytes above 127 keep their value."""
    n = 32
    p = np.abs(RNG.standard_normal((n, n))).astype(np.float32)
    sums = np.zeros((n, 1), np.int32)
    floats = np.zeros((n, n), np.float32)
    sl.interpret(_unsigned_row_sums, 1, [p, sums, floats], dict(BLOCK=n))
    scale = (np.abs(p).max(axis=1, keepdims=True) / np.float32(255)).astype(np.float32)
    q = np.clip(np.rint((p * (np.float32(1) / scale).astype(np.float32)).astype(np.float32)),
                0, 255)
    assert q.max() == 255
    np.testing.assert_array_equal(floats, q)
    np.testing.assert_array_equal(sums[:, 0], q.sum(axis=1).astype(np.int32))


def test_unsigned_quantize_and_matmul_use_the_whole_byte():
    """sl.uint8_per_token: P / (absmax / 255) rounded into [0, 255] (negative
    values to 0), and sl.qmatmul reads the bytes as unsigned: the result is
    the exact product of the unsigned values with the int8 rhs, scaled."""
    n = 32
    p = np.abs(RNG.standard_normal((n, n))).astype(np.float32)
    p[0, :4] = [-1.0, 0.0, 0.5, 2.0]  # a negative value quantizes to 0
    v = RNG.integers(-127, 128, (n, n)).astype(np.int8)
    o = np.zeros((n, n), np.float32)
    sl.interpret(_unsigned_pv, 1, [p, v, o], dict(BLOCK=n))
    scale = (np.abs(p).max(axis=1, keepdims=True) / np.float32(255)).astype(np.float32)
    inv = (np.float32(1) / scale).astype(np.float32)
    q = np.clip(np.rint((p * inv).astype(np.float32)), 0, 255)
    assert q.max() == 255 and q[0, 0] == 0
    expected = (q.astype(np.int64) @ v.astype(np.int64).T) * scale.astype(np.float64)
    np.testing.assert_allclose(o, expected, rtol=1e-6)


def _group_scale_kernel(a, s, out, N: sl.constexpr):
    """out = a * broadcast(max per column group * s): the forward's K-group pattern."""
    x = sl.load(a, (16, N), (0, 0), (N, 1), (16, N))
    scale = sl.load(s, (1, 4), (0, 0), (4, 1), (1, 4))
    g = sl.max(x, 1, groups=0b110) * scale
    sl.store(out, x * sl.broadcast(g, (16, N), groups=0b110), (0, 0), (N, 1), (16, N))


def test_grouped_reduce_and_broadcast_follow_the_bit_groups():
    n = 32
    x = RNG.standard_normal((16, n)).astype(np.float32)
    s = RNG.random((1, 4)).astype(np.float32)
    out = np.zeros_like(x)
    sl.interpret(_group_scale_kernel, (1,), [x, s, out], dict(N=n))
    group = (np.arange(n) // 2) % 4
    peaks = np.stack([x[:, group == g].max(axis=1) for g in range(4)], axis=1)
    want = x * (peaks * s)[:, group]
    np.testing.assert_array_equal(out, want.astype(np.float32))
    ir = sl.trace(_group_scale_kernel, [sl.ArgSpec.pointer(sl.float32)] * 3, dict(N=n))
    assert "sage.reduce max %" in ir and "axis 1 groups 6 : tensor<16x32xf32> -> " \
        "tensor<16x4xf32>" in ir
    assert "groups 6 : tensor<16x4xf32> -> tensor<16x32xf32>" in ir


def test_bitcast_and_floor():
    """sl.bitcast keeps the bits (an f32's exponent field read as an integer,
    a float assembled from bits), in the interpreter and the traced IR;
    sl.floor rounds toward minus infinity."""
    def kernel(x, y, z):
        t = sl.load(x, (4, 8), (0, 0), (8, 1), (4, 8))
        exponent = sl.bitcast(t, sl.int32) & 0x7F800000
        sl.store(y, sl.bitcast(exponent - (1 << 23), sl.float32), (0, 0), (8, 1), (4, 8))
        sl.store(z, sl.floor(t * 3.0), (0, 0), (8, 1), (4, 8))

    x = np.linspace(-40.0, 50.0, 32).astype(np.float32)
    x[x == 0] = 1.0
    y, z = np.zeros(32, np.float32), np.zeros(32, np.float32)
    sl.interpret(kernel, 1, [x, y, z], {})
    # The power of two at or below |x|, halved; floor(3x).
    np.testing.assert_array_equal(y, np.exp2(np.floor(np.log2(np.abs(x)))) / 2)
    np.testing.assert_array_equal(z, np.floor(x * np.float32(3)))
    ir = sl.trace(kernel, [sl.ArgSpec.pointer(sl.float32)] * 3, {})
    assert "arith.bitcast" in ir and "tensor<4x8xf32> to tensor<4x8xi32>" in ir
    assert "math.floor" in ir
