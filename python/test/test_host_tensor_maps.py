"""Host-encoded TMA tensor maps without a GPU: the PTX header's
``// sage.tensor_map`` lines, the native launcher's expression evaluator and
its checks, SAGE_TENSOR_MAPS and what the compiler makes of a real kernel
(the launches themselves are GPU tests: gpu/test_jit_gpu.py)."""

from __future__ import annotations

import numpy as np
import pytest

import sage.language as sl
from sage.compiler.binding import load_binding
from sage.jit.knobs import KnobError, knobs
from sage.runtime import parse_kernel_header
from sage.runtime.ptx import HostTensorMap

KERNEL = "// sage.kernel name=k threads=384 shared_memory=1024 global_scratch=0\n"
MAP = ("// sage.tensor_map kernel=k param=3 address=a1 dims=mul64(128,2);a7;div32(a9,2) "
       "strides=mul64(a15,2);a14 box=64,128,1 element_type=0 swizzle=3\n")


def test_header_lists_the_maps_of_each_kernel():
    info = parse_kernel_header(KERNEL + MAP + "//\n.version 8.3\n")["k"]
    assert info.tensor_maps == (HostTensorMap(
        3, "a1", ("mul64(128,2)", "a7", "div32(a9,2)"), ("mul64(a15,2)", "a14"),
        (64, 128, 1), 0, 3),)
    assert info.tensor_maps[0].spec() == (3, "a1", ["mul64(128,2)", "a7", "div32(a9,2)"],
                                          ["mul64(a15,2)", "a14"], [64, 128, 1], 0, 3)
    assert parse_kernel_header(KERNEL)["k"].tensor_maps == ()


def test_header_rejects_malformed_maps():
    with pytest.raises(ValueError, match="malformed tensor map line"):
        parse_kernel_header(KERNEL + "// sage.tensor_map kernel=k param=x\n")
    with pytest.raises(ValueError, match="unknown kernel 'other'"):
        parse_kernel_header(KERNEL + MAP.replace("kernel=k", "kernel=other"))


@pytest.mark.parametrize("text,args,value", [
    ("a0", [5], 5),
    ("-3", [], -3),
    ("mul64(a0,2)", [1 << 40], 1 << 41),
    ("div32(a0,2)", [-7], -3),          # truncates toward zero
    ("rem64(a0,4)", [-7], -3),
    ("add32(a0,1)", [2**31 - 1], -2**31),  # wraps at 32 bits
    ("mul64(a0,a0)", [2**32], 0),       # wraps at 64 bits
    ("zext32(a0)", [-1], 2**32 - 1),
    ("trunc32(a0)", [2**32 + 5], 5),
    ("min64(a0,a1)", [3, -4], -4),
    ("max32(sub32(a0,a1),0)", [3, 4], 0),
    ("add64(a0,mul64(mul64(max64(a1,8),3),4))", [1000, 2], 1096),
])
def test_expressions_evaluate_as_documented(text, args, value):
    assert load_binding().evaluate_host_expression(text, args) == value


@pytest.mark.parametrize("text,why", [
    ("-", "expected a number"),
    ("a", "unknown operator .a."),
    ("pow64(a0,2)", "unknown operator 'pow'"),
    ("add16(a0,1)", "width must be 32 or 64"),
    ("add64(a0)", "expected ','"),
    ("zext32(a0", "expected '\\)'"),
    ("a0 ", "unexpected text"),
    ("div64(a0,0)", "division by zero"),
    ("a3", "argument 3 is not an integer or pointer argument"),
])
def test_bad_expressions_are_clear_errors(text, why):
    with pytest.raises(ValueError, match=why):
        load_binding().evaluate_host_expression(text, [1, 2])


def test_launcher_checks_the_maps_before_loading():
    """The native kernel checks its maps first (no driver needed)."""
    binding = load_binding()
    spec = (2, "a0", ["a1", "a1"], ["a1"], [64, 64], 0, 3)
    with pytest.raises(ValueError, match="parameter 3 does not follow the arguments"):
        binding.Kernel(b"", "k", 0, 128, 0, "Pl", [spec[:0] + (3,) + spec[1:]])
    with pytest.raises(ValueError, match="malformed host tensor map"):
        binding.Kernel(b"", "k", 0, 128, 0, "Pl", [(2, "a0", ["a1"], [], [64], 0, 3)])
    with pytest.raises(ValueError, match="unknown operator 'pow'"):
        binding.Kernel(b"", "k", 0, 128, 0, "Pl", [(2, "pow64(a0,1)", ["a1", "a1"], ["a1"],
                                                     [64, 64], 0, 3)])


def test_knob_parses_strictly(monkeypatch):
    monkeypatch.setenv("SAGE_TENSOR_MAPS", "Device")
    assert knobs.tensor_maps.get() == "device"
    monkeypatch.setenv("SAGE_TENSOR_MAPS", "gpu")
    with pytest.raises(KnobError, match="SAGE_TENSOR_MAPS='gpu'"):
        knobs.tensor_maps.get()
    monkeypatch.delenv("SAGE_TENSOR_MAPS")
    assert knobs.tensor_maps.get() == "host"


def copy_tile(x, y, n, BLOCK: sl.constexpr):
    """y[:n] = x[:n] @ I: one 64 x 64 TMA copy of x, a matmul, a store."""
    row = sl.program_id(0) * BLOCK
    t = sl.load(x, (BLOCK, 64), (row, 0), (64, 1), (n, 64))
    eye = sl.where(sl.iota((64, 1), 0) == sl.iota((1, 64), 1), 1.0, 0.0).to(sl.float16)
    sl.store(y, sl.matmul(t, eye, contract=(1, 0)), (row, 0), (64, 1), (n, 64))


def test_trace_records_where_maps_are_built():
    specs = [sl.ArgSpec(sl.PointerType(sl.float16), alignment=16),
             sl.ArgSpec(sl.PointerType(sl.float32), alignment=16), sl.ArgSpec(sl.int32)]
    assert "sage.tensor_maps" not in sl.trace(copy_tile, specs, {"BLOCK": 64})
    assert 'sage.tensor_maps = "device"' in sl.trace(copy_tile, specs, {"BLOCK": 64},
                                                     tensor_maps="device")
    with pytest.raises(ValueError, match="tensor_maps must be 'host' or 'device'"):
        sl.trace(copy_tile, specs, {"BLOCK": 64}, tensor_maps="gpu")


def test_launch_option_picks_the_maps(monkeypatch):
    """``tensor_maps`` as a launch option: "device" keeps every map on the
    device whatever SAGE_TENSOR_MAPS says; None follows it; anything else
    is an error."""
    import sage

    kernel = sage.jit(copy_tile)
    x, y = np.zeros((128, 64), np.float16), np.zeros((128, 64), np.float32)
    monkeypatch.setenv("SAGE_TENSOR_MAPS", "host")
    assert kernel.compile(x, y, 128, BLOCK=64, arch="sm_90a").info.tensor_maps
    device = kernel.compile(x, y, 128, BLOCK=64, arch="sm_90a", tensor_maps="device")
    assert device.info.tensor_maps == () and device.info.global_scratch > 0
    assert device.options.tensor_maps == "device"
    monkeypatch.setenv("SAGE_TENSOR_MAPS", "device")
    assert kernel.compile(x, y, 128, BLOCK=64, arch="sm_90a").info.tensor_maps == ()
    with pytest.raises(ValueError, match="tensor_maps must be 'host' or 'device', got 'gpu'"):
        kernel.compile(x, y, 128, BLOCK=64, arch="sm_90a", tensor_maps="gpu")


def test_flash_kernel_maps_move_to_the_host(monkeypatch):
    """The FlashAttention forward's K, V and O maps are functions of its
    arguments: compiled for sm_90a they are host maps (no scratch), or,
    with SAGE_TENSOR_MAPS=device, built by every program."""
    from sage.kernels.flash.ops import FLASH, TILES

    plan, n, d = TILES[128], 1000, 128

    def buf(*shape):
        return sl.Buffer(np.zeros(shape, np.float32), sl.bfloat16)

    args = (buf(1, 2, n, d), buf(1, 1, n, d), buf(1, 1, n, d), buf(1, 2, n, d),
            np.zeros(1, np.float32), 0.1, n, n, 1, 2, 2 * n * d, n * d, d, n * d, n * d, d,
            n * d, n * d, d, 2 * n * d, n * d, d)
    kwargs = dict(arch="sm_90a", D=d, **plan.constexprs(), CAUSAL=False, GROUP=2,
                  POSITIVE_SCALE=True, **plan.options())
    host = FLASH.compile(*args, **kwargs).info
    assert host.global_scratch == 0
    # Q (loop-invariant: copied once, before the key loop), K, V and (stored
    # by the copy engine at D = 128) O.
    assert [(m.param, m.address) for m in host.tensor_maps] == [(22, "a0"), (23, "a1"),
                                                                (24, "a2"), (25, "a3")]
    # K: 256 bytes of D by Nkv rows by Hkv = H / GROUP heads by B batches.
    assert host.tensor_maps[1].dims == ("256", "a7", "div32(a9,2)", "a8")
    monkeypatch.setenv("SAGE_TENSOR_MAPS", "device")
    device = FLASH.compile(*args, **kwargs).info
    assert device.tensor_maps == () and device.global_scratch > 0
