"""The self-contained compiler library (``libsage_compiler.so``) from Python.

The library links MLIR and LLVM statically and exports a small C API, so it
loads on a machine without LLVM (such as a GPU machine). The native binding
``sage._sage`` opens it and calls that API; compilation runs in-process
through the same named pipeline that ``sage-opt --sage-to-nvvm`` replays.
"""

from __future__ import annotations

import functools
import hashlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from sage.compiler.binding import load_binding
from sage.jit.knobs import knobs

_REPO_ROOT = Path(__file__).resolve().parents[3]
#: The PTX ISA version (x10) compiled for unless told, as in the C API: 8.4,
#: which TMA copies (``tensormap.replace``, 8.3) and wgmma with mixed
#: integer types (u8 x s8, 8.4) need.
DEFAULT_PTX_VERSION = 84


class CompilationError(RuntimeError):
    """The compiler rejected its input; the message holds its diagnostics."""

    def __init__(self, diagnostics: str):
        super().__init__(diagnostics.strip() or "sage compilation failed")
        self.diagnostics = diagnostics


@dataclass(frozen=True)
class CompileOptions:
    """Every setting of one compilation (see ``sage/Compiler/CApi.h``).

    ``arch`` "" and ``num_warps`` 0 keep the module's own ``sage.target`` and
    ``sage.num_warps`` (else sm_90a and 4 warps).
    """

    arch: str = ""
    num_warps: int = 0
    ptx_version: int = DEFAULT_PTX_VERSION
    run_pipeline: bool = True
    emit_cubin: bool = False
    capture_passes: bool = False
    ir_dump_path: str = ""
    source_name: str = ""


@dataclass(frozen=True)
class CompileOutput:
    """Every product of a successful compilation."""

    ptx: str
    llvm_ir: str
    lowered_mlir: str
    passes: str
    cubin: bytes
    ptxas_log: str
    diagnostics: str


#: Where an installed package keeps the library (sage/lib, pyproject.toml).
_INSTALLED = Path(__file__).resolve().parents[1] / "lib" / "libsage_compiler.so"


def default_library_path() -> Path:
    """``$SAGE_COMPILER_LIBRARY``, else the installed package's library, else
    the build tree's (a source checkout, or an editable install: its Python
    files stay in the checkout)."""
    configured = knobs.compiler_library.get()
    if configured:
        return configured
    return _INSTALLED if _INSTALLED.exists() else \
        _REPO_ROOT / "build" / "lib" / "libsage_compiler.so"


class CompilerLibrary:
    """A loaded ``libsage_compiler.so``.

    Args:
        path: the library; default :func:`default_library_path`.

    Raises:
        FileNotFoundError: when the library is not there.
        ImportError: when the native binding is not built.
    """

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = Path(path) if path is not None else default_library_path()
        if not self.path.exists():
            raise FileNotFoundError(
                f"sage compiler library not found at {self.path}: build it with "
                "scripts/setup.sh or set SAGE_COMPILER_LIBRARY")
        self._compiler = load_binding().Compiler(str(self.path))

    @property
    def version(self) -> str:
        """``"<release>+<git commit>"`` of the library."""
        return self._compiler.version

    @functools.cached_property
    def file_hash(self) -> str:
        """SHA-256 of the library file (part of the JIT's cache key)."""
        return _file_sha256(self.path)

    def find_ptxas(self) -> Path | None:
        """The ptxas a cubin compilation runs, or None."""
        found = self._compiler.find_ptxas()
        return Path(found) if found else None

    def ptxas_version(self) -> str | None:
        """The last line of ``ptxas --version``, or None without ptxas."""
        ptxas = self.find_ptxas()
        return _ptxas_version(str(ptxas), ptxas.stat().st_mtime_ns) if ptxas else None

    def compile_all(self, source: str, options: CompileOptions = CompileOptions()
                    ) -> CompileOutput:
        """Compiles sage IR and returns every product.

        Raises:
            CompilationError: with every diagnostic of the compiler.
        """
        out = self._compiler.compile(
            source, arch=options.arch, num_warps=int(options.num_warps),
            ptx_version=int(options.ptx_version), run_pipeline=options.run_pipeline,
            emit_cubin=options.emit_cubin, capture_passes=options.capture_passes,
            ir_dump_path=options.ir_dump_path, source_name=options.source_name)
        if not out.ok:
            raise CompilationError(out.diagnostics)
        return CompileOutput(out.ptx, out.llvm_ir, out.lowered_mlir, out.passes,
                             bytes(out.cubin), out.ptxas_log, out.diagnostics)

    def compile(self, source: str, arch: str = "", num_warps: int = 0,
                ptx_version: int = DEFAULT_PTX_VERSION) -> str:
        """Compiles sage IR to PTX (prefixed with ``// sage.kernel`` lines).

        Raises:
            CompilationError: with every diagnostic of the compiler.
        """
        options = CompileOptions(arch=arch, num_warps=num_warps, ptx_version=ptx_version)
        return self.compile_all(source, options).ptx


@functools.lru_cache(maxsize=None)
def _ptxas_version(path: str, mtime_ns: int) -> str:
    text = subprocess.run([path, "--version"], capture_output=True, text=True,
                          check=True).stdout
    return text.strip().splitlines()[-1]


@functools.lru_cache(maxsize=None)
def _file_sha256_cached(path: str, mtime_ns: int, size: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _file_sha256(path: Path) -> str:
    stat = path.stat()
    return _file_sha256_cached(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=None)
def default_library() -> CompilerLibrary:
    """The library the JIT uses (loaded once per process)."""
    return CompilerLibrary()
