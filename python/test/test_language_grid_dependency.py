"""Programmatic dependent launch in the sage language:
``sl.launch_dependents`` and ``sl.grid_dependency_wait`` in the interpreter
(nothing: launches run one after another), in the traced IR (only for
sm_90), in the PTX (``griddepcontrol``) and in the kernel header the
launcher reads (``early_launch=1`` for a kernel that waits). The GPU run is
in gpu/test_jit_gpu.py."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import sage
import sage.language as sl
from sage.runtime import parse_kernel_header
from test_language_kernels import doubled_after, slow_count

PRODUCER = [sl.ArgSpec(sl.pointer_type(sl.float32))] * 2 + \
    [sl.ArgSpec(sl.pointer_type(sl.int32))] + [sl.ArgSpec(sl.int32)] * 2
CONSUMER = [sl.ArgSpec(sl.pointer_type(sl.float32))] * 3 + [sl.ArgSpec(sl.int32)]


def test_the_interpreter_runs_the_pair_in_order():
    n, block = 256, 64
    x = np.arange(n, dtype=np.float32)
    y, z, ids = np.zeros(n, np.float32), np.zeros(n, np.float32), np.zeros(4, np.float32)
    sl.interpret(slow_count, n // block, [x, y, np.zeros(1, np.int32), n, 5], {"BLOCK": block})
    sl.interpret(doubled_after, n // block, [y, z, ids, n], {"BLOCK": block})
    np.testing.assert_array_equal(z, 2 * (x + 5))
    np.testing.assert_array_equal(ids, np.arange(4))


def test_trace_emits_the_ops_for_sm90_only():
    ir = sl.trace(doubled_after, CONSUMER, {"BLOCK": 64})
    assert "sage.grid_dependency_wait" in ir
    assert "sage.launch_dependents" in sl.trace(slow_count, PRODUCER, {"BLOCK": 64})
    # Below sm_90 kernels never start early: the calls are nothing there.
    for kernel, specs in ((doubled_after, CONSUMER), (slow_count, PRODUCER)):
        ir = sl.trace(kernel, specs, {"BLOCK": 64}, arch="sm_80")
        assert "grid_dependency_wait" not in ir and "launch_dependents" not in ir


def test_ptx_asks_for_an_early_launch_only_where_the_kernel_waits(library, tmp_path):
    waits = library.compile(sl.trace(doubled_after, CONSUMER, {"BLOCK": 64}), "sm_90a")
    signals = library.compile(sl.trace(slow_count, PRODUCER, {"BLOCK": 64}), "sm_90a")
    assert parse_kernel_header(waits)["doubled_after"].early_launch
    assert "early_launch=1" in waits.splitlines()[0]
    assert not parse_kernel_header(signals)["slow_count"].early_launch
    assert "early_launch" not in signals.splitlines()[0]
    # The wait follows the store that does not depend on the other kernel.
    assert waits.index("griddepcontrol.wait;") > waits.index("st.global")
    assert "griddepcontrol.launch_dependents;" in signals
    ptxas = shutil.which("ptxas")
    if ptxas:
        for name, ptx in (("waits", waits), ("signals", signals)):
            (tmp_path / f"{name}.ptx").write_text(ptx)
            out = subprocess.run([ptxas, "-arch=sm_90a", str(tmp_path / f"{name}.ptx"), "-o",
                                  str(tmp_path / f"{name}.cubin")], capture_output=True,
                                 text=True)
            assert out.returncode == 0, out.stderr


def test_the_jit_records_the_early_launch():
    n = 256
    args = [np.zeros(n, np.float32), np.zeros(n, np.float32), np.zeros(4, np.float32), n]
    compiled = sage.jit(doubled_after).compile(*args, BLOCK=64, arch="sm_90a").compiled
    assert compiled.info.early_launch
    older = sage.jit(doubled_after).compile(*args, BLOCK=64, arch="sm_80").compiled
    assert not older.info.early_launch


def test_the_verifier_rejects_the_ops_below_sm90(library):
    ir = sl.trace(doubled_after, CONSUMER, {"BLOCK": 64}).replace('"sm_90a"', '"sm_80"')
    with pytest.raises(Exception, match="needs sm_90 or later \\(programmatic dependent launch"):
        library.compile(ir, "sm_80")
