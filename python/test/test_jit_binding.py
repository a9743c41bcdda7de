"""The native binding (sage._sage) over the compiler library's C API."""

from __future__ import annotations

import ctypes
import shutil
from pathlib import Path

import pytest

from sage.compiler import CompilationError, CompileOptions, CompilerLibrary
from sage.compiler.binding import load_binding
from sage.compiler.library import DEFAULT_PTX_VERSION
from sage.runtime import parse_kernel_header

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = (ROOT / "examples" / "quant_matmul.mlir").read_text()


def test_every_product_of_one_compilation(library):
    out = library.compile_all(EXAMPLE, CompileOptions(arch="sm_80", num_warps=8,
                                                      capture_passes=True))
    assert parse_kernel_header(out.ptx)["quant_matmul"].threads == 256
    assert "define ptx_kernel void @quant_matmul" in out.llvm_ir
    assert "llvm.func @quant_matmul" in out.lowered_mlir
    assert out.passes.count("// -----// IR Dump After") > 5
    assert "SageDecompose" in out.passes or "sage-decompose" in out.passes
    assert out.cubin == b"" and out.ptxas_log == ""


def test_ir_dump_file_written(library, tmp_path):
    dump = tmp_path / "passes.mlir"
    library.compile_all(EXAMPLE, CompileOptions(ir_dump_path=str(dump)))
    assert dump.read_text().count("IR Dump After") > 5


def test_lowered_input_without_pipeline(library):
    lowered = library.compile_all(EXAMPLE).lowered_mlir
    again = library.compile_all(lowered, CompileOptions(run_pipeline=False))
    assert again.ptx == library.compile(EXAMPLE)


@pytest.mark.skipif(not (shutil.which("ptxas") or Path("/usr/local/cuda/bin/ptxas").exists()),
                    reason="no ptxas")
def test_cubin_and_ptxas_log(library):
    assert library.find_ptxas() is not None
    assert library.ptxas_version().startswith("Build cuda_")
    out = library.compile_all(EXAMPLE, CompileOptions(arch="sm_90a", emit_cubin=True))
    assert out.cubin[:4] == b"\x7fELF"
    assert "Compiling entry function 'quant_matmul' for 'sm_90a'" in out.ptxas_log


def test_missing_ptxas_is_a_diagnostic(library, tmp_path, monkeypatch):
    monkeypatch.setenv("SAGE_PTXAS", str(tmp_path / "no-ptxas"))
    assert library.find_ptxas() is None
    with pytest.raises(CompilationError, match="a cubin needs ptxas"):
        library.compile_all(EXAMPLE, CompileOptions(emit_cubin=True))


def test_errors_carry_every_diagnostic(library):
    with pytest.raises(CompilationError) as error:
        library.compile_all("func.func @k( {", CompileOptions(source_name="k.mlir"))
    assert "k.mlir:1:14: error: expected non-function type" in str(error.value)
    assert error.value.diagnostics.startswith("k.mlir:1:14")
    with pytest.raises(CompilationError, match="'sage.target' must be one of"):
        library.compile("module {}", arch="sm_70")


def test_version_matches_the_c_api(library):
    raw = ctypes.CDLL(str(library.path))
    raw.sage_version.restype = ctypes.c_char_p
    assert library.version == raw.sage_version().decode()
    assert library.version.startswith("0.1.0+")


def test_simple_c_entry_point_still_works(library):
    """sage_compile/sage_free (the first C API) keep working for FFI users."""
    raw = ctypes.CDLL(str(library.path))
    raw.sage_compile.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int,
                                 ctypes.c_int, ctypes.POINTER(ctypes.c_void_p),
                                 ctypes.POINTER(ctypes.c_void_p)]
    raw.sage_free.argtypes = [ctypes.c_void_p]
    ptx, error = ctypes.c_void_p(), ctypes.c_void_p()
    assert raw.sage_compile(EXAMPLE.encode(), b"sm_90a", 4, DEFAULT_PTX_VERSION,
                            ctypes.byref(ptx), ctypes.byref(error)) == 0
    assert ctypes.string_at(ptx.value).decode() == library.compile(EXAMPLE)
    raw.sage_free(ptx.value)


def test_only_the_c_api_is_exported(library):
    import subprocess
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(library.path)],
                             capture_output=True, text=True, check=True).stdout
    exported = sorted(line.split()[-1] for line in symbols.splitlines()
                      if line.split()[1] in "TDB")
    assert exported == sorted(["sage_compile", "sage_compile_ex", "sage_compile_options_init",
                               "sage_find_ptxas", "sage_free", "sage_opt_main",
                               "sage_result_free", "sage_result_get", "sage_result_ok",
                               "sage_translate_main", "sage_version"])


def test_wrong_library_is_a_clear_error(tmp_path):
    fake = tmp_path / "libsage_compiler.so"
    fake.write_bytes(b"not a library")
    with pytest.raises(RuntimeError, match="cannot load the sage compiler library"):
        CompilerLibrary(fake)


def test_driver_errors_without_a_gpu():
    binding = load_binding()
    if binding.cuda_available():
        pytest.skip("a CUDA driver is present")
    with pytest.raises(binding.CudaError, match="libcuda|cuInit"):
        binding.device_count()
    with pytest.raises(binding.CudaError):
        binding.Kernel(b"", "k", 0, 128, 0, "P")


def test_bad_launch_signature_is_rejected():
    binding = load_binding()
    with pytest.raises(ValueError, match="bad kernel signature"):
        binding.Kernel(b"", "k", 0, 128, 0, "Px")


def test_bad_cluster_size_is_rejected():
    binding = load_binding()
    with pytest.raises(ValueError, match="programs per cluster must be >= 1, got 0"):
        binding.Kernel(b"", "k", 0, 128, 0, "P", [], 0)
