"""Counters between programs in the sage language: ``sl.counter_add`` and
``sl.counter_wait`` in the interpreter (launches and programs run one after
another: a wait below its target is an error), in the traced IR, in the PTX
and in the kernel header (``early_launch=1`` for a kernel that waits). The
GPU runs are in gpu/test_jit_gpu.py."""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest

import sage.language as sl
from sage.runtime import parse_kernel_header
from test_language_kernels import doubled_when_ready, slow_count, tickets

F32, I32 = sl.pointer_type(sl.float32), sl.pointer_type(sl.int32)
PRODUCER = [sl.ArgSpec(F32)] * 2 + [sl.ArgSpec(I32)] + [sl.ArgSpec(sl.int32)] * 2
CONSUMER = [sl.ArgSpec(F32)] * 3 + [sl.ArgSpec(I32), sl.ArgSpec(sl.int32)]
TICKETS = [sl.ArgSpec(I32)] * 2
SIGNALS = {"BLOCK": 64, "SIGNAL": True}


def test_the_interpreter_runs_producer_and_consumer_in_order():
    n, block = 256, 64
    x = np.arange(n, dtype=np.float32)
    y, z, ids = np.zeros(n, np.float32), np.zeros(n, np.float32), np.zeros(4, np.float32)
    ready = np.zeros(n // block, np.int32)
    sl.interpret(slow_count, n // block, [x, y, ready, n, 5], {"BLOCK": block, "SIGNAL": True})
    np.testing.assert_array_equal(ready, np.ones(4, np.int32))
    sl.interpret(doubled_when_ready, n // block, [y, z, ids, ready, n], {"BLOCK": block})
    np.testing.assert_array_equal(z, 2 * (x + 5))
    np.testing.assert_array_equal(ids, np.arange(4))


def test_the_old_value_is_each_programs_ticket():
    counter, out = np.array([7], np.int32), np.zeros(5, np.int32)
    sl.interpret(tickets, 5, [counter, out], {})
    np.testing.assert_array_equal(out, 7 + 2 * np.arange(5))
    assert counter[0] == 17
    # The add wraps around as the GPU's 32-bit add does.
    counter[0] = 2**31 - 3
    sl.interpret(tickets, 3, [counter, out], {})
    np.testing.assert_array_equal(out[:3], [2**31 - 3, 2**31 - 1, -2**31 + 1])


def test_a_wait_that_would_hang_is_an_error():
    n, block = 128, 64
    ready = np.array([1, 0], np.int32)  # block 1 never becomes ready
    args = [np.ones(n, np.float32), np.zeros(n, np.float32), np.zeros(2, np.float32), ready, n]
    # Program 0 waits for block 1.
    with pytest.raises(sl.CompilationError, match=r"program \(0, 0, 0\) waits for the counter "
                       r"to reach 1, but it holds 0 .* one after another"):
        sl.interpret(doubled_when_ready, 2, args, {"BLOCK": block})


def test_a_counter_outside_its_buffer_is_an_error():
    def kernel(c, out):
        sl.counter_add(c + 2, 1)
    with pytest.raises(sl.CompilationError, match="the counter lies past the end of its buffer"):
        sl.interpret(kernel, 1, [np.zeros(2, np.int32), np.zeros(1, np.int32)], {})

    def waits(c, out):
        sl.counter_wait(c + (-1), 0)
    with pytest.raises(sl.CompilationError, match="lies before the start of its buffer"):
        sl.interpret(waits, 1, [np.zeros(2, np.int32), np.zeros(1, np.int32)], {})


@pytest.mark.parametrize("call, message", [
    (lambda p, c: sl.counter_add(p, 1), "counter_add's counter must point to i32, got "
     "!sage.ptr<f32>"),
    (lambda p, c: sl.counter_wait(3, 1), "counter_wait's counter must be a pointer argument"),
    (lambda p, c: sl.counter_add(c, 1.5), "counter_add's value must be an integer, got 1.5"),
    (lambda p, c: sl.counter_wait(c, 2**31), "counter_wait's target must fit in i32"),
    (lambda p, c: sl.counter_wait(c, sl.zeros((1, 1), sl.int32)),
     "counter_wait's target must be an integer scalar, got tensor<1x1xi32>"),
    (lambda p, c: sl.counter_add(c, sl.program_id(0).to(sl.int64)),
     "counter_add's value must be an i32 scalar (counters are i32), got i64"),
])
def test_bad_operands_are_reported(call, message):
    def kernel(p, c):
        call(p, c)
    with pytest.raises(sl.CompilationError, match=re.escape(message)):
        sl.trace(kernel, [sl.ArgSpec(F32), sl.ArgSpec(I32)], {})


def test_trace_emits_the_ops():
    ir = sl.trace(doubled_when_ready, CONSUMER, {"BLOCK": 64})
    assert "sage.counter_wait" in ir
    assert "sage.counter_add" in sl.trace(slow_count, PRODUCER, SIGNALS)
    assert "sage.counter_add" not in sl.trace(slow_count, PRODUCER, {"BLOCK": 64})


def test_ptx_polls_adds_and_asks_for_an_early_launch(library, tmp_path):
    waits = library.compile(sl.trace(doubled_when_ready, CONSUMER, {"BLOCK": 64}), "sm_90a")
    signals = library.compile(sl.trace(slow_count, PRODUCER, SIGNALS), "sm_90a")
    counts = library.compile(sl.trace(tickets, TICKETS, {}), "sm_90a")
    assert parse_kernel_header(waits)["doubled_when_ready"].early_launch
    assert not parse_kernel_header(signals)["slow_count"].early_launch
    assert "ld.acquire.gpu.global.b32" in waits and "fence.proxy.async.global;" in waits
    # The wait follows the store that does not depend on the other kernel.
    assert waits.index("ld.acquire.gpu") > waits.index("st.global")
    assert "atom.acq_rel.gpu.global.add.u32" in signals and "st.shared" not in signals
    # A used old value goes through shared memory.
    assert "st.shared.b32" in counts and "ld.shared" in counts
    ptxas = shutil.which("ptxas")
    if ptxas:
        for name, ptx in (("waits", waits), ("signals", signals), ("counts", counts)):
            (tmp_path / f"{name}.ptx").write_text(ptx)
            out = subprocess.run([ptxas, "-arch=sm_90a", str(tmp_path / f"{name}.ptx"), "-o",
                                  str(tmp_path / f"{name}.cubin")], capture_output=True,
                                 text=True)
            assert out.returncode == 0, out.stderr
