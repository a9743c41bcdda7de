"""The self-contained compiler library, loaded from Python (needs the build)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from sage.compiler import CompilationError, CompilerLibrary
from sage.compiler.library import DEFAULT_PTX_VERSION
from sage.runtime import parse_kernel_header

ROOT = Path(__file__).resolve().parents[2]


def test_compiles_an_example_to_ptx_for_both_paths(library):
    source = (ROOT / "examples" / "quant_matmul.mlir").read_text()
    hopper = library.compile(source, arch="sm_90a")
    assert parse_kernel_header(hopper)["quant_matmul"].threads == 128
    assert "wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8" in hopper
    ampere = library.compile(source, arch="sm_80", num_warps=8)
    assert parse_kernel_header(ampere)["quant_matmul"].threads == 256
    assert "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32" in ampere


def test_same_ptx_as_sage_translate(library):
    path = ROOT / "examples" / "half_matmul.mlir"
    # The PTX version is named: it selects TMA copies, and the tool's default
    # is its own business.
    tool = subprocess.run([str(ROOT / "build" / "bin" / "sage-translate"), str(path),
                           f"--ptx-version={DEFAULT_PTX_VERSION}"],
                          capture_output=True, text=True, check=True).stdout
    assert library.compile(path.read_text()) == tool


def test_errors_carry_the_diagnostics(library):
    with pytest.raises(CompilationError,
                       match=r"sage-input:1:14: error: expected non-function type"):
        library.compile("func.func @k( {")
    with pytest.raises(CompilationError, match="'sage.target' must be one of"):
        library.compile("module {}", arch="sm_70")


def test_version_names_the_commit(library):
    release, _, commit = library.version.partition("+")
    assert release == "0.1.0" and commit


def test_library_depends_only_on_system_basics(library):
    """Nothing from LLVM or a non-base system library is needed at load time."""
    needed = subprocess.run(["readelf", "-d", str(library.path)], capture_output=True,
                            text=True, check=True).stdout
    libs = sorted(line.split("[")[1].split("]")[0]
                  for line in needed.splitlines() if "(NEEDED)" in line)
    allowed = {"libc.so.6", "libm.so.6", "libz.so.1", "libzstd.so.1",
               "ld-linux-x86-64.so.2"}
    assert set(libs) <= allowed, libs


def test_missing_library_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="sage compiler library not found"):
        CompilerLibrary(tmp_path / "libsage_compiler.so")
