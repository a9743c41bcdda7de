"""GPU tests: skipped without a CUDA device; run by scripts/gpu/run.sh."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import numpy as np
import pytest

from sage.compiler.library import DEFAULT_PTX_VERSION
from sage.runtime import parse_kernel_header

try:
    import cupy as cp

    _SKIP_REASON = None if cp.cuda.runtime.getDeviceCount() > 0 else "no CUDA device"
except ImportError:
    _SKIP_REASON = "GPU tests need cupy"
except Exception as error:  # cupy raises its own errors without a driver
    _SKIP_REASON = f"no usable CUDA device ({error})"


def pytest_collection_modifyitems(config, items):
    if _SKIP_REASON is None:
        return
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.skip(reason=_SKIP_REASON))

ROOT = Path(__file__).parents[3]
PTX_DIR = Path(os.environ.get("SAGE_PTX_DIR", ROOT / ".carry" / "ptx"))
# The SageBwd forward's plan tuning times 3-5 compiled plans the first time a
# problem shape is seen: the suite's many shapes would spend minutes in it.
# The plans give identical results (test_sagebwd_tuning_gpu.py checks that,
# and tunes with the knob unset), so the other tests take the default plan
# unless the environment says otherwise.
os.environ.setdefault("SAGE_TUNE_ATTENTION", "0")
_RESULTS: dict[str, object] = {}


class PtxKernel:
    """A kernel loaded from sage PTX and launched with its header facts by
    the binding's launcher (the JIT's: global scratch, host tensor maps)."""

    #: The launch letter of each scalar argument type.
    LETTERS = {np.dtype(np.int32): "i", np.dtype(np.int64): "l", np.dtype(np.float32): "f"}

    def __init__(self, ptx: str, name: str):
        self.ptx = ptx
        self.name = name
        self.info = parse_kernel_header(ptx)[name]
        self._loaded: dict[str, object] = {}

    def __call__(self, grid: tuple[int, ...], *args) -> None:
        values = [a.data.ptr if isinstance(a, cp.ndarray) else a.item() for a in args]
        letters = "".join("P" if isinstance(a, cp.ndarray) else self.LETTERS[a.dtype]
                          for a in args)
        if self.info.global_scratch:
            # The kernel's hidden last argument: global memory for the TMA
            # tensor maps it builds, global_scratch bytes per program.
            scratch = cp.empty(math.prod(grid) * self.info.global_scratch, dtype=cp.uint8)
            values.append(scratch.data.ptr)
            letters += "P"
        kernel = self._loaded.get(letters)
        if kernel is None:
            from sage.compiler.binding import load_binding
            kernel = load_binding().Kernel(
                self.ptx.encode(), self.name, cp.cuda.Device().id, self.info.threads,
                self.info.shared_memory, letters,
                [m.spec() for m in self.info.tensor_maps])
            self._loaded[letters] = kernel
        grid = tuple(grid) + (1,) * (3 - len(grid))
        kernel.launch(*grid, cp.cuda.get_current_stream().ptr, tuple(values))
        cp.cuda.runtime.deviceSynchronize()


def _compiler():
    """The compiler library when it is here (then kernels are compiled on
    this machine, in-process), else None (PTX built elsewhere is used)."""
    from sage.compiler import CompilerLibrary
    try:
        return CompilerLibrary()
    except FileNotFoundError:
        return None


def force_mma(source: str, mma: str) -> str:
    """``source`` with every matmul's instruction form set to ``mma``
    (sage-select-mma keeps a choice that is present)."""
    forced = re.sub(r"(sage\.q?matmul [^:]*contract\(\d, \d\))", rf"\1 using {mma}", source)
    assert forced != source, "no matmul to force"
    return forced


@pytest.fixture(scope="session")
def load_kernel(record):
    compiler = _compiler()
    record("compiled_by", f"libsage_compiler.so {compiler.version} on this machine"
           if compiler else f"PTX from {PTX_DIR}")

    def load(name: str, arch: str = "sm_90a", ptx_version: int | None = None,
             mma: str | None = None) -> PtxKernel:
        """``ptx_version`` (x10) other than the default picks the PTX built
        with it (the copy path depends on it: TMA needs 8.3); ``mma`` forces
        the instruction form of the example's matmuls (`using <mma>`)."""
        suffix = (f".ptx{ptx_version}" if ptx_version else "") + (f".{mma}" if mma else "")
        if compiler:
            source = (ROOT / "examples" / f"{name}.mlir").read_text()
            if mma:
                source = force_mma(source, mma)
            ptx = compiler.compile(source, arch=arch,
                                   ptx_version=ptx_version or DEFAULT_PTX_VERSION)
        else:
            path = PTX_DIR / f"{name}.{arch}{suffix}.ptx"
            if not path.exists():
                pytest.fail(f"{path} missing: run scripts/gpu/build-ptx.sh first")
            ptx = path.read_text()
        return PtxKernel(ptx, name)
    return load


@pytest.fixture(scope="session")
def record():
    """Stores a named result for the run's JSON summary."""
    yield _RESULTS.__setitem__
    out = os.environ.get("SAGE_GPU_RESULTS")
    if out:
        Path(out).write_text(json.dumps(_RESULTS, indent=2, sort_keys=True))
