"""What @sage.jit specialises on, and how calls are bound and checked
(no GPU: kernels are traced with numpy arrays standing for tensors)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import sage
import sage.language as sl
from sage.jit import ArgumentError
from sage.jit.launcher import grid_dims, pointer_of
from sage.jit.specialize import ArgKey, arch_for_capability


def scale(x, y, n, alpha, BLOCK: sl.constexpr = 64):
    row = sl.program_id(0) * BLOCK
    t = sl.load(x, shape=(1, BLOCK), offsets=(0, row), strides=(n, 1), bounds=(1, n))
    sl.store(y, t * alpha, offsets=(0, row), strides=(n, 1), bounds=(1, n))


def typed(x: sl.pointer_type(sl.float16), n: sl.int64, BLOCK: sl.constexpr):
    pass


def arrays(n=128, dtype=np.float32):
    return np.zeros(n, dtype), np.zeros(n, dtype)


def test_sage_jit_is_the_decorator_and_the_package():
    import sage.jit.knobs as knobs_module  # the package stays importable

    assert knobs_module.knobs.dump.env == "SAGE_DUMP"
    kernel = sage.jit(scale)
    assert repr(kernel) == "<sage.jit kernel scale>"
    assert sage.jit(do_not_specialize=("n",))(scale).params[2].specialize is False


def test_keys_follow_dtype_alignment_and_divisibility():
    kernel = sage.jit(scale)
    x, y = arrays()
    call = kernel.bind((x, y, 128, 2.0), {}, check_device=False)
    assert call.keys == (ArgKey("pointer", "float32", True), ArgKey("pointer", "float32", True),
                         ArgKey("int32", None, True), ArgKey("float32"))
    assert call.constexprs == {"BLOCK": 64} and call.num_warps == 4
    odd = kernel.bind((x[1:], y, 100, 2.0), {"BLOCK": 32, "num_warps": 8},
                      check_device=False)
    assert odd.keys[0] == ArgKey("pointer", "float32", False)  # 4-byte offset
    assert odd.keys[2] == ArgKey("int32", None, False)
    assert odd.constexprs == {"BLOCK": 32} and odd.num_warps == 8
    big = kernel.bind((x, y, 2 ** 40, 1.0), {}, check_device=False)
    assert big.keys[2] == ArgKey("int64", None, True)
    half = kernel.bind((x.astype(np.float16), y, 128, 1.0), {}, check_device=False)
    assert half.keys[0].dtype == "float16"


def test_hints_reach_the_ir():
    kernel = sage.jit(scale)
    x, y = arrays()
    ir = kernel.ir(x, y, 128, 2.0, arch="sm_90a")
    assert "%x: !sage.ptr<f32> {sage.alignment = 16 : i64}" in ir
    assert "%n: i32 {sage.divisibility = 16 : i64}" in ir
    assert "%alpha: f32," in ir or "%alpha: f32)" in ir
    assert 'sage.target = "sm_90a", sage.num_warps = 4' in ir
    plain = kernel.ir(x[1:], y, 100, 2.0, arch="sm_80", num_warps=8)
    assert "%x: !sage.ptr<f32>," in plain and "%n: i32," in plain
    assert 'sage.target = "sm_80", sage.num_warps = 8' in plain
    assert "sage.maxnreg" not in plain
    capped = kernel.ir(x, y, 128, 2.0, arch="sm_90a", maxnreg=128)
    assert 'sage.target = "sm_90a", sage.num_warps = 4 : i32, sage.maxnreg = 128 : i32' in capped
    assert "arith.constant 64 : i32" in kernel.ir(x, y, 128, 2.0, arch="sm_90a")
    assert "arith.constant 32 : i32" in kernel.ir(x, y, 128, 2.0, BLOCK=32, arch="sm_90a")


def row_sums(x, out, n, BLOCK: sl.constexpr = 16):
    """out[0:BLOCK] = the sums of the first n rows of x (n x BLOCK): a loop
    that gives no num_stages."""
    acc = sl.zeros((1, BLOCK), sl.float32)
    for r in sl.range(0, n, 1):
        acc = acc + sl.load(x, (1, BLOCK), (r, 0), (BLOCK, 1), (n, BLOCK))
    sl.store(out, acc, (0, 0), (BLOCK, 1), (1, BLOCK))


def test_launch_num_stages_is_bound_and_reaches_the_loops():
    kernel = sage.jit(row_sums)
    x, out = np.zeros((8, 16), np.float32), np.zeros(16, np.float32)
    call = kernel.bind((x, out, 8), {"num_stages": 3}, check_device=False)
    assert call.num_stages == 3 and call.options.num_warps == 4 and call.maxnreg is None
    assert kernel.bind((x, out, 8), {}, check_device=False).num_stages == 1
    assert call.options != kernel.bind((x, out, 8), {}, check_device=False).options
    assert "sage.num_stages = 3 : i32" in kernel.ir(x, out, 8, arch="sm_90a", num_stages=3)
    assert "num_stages" not in kernel.ir(x, out, 8, arch="sm_90a")


@pytest.mark.parametrize("option, value, message", [
    *[("num_stages", bad, "num_stages must be an integer >= 1") for bad in (0, -1, True, 2.5)],
    ("num_warps", 3, "num_warps must be 1, 2, 4, 8 or 16"),
    ("maxnreg", 16, "maxnreg must be None or an integer from 24 to 255"),
])
def test_launch_options_are_checked_when_bound(option, value, message):
    """A bad launch option is an error of the launch, before any device or
    trace (also under the interpreter)."""
    kernel = sage.jit(row_sums)
    x, out = np.zeros((8, 16), np.float32), np.zeros(16, np.float32)
    message += ", got " + re.escape(repr(value))
    for bad_launch in (lambda: kernel[(1,)](x, out, 8, **{option: value}),
                       lambda: kernel.interpret((1,), x, out, 8, **{option: value}),
                       lambda: kernel.ir(x, out, 8, arch="sm_90a", **{option: value})):
        with pytest.raises(ValueError, match=message):
            bad_launch()


def test_the_interpreter_accepts_and_ignores_launch_options():
    kernel = sage.jit(row_sums)
    x = np.arange(8 * 16, dtype=np.float32).reshape(8, 16)
    plain, staged = np.zeros(16, np.float32), np.zeros(16, np.float32)
    kernel.interpret((1,), x, plain, 8)
    kernel.interpret((1,), x, staged, 8, num_stages=3, num_warps=8, maxnreg=128)
    np.testing.assert_array_equal(plain, x.sum(axis=0))
    np.testing.assert_array_equal(staged, plain)


def test_do_not_specialize_drops_the_hints():
    kernel = sage.jit(scale, do_not_specialize=("x", 2))
    x, y = arrays()
    ir = kernel.ir(x, y, 128, 2.0, arch="sm_90a")
    assert "%x: !sage.ptr<f32>," in ir and "%n: i32," in ir
    assert "%y: !sage.ptr<f32> {sage.alignment = 16 : i64}" in ir


def test_do_not_specialize_rejects_constexprs_and_unknown_names():
    with pytest.raises(ValueError, match="BLOCK of scale is a constexpr"):
        sage.jit(scale, do_not_specialize=("BLOCK",))
    with pytest.raises(ValueError, match="has no parameter 'm'"):
        sage.jit(scale, do_not_specialize=("m",))
    with pytest.raises(ValueError, match="has no parameter #9"):
        sage.jit(scale, do_not_specialize=(9,))


def test_declared_types_are_checked():
    kernel = sage.jit(typed)
    half = np.zeros(16, np.float16)
    assert kernel.bind((half, 5), {"BLOCK": 1}, check_device=False).keys[1].kind == "int64"
    with pytest.raises(ArgumentError, match="argument x: expected a tensor of float16, "
                                            "got float32"):
        kernel.bind((np.zeros(16, np.float32), 5), {"BLOCK": 1}, check_device=False)
    with pytest.raises(ArgumentError, match="argument n: expected an integer"):
        kernel.bind((half, 5.0), {"BLOCK": 1}, check_device=False)


def test_binding_errors_name_the_argument():
    kernel = sage.jit(scale)
    x, y = arrays()
    with pytest.raises(ArgumentError, match="missing argument alpha"):
        kernel.bind((x, y, 128), {}, check_device=False)
    with pytest.raises(ArgumentError, match="has no parameter 'beta'"):
        kernel.bind((x, y, 128, 1.0), {"beta": 1}, check_device=False)
    with pytest.raises(ArgumentError, match="argument n given twice"):
        kernel.bind((x, y, 128, 1.0), {"n": 1}, check_device=False)
    with pytest.raises(ArgumentError, match="argument n: expected a tensor, an int or a float"):
        kernel.bind((x, y, "128", 1.0), {}, check_device=False)
    with pytest.raises(ArgumentError, match="does not fit in int64"):
        kernel.bind((x, y, 2 ** 70, 1.0), {}, check_device=False)
    with pytest.raises(ArgumentError, match="argument x has a dtype sage does not handle"):
        kernel.bind((np.zeros(4, np.float64), y, 1, 1.0), {}, check_device=False)
    with pytest.raises(TypeError, match=r"launch it with scale\[grid\]"):
        kernel(x, y, 128, 1.0)


def test_host_arrays_cannot_be_launched():
    kernel = sage.jit(scale)
    x, y = arrays()
    with pytest.raises(ArgumentError, match="argument x is not in CUDA device memory"):
        kernel.bind((x, y, 128, 1.0), {})


def test_pointer_views():
    x = np.zeros((4, 8), np.float16)
    pointer = pointer_of(x)
    assert pointer.dtype == "float16" and pointer.device == -1 and pointer.contiguous
    assert not pointer_of(x[:, ::2]).contiguous
    assert pointer_of(sl.Buffer(np.zeros(4, np.float32), sl.bfloat16)).dtype == "bfloat16"
    assert pointer_of(3) is None and pointer_of(2.5) is None


def test_targets_from_capabilities():
    assert arch_for_capability(9, 0) == "sm_90a"
    assert [arch_for_capability(8, m) for m in (0, 6, 9)] == ["sm_80", "sm_86", "sm_89"]


def test_grids():
    assert grid_dims((4,), {}) == (4, 1, 1)
    assert grid_dims(7, {}) == (7, 1, 1)
    assert grid_dims(lambda meta: (meta["n"] // meta["BLOCK"], 2), {"n": 256, "BLOCK": 64}) \
        == (4, 2, 1)
    for bad in ((), (1, 2, 3, 4), (-1,)):
        with pytest.raises(ValueError, match="a grid is 1 to 3"):
            grid_dims(bad, {})
