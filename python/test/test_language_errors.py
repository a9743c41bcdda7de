"""Trace-time errors: each names the user's file and line and says what is wrong."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

import sage.compiler
import sage.language as sl

F16 = sl.ArgSpec.pointer(sl.float16)
F32 = sl.ArgSpec.pointer(sl.float32)
I8 = sl.ArgSpec.pointer(sl.int8)
N = sl.ArgSpec.scalar(sl.int32)


def _line_of(fn, needle: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if needle in line)


def expect_error(fn, specs, constexprs, match: str, line_with: str | None = None) -> None:
    """Tracing fails with ``match``; the error names this file at the line holding
    ``line_with``. The interpreter reports the same error for pointer-free
    inputs, since both share the checks."""
    with pytest.raises(sl.CompilationError) as info:
        sl.trace(fn, specs, constexprs)
    message = str(info.value)
    assert re.search(match, message), message
    if line_with is not None:
        assert f"{__file__}:{_line_of(fn, line_with)}:" in message, message


def test_is_a_compiler_error():
    assert issubclass(sl.CompilationError, sage.compiler.CompilationError)


def test_qmatmul_needs_int8():
    def kernel(a, n):
        t = sl.load(a, (16, 16), (0, 0), (16, 1), (n, 16))
        s = sl.zeros((1, 1), sl.float32)
        sl.qmatmul(t, s, t, s)  # HERE

    expect_error(kernel, [F16, N], {}, r"qmatmul's lhs must be a tile of i8, got "
                 r"tensor<16x16xf16>", "# HERE")


def test_unsigned_bytes_only_feed_matmuls_and_dequantize():
    """A uint8 tile is the lhs of sl.qmatmul, the input of sl.dequantize or
    widened: it is no rhs, is not narrowed or reinterpreted, nothing is
    converted to it and it is not stored."""
    def rhs(a, n):
        t = sl.load(a, (16, 16), (0, 0), (16, 1), (n, 16))
        q, s = sl.quantize(t, sl.uint8_per_token)
        sl.qmatmul(q, s, q, s)  # HERE

    expect_error(rhs, [F32, N], {}, r"qmatmul's rhs must be a tile of i8, got "
                 r"tensor<16x16xi8>", "# HERE")

    def cast(a, n):
        t = sl.load(a, (16, 16), (0, 0), (16, 1), (n, 16))
        q, _ = sl.quantize(t, sl.uint8_per_block)
        q.to(sl.int8)  # HERE

    expect_error(cast, [F32, N], {}, r"no cast to uint8 or from it to i8", "# HERE")

    def to_unsigned(a, n):
        t = sl.load(a, (16, 16), (0, 0), (16, 1), (n, 16))
        t.to(sl.int32).to(sl.uint8)  # HERE

    expect_error(to_unsigned, [F32, N], {}, r"no cast to uint8 or from it to i8", "# HERE")

    def store(a, out, n):
        t = sl.load(a, (16, 16), (0, 0), (16, 1), (n, 16))
        q, _ = sl.quantize(t, sl.uint8_per_block)
        sl.store(out, q, (0, 0), (16, 1), (n, 16))  # HERE

    expect_error(store, [F32, I8, N], {}, r"cannot store a tensor<16x16xi8> tile through a "
                 r"!sage.ptr<i8>", "# HERE")
    with pytest.raises(TypeError, match="a pointer holds"):
        sl.pointer_type(sl.uint8)


def test_qmatmul_contracted_sizes_and_scales():
    def sizes(a, n):
        x = sl.load(a, (16, 32), (0, 0), (32, 1), (n, 32))
        y = sl.load(a, (16, 16), (0, 0), (16, 1), (n, 16))
        s = sl.zeros((1, 1), sl.float32)
        sl.qmatmul(x, s, y, s)  # HERE

    expect_error(sizes, [I8, N], {}, r"contracted sizes differ", "# HERE")

    def scales(a, n):
        x = sl.load(a, (16, 32), (0, 0), (32, 1), (n, 32))
        s = sl.zeros((1, 32), sl.float32)
        sl.qmatmul(x, s, x, sl.zeros((1, 1), sl.float32))  # HERE

    expect_error(scales, [I8, N], {}, r"varies along the contracted dimension 1", "# HERE")

    def acc(a, n):
        x = sl.load(a, (16, 32), (0, 0), (32, 1), (n, 32))
        s = sl.zeros((1, 1), sl.float32)
        sl.qmatmul(x, s, x, s, acc=sl.zeros((16, 8), sl.float32))  # HERE

    expect_error(acc, [I8, N], {}, r"acc must be the result type tensor<16x16xf32>", "# HERE")


def test_matmul_operand_types():
    def kernel(a, b, n):
        x = sl.load(a, (16, 16), (0, 0), (16, 1), (n, 16))
        y = sl.load(b, (16, 16), (0, 0), (16, 1), (n, 16))
        sl.matmul(x, y.to(sl.bfloat16))  # HERE

    expect_error(kernel, [F16, F16, N], {}, r"must both be f16, both bf16 or both int8, got "
                 r"tensor<16x16xf16> and tensor<16x16xbf16>", "# HERE")

    def mixed(a, b, n):
        x = sl.load(a, (16, 16), (0, 0), (16, 1), (n, 16))
        y = sl.load(b, (16, 16), (0, 0), (16, 1), (n, 16))
        sl.matmul(x, y)  # HERE

    expect_error(mixed, [I8, F16, N], {}, r"must both be f16, both bf16 or both int8, got "
                 r"tensor<16x16xi8> and tensor<16x16xf16>", "# HERE")

    def f32_tiles(a, n):
        x = sl.load(a, (16, 16), (0, 0), (16, 1), (n, 16))
        sl.matmul(x, x)  # HERE

    expect_error(f32_tiles, [F32, N], {}, r"matmul's lhs must be a tile of f16, bf16, i8, "
                 r"got tensor<16x16xf32>", "# HERE")


@pytest.mark.parametrize("operands,acc,want", [(I8, sl.float32, "i32"), (F16, sl.int32, "f32")])
def test_matmul_accumulates_in_int32_or_float32(operands, acc, want):
    def kernel(a, n):
        x = sl.load(a, (16, 32), (0, 0), (32, 1), (n, 32))
        sl.matmul(x, x, acc=sl.zeros((16, 16), acc))  # HERE

    expect_error(kernel, [operands, N], {}, rf"acc must be a tile of {want}, got "
                 rf"tensor<16x16x{acc.mlir}>", "# HERE")


def test_int8_matmul_contraction_is_bounded():
    def too_long(a, n):
        x = sl.load(a, (1, 262144), (0, 0), (262144, 1), (n, 262144))
        sl.matmul(x, x)  # HERE

    expect_error(too_long, [I8, N], {}, r"a contraction of 262144 elements may overflow int32 "
                 r"\(at most 131072\)", "# HERE")


def test_shape_mismatch():
    def kernel(a, n):
        x = sl.load(a, (16, 8), (0, 0), (8, 1), (n, 8))
        y = sl.load(a, (8, 16), (0, 0), (16, 1), (n, 16))
        z = x + y  # HERE

    expect_error(kernel, [F32, N], {}, r"tile shapes \(16, 8\) and \(8, 16\) do not broadcast",
                 "# HERE")


def test_runtime_value_as_shape():
    def kernel(a, n):
        sl.load(a, (n, 16), (0, 0), (16, 1), (n, 16))  # HERE

    expect_error(kernel, [F32, N], {}, r"a tile dimension must be a compile-time integer .* "
                 r"got a runtime i32 value", "# HERE")


def test_runtime_value_in_python_if():
    def kernel(a, n):
        if n > 4:  # HERE
            pass

    expect_error(kernel, [F32, N], {}, r"no Python truth value", "# HERE")


def test_mixed_int_and_float_needs_a_cast():
    def kernel(a, n):
        x = sl.load(a, (16, 16), (0, 0), (16, 1), (n, 16))
        y = x * n  # HERE

    expect_error(kernel, [F32, N], {}, r"different types f32 and i32", "# HERE")


def test_store_type_and_atomic():
    def wrong_type(a, n):
        sl.store(a, sl.zeros((4, 4), sl.float32), (0, 0), (4, 1), (n, 4))  # HERE

    expect_error(wrong_type, [F16, N], {}, r"cannot store a tensor<4x4xf32> tile through a "
                 r"!sage.ptr<f16>", "# HERE")

    def atomic(a, n):
        sl.store(a, sl.zeros((4, 4), sl.float16), (0, 0), (4, 1), (n, 4), atomic_add=True)  # HERE

    expect_error(atomic, [F16, N], {}, r"atomic_add stores need f32", "# HERE")


def test_view_entries():
    """A view has 2 to 5 entries (up to 3 leading dimensions), as many
    offsets as strides and bounds."""
    def too_many(a, n):
        sl.load(a, (4, 4), (0,) * 6, (1,) * 6, (n,) * 6)  # HERE

    expect_error(too_many, [F16, N], {}, r"offsets must be a tuple of 2 to 5 entries \(up to 3 "
                 r"leading dimensions, then one per tile dimension\)", "# HERE")

    def uneven(a, n):
        sl.store(a, sl.zeros((4, 4), sl.float16), (0, 0, 0), (4, 1), (n, n, 4))  # HERE

    expect_error(uneven, [F16, N], {}, r"offsets, strides and bounds must have one entry per "
                 r"view dimension, got 3, 2 and 3", "# HERE")


def test_quantize_errors():
    def integer(a, n):
        sl.quantize(sl.load(a, (4, 4), (0, 0), (4, 1), (n, 4)), sl.int8_per_block)  # HERE

    expect_error(integer, [I8, N], {}, r"quantized value must be a tile of f16, bf16, f32",
                 "# HERE")

    def scale(a, n):
        x = sl.load(a, (4, 8), (0, 0), (8, 1), (n, 8))
        sl.quantize(x, sl.int8_per_token, scale=sl.zeros((1, 8), sl.float32))  # HERE

    expect_error(scale, [F32, N], {}, r"per_token scale of a tensor<4x8xf32> tile must be "
                 r"tensor<4x1xf32>", "# HERE")

    def scheme(a, n):
        sl.quantize(sl.load(a, (4, 4), (0, 0), (4, 1), (n, 4)), "per_block")  # HERE

    expect_error(scheme, [F32, N], {}, r"expected a quantization scheme", "# HERE")


def test_division_and_reduction_kinds():
    def floordiv(a, n):
        x = sl.load(a, (4, 4), (0, 0), (4, 1), (n, 4))
        y = x // 2.0  # HERE

    expect_error(floordiv, [F32, N], {}, r"'floordiv' is not defined on float values", "# HERE")

    def reduce(a, n):
        sl.reduce(sl.load(a, (4, 4), (0, 0), (4, 1), (n, 4)), "mean", 0)  # HERE

    expect_error(reduce, [F32, N], {}, r"unknown reduction 'mean'", "# HERE")


def test_reduction_and_broadcast_groups():
    def some_bits(a, n):
        sl.max(sl.load(a, (4, 8), (0, 0), (8, 1), (n, 8)), 1, groups=7)  # HERE

    expect_error(some_bits, [F32, N], {}, r"groups 7 must be some, not all, of the index "
                 r"bits below 8", "# HERE")

    def runtime(a, n):
        sl.max(sl.load(a, (4, 8), (0, 0), (8, 1), (n, 8)), 1, groups=n)  # HERE

    expect_error(runtime, [F32, N], {}, r"groups must be a compile-time integer", "# HERE")

    def entries(a, n):
        sl.broadcast(sl.load(a, (4, 4), (0, 0), (4, 1), (n, 4)), (4, 8), groups=2)  # HERE

    expect_error(entries, [F32, N], {}, r"groups 2 take 2 entries along dimension 1, got 4",
                 "# HERE")

    def ungrouped(a, n):
        sl.broadcast(sl.load(a, (4, 2), (0, 0), (2, 1), (n, 2)), (4, 8))  # HERE

    expect_error(ungrouped, [F32, N], {}, r"only size-1 dimensions expand", "# HERE")


def test_softmax_update_statistics_shape():
    def kernel(a, n):
        s = sl.load(a, (4, 8), (0, 0), (8, 1), (n, 8))
        sl.softmax_update(s, sl.zeros((1, 8), sl.float32), sl.zeros((4, 1), sl.float32))  # HERE

    expect_error(kernel, [F32, N], {}, r"row_max must be tensor<4x1xf32>", "# HERE")


def test_loop_local_used_after_the_loop():
    def kernel(a, n):
        for i in sl.range(n):
            t = sl.zeros((4, 4), sl.float32)
        sl.store(a, t, (0, 0), (4, 1), (n, 4))  # HERE

    expect_error(kernel, [F32, N], {}, r"'t' is first assigned inside the sl.range loop .* "
                 r"used after it", "# HERE")


def test_loop_carried_type_change():
    def kernel(a, n):
        acc = sl.zeros((4, 4), sl.float32)
        for i in sl.range(n):  # HERE
            acc = acc.to(sl.float16)
        sl.store(a, acc.to(sl.float32), (0, 0), (4, 1), (n, 4))

    expect_error(kernel, [F32, N], {}, r"loop-carried 'acc' is tensor<4x4xf32> before the loop "
                 r"but tensor<4x4xf16> at the end of its body", "# HERE")


def test_break_in_a_runtime_loop():
    def kernel(a, n):
        for i in sl.range(n):
            break  # HERE

    expect_error(kernel, [F32, N], {}, r"'break' is not allowed in an sl.range loop body",
                 "# HERE")


def test_loop_value_escaping_through_python():
    def kernel(a, n):
        kept = []
        for i in sl.range(n):
            kept.append(sl.zeros((4, 4), sl.float32))
        sl.store(a, kept[0], (0, 0), (4, 1), (n, 4))  # HERE

    expect_error(kernel, [F32, N], {}, r"defined inside an sl.range loop body is used outside",
                 "# HERE")


def test_range_step_must_be_positive():
    def kernel(a, n):
        for i in sl.range(n, 0, -1):  # HERE
            pass

    expect_error(kernel, [F32, N], {}, r"step must be positive", "# HERE")


def test_range_num_stages_must_be_a_positive_int():
    for stages in (0, 2.0, True):
        def kernel(a, n):
            for i in sl.range(0, n, 1, num_stages=stages):  # HERE
                pass

        expect_error(kernel, [F32, N], {}, r"sl.range num_stages must be an integer >= 1, "
                     r"got " + re.escape(repr(stages)), "# HERE")


def test_range_warp_specialize_must_be_a_bool_with_stages():
    def kernel(a, n):
        for i in sl.range(0, n, 1, num_stages=2, warp_specialize=1):  # HERE
            pass

    expect_error(kernel, [F32, N], {}, r"sl.range warp_specialize must be True or False, "
                 r"got 1", "# HERE")

    def unstaged(a, n):
        for i in sl.range(0, n, 1, warp_specialize=True):  # HERE
            pass

    expect_error(unstaged, [F32, N], {}, r"warp_specialize=True needs num_stages >= 2 \(the "
                 r"buffers the producer fills ahead\), got 1", "# HERE")
    # The launch's num_stages counts.
    assert "sage.warp_specialize" in sl.trace(unstaged, [F32, N], {}, num_stages=3)


def test_range_ping_pong_must_be_a_bool_with_warp_specialize():
    def kernel(a, n):
        for i in sl.range(0, n, 1, num_stages=2, warp_specialize=True, ping_pong=1):  # HERE
            pass

    expect_error(kernel, [F32, N], {}, r"sl.range ping_pong must be True or False, got 1",
                 "# HERE")

    def alone(a, n):
        for i in sl.range(0, n, 1, num_stages=2, ping_pong=True):  # HERE
            pass

    expect_error(alone, [F32, N], {}, r"sl.range ping_pong=True needs warp_specialize=True",
                 "# HERE")

    def both(a, n):
        for i in sl.range(0, n, 1, num_stages=2, warp_specialize=True, ping_pong=True):
            pass

    assert "sage.warp_specialize, sage.ping_pong}" in sl.trace(both, [F32, N], {})


def test_store_tma_must_be_a_bool():
    def kernel(a, n, TMA: sl.constexpr, ATOMIC: sl.constexpr):
        t = sl.zeros((16, 16), sl.float32)
        sl.store(a, t, (0, 0), (n, 1), (n, n), atomic_add=ATOMIC, tma=TMA)  # HERE

    expect_error(kernel, [F32, N], {"TMA": 1, "ATOMIC": False}, r"tma must be a Python bool",
                 "# HERE")
    assert "sage.store tma " in sl.trace(kernel, [F32, N], {"TMA": True, "ATOMIC": False})
    # Both: a bulk reduction.
    assert "sage.store atomic_add tma " in sl.trace(kernel, [F32, N],
                                                    {"TMA": True, "ATOMIC": True})


def test_signature_errors():
    def kernel(a, n, BLOCK: sl.constexpr):
        pass

    expect_error(kernel, [F32, N], {}, r"needs a value for constexpr 'BLOCK'")
    expect_error(kernel, [F32, N], {"BLOCK": 4, "n": 3}, r"unknown constexpr argument\(s\) n for "
                 r"kernel 'kernel' \(n not annotated sl.constexpr\)")
    expect_error(kernel, [F32], {"BLOCK": 4}, r"has 2 runtime parameters \(a, n\), got 1")

    def returns(a):
        return sl.zeros((1, 1), sl.float32)

    expect_error(returns, [F32], {}, r"must not return a value")


def test_argument_specs():
    with pytest.raises(ValueError, match="positive power of two"):
        sl.ArgSpec.pointer(sl.float16, alignment=12)
    with pytest.raises(ValueError, match="alignment applies to pointer"):
        sl.ArgSpec(sl.int32, alignment=16)
    with pytest.raises(ValueError, match="a pointer, i32, i64 or f32"):
        sl.ArgSpec.scalar(sl.float16)
    with pytest.raises(ValueError, match="num_warps"):
        sl.trace(lambda a: None, [F32], {}, num_warps=3)
    for maxnreg in (16, 256, 128.0, True):
        with pytest.raises(ValueError, match=r"maxnreg must be None or an integer from 24 "
                                             r"to 255, got " + re.escape(repr(maxnreg))):
            sl.trace(lambda a: None, [F32], {}, maxnreg=maxnreg)
    for stages in (0, -1, True, 2.5, None):
        with pytest.raises(ValueError, match=r"num_stages must be an integer >= 1, got "
                                             + re.escape(repr(stages))):
            sl.trace(lambda a: None, [F32], {}, num_stages=stages)


def test_interpreter_reports_the_same_errors_and_bad_arguments():
    def kernel(a, n):
        x = sl.load(a, (4, 4), (0, 0), (4, 1), (n, 4))
        y = x * n  # HERE

    with pytest.raises(sl.CompilationError, match=r"different types f32 and i32"):
        sl.interpret(kernel, 1, [np.zeros(16, np.float32), 4], {})
    with pytest.raises(sl.CompilationError, match=r"no sage element type for numpy float64"):
        sl.interpret(kernel, 1, [np.zeros(16), 4], {})

    def outside(a, n):
        sl.load(a, (4, 4), (0, 0), (4, 1), (n, 4))  # HERE

    with pytest.raises(sl.CompilationError, match=r"sl.load: an in-bounds element lies "
                       r"outside the buffer"):
        sl.interpret(outside, 1, [np.zeros(8, np.float32), 4], {})


def test_ops_outside_a_kernel():
    with pytest.raises(sl.CompilationError, match="only inside a kernel"):
        sl.program_id(0)


def test_sigma16_needs_whole_16s_and_a_row_contraction():
    def rows(a, n):
        sl.load(a, (24, 16), (0, 0), (16, 1), (n, 16), sigma16_rows=True)  # HERE

    expect_error(rows, [I8, N], {}, r"sigma16_rows permutes rows inside every 16: the tile "
                 r"needs a multiple of 16 rows, got 24", "# HERE")

    def contraction(a, n):
        x = sl.load(a, (32, 16), (0, 0), (16, 1), (n, 16))
        s = sl.zeros((1, 1), sl.float32)
        sl.qmatmul(x, s, x, s, contract=(0, 0), rhs_sigma16=True)  # HERE

    expect_error(contraction, [I8, N], {}, r"rhs_sigma16 needs lhs contracted over its "
                 r"columns \(contract=\(1, _\)\)", "# HERE")


def test_unsaturated_quantize_needs_a_given_scale():
    def kernel(a, n):
        x = sl.load(a, (16, 16), (0, 0), (16, 1), (n, 16))
        sl.quantize(x, sl.int8_per_token, saturate=False)  # HERE

    expect_error(kernel, [F32, N], {}, r"saturate=False needs a given scale", "# HERE")


def test_new_flags_must_be_python_bools():
    def rows(a, n):
        sl.load(a, (16, 16), (0, 0), (16, 1), (n, 16), sigma16_rows=1)  # HERE

    expect_error(rows, [I8, N], {}, r"sigma16_rows must be a Python bool", "# HERE")

    def rhs(a, n):
        x = sl.load(a, (16, 16), (0, 0), (16, 1), (n, 16))
        s = sl.zeros((1, 1), sl.float32)
        sl.qmatmul(x, s, x, s, rhs_sigma16="yes")  # HERE

    expect_error(rhs, [I8, N], {}, r"rhs_sigma16 must be a Python bool", "# HERE")

    def saturate(a, n):
        x = sl.load(a, (16, 16), (0, 0), (16, 1), (n, 16))
        one = sl.full((16, 1), 1.0, sl.float32)
        sl.quantize(x, sl.int8_per_token, scale=one, saturate=0)  # HERE

    expect_error(saturate, [F32, N], {}, r"saturate must be a Python bool", "# HERE")


def _unsaturated(x, q, n):
    t = sl.load(x, (16, 16), (0, 0), (16, 1), (n, 16))
    p_q, _ = sl.quantize(t, sl.int8_per_token, scale=sl.full((16, 1), 0.01, sl.float32),
                         saturate=False)
    sl.store(q, p_q, (0, 0), (16, 1), (n, 16))


def test_interpreter_checks_the_unsaturated_promise():
    """A value that rounds past 127 under saturate=False is an error in the
    interpreter (the GPU would wrap it), naming sl.quantize."""
    q = np.zeros(256, np.int8)
    sl.interpret(_unsaturated, 1, [np.full(256, 1.0, np.float32), q, 16], {})
    assert (q == 100).all()
    with pytest.raises(sl.CompilationError, match=r"sl.quantize: quantize with "
                       r"saturate=False: round\(x \* inv\) reaches \[200, 200\], outside "
                       r"\[-127, 127\]"):
        sl.interpret(_unsaturated, 1, [np.full(256, 2.0, np.float32), q, 16], {})


def test_bitcast_reads_i32_as_f32_and_back_only():
    def pointer(a, n):
        sl.bitcast(a, sl.int64)  # HERE

    expect_error(pointer, [F32, N], {}, "a pointer cannot be bitcast", "# HERE")

    def widths(a, n):
        t = sl.load(a, (16, 16), (0, 0), (16, 1), (n, 16))
        sl.bitcast(t, sl.float16)  # HERE

    expect_error(widths, [F32, N], {}, r"sl.bitcast reads i32 as f32 or f32 as i32, got "
                 r"f32 to f16", "# HERE")

    def target(a, n):
        t = sl.load(a, (16, 16), (0, 0), (16, 1), (n, 16))
        sl.bitcast(t, "int32")  # HERE

    expect_error(target, [F32, N], {}, "bitcast target must be a dtype", "# HERE")

    def floor_int(a, n):
        sl.floor(n)  # HERE

    expect_error(floor_int, [F32, N], {}, "floor", "# HERE")
