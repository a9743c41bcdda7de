"""GPU tests: skipped without a CUDA device; run by scripts/gpu/run.sh."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from pathlib import Path

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
_RESULTS: dict[str, object] = {}


class PtxKernel:
    """A kernel loaded from sage PTX, launched with its header facts."""

    def __init__(self, ptx: str, name: str, workdir: Path):
        self.ptx = ptx
        self.info = parse_kernel_header(ptx)[name]
        # One file per text: cupy keeps modules by path, so reusing a name
        # for another variant (arch, PTX version) would launch the old code.
        path = workdir / f"{name}-{hashlib.sha1(ptx.encode()).hexdigest()[:12]}.ptx"
        path.write_text(ptx)
        self._module = cp.RawModule(path=str(path))
        self._function = self._module.get_function(name)
        if self.info.shared_memory > 48 * 1024:
            self._function.max_dynamic_shared_size_bytes = self.info.shared_memory

    def __call__(self, grid: tuple[int, ...], *args) -> None:
        if self.info.global_scratch:
            # The kernel's hidden last argument: global memory for the TMA
            # tensor maps it builds, global_scratch bytes per program.
            scratch = cp.empty(math.prod(grid) * self.info.global_scratch, dtype=cp.uint8)
            args += (scratch,)
        self._function(grid, (self.info.threads,), args,
                       shared_mem=self.info.shared_memory)
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
def load_kernel(tmp_path_factory, record):
    compiler = _compiler()
    record("compiled_by", f"libsage_compiler.so {compiler.version} on this machine"
           if compiler else f"PTX from {PTX_DIR}")
    workdir = tmp_path_factory.mktemp("ptx")

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
        return PtxKernel(ptx, name, workdir)
    return load


@pytest.fixture(scope="session")
def record():
    """Stores a named result for the run's JSON summary."""
    yield _RESULTS.__setitem__
    out = os.environ.get("SAGE_GPU_RESULTS")
    if out:
        Path(out).write_text(json.dumps(_RESULTS, indent=2, sort_keys=True))
