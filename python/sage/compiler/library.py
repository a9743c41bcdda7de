"""Loads the self-contained compiler library (``libsage_compiler.so``).

The library links MLIR and LLVM statically and exports a small C API, so it
loads on a machine without LLVM (such as a GPU machine). Compilation runs
in-process through the same named pipeline that ``sage-opt --sage-to-nvvm``
replays.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

_REPO_ROOT = Path(__file__).resolve().parents[3]


class CompilationError(RuntimeError):
    """The compiler rejected its input; the message holds its diagnostics."""


def _default_path() -> Path:
    env = os.environ.get("SAGE_COMPILER_LIBRARY")
    if env:
        return Path(env)
    return _REPO_ROOT / "build" / "lib" / "libsage_compiler.so"


class CompilerLibrary:
    """A loaded ``libsage_compiler.so``.

    Args:
        path: the library; default ``$SAGE_COMPILER_LIBRARY`` or the build
            tree's ``build/lib/libsage_compiler.so``.

    Raises:
        FileNotFoundError: when the library is not there.
    """

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = Path(path) if path is not None else _default_path()
        if not self.path.exists():
            raise FileNotFoundError(
                f"sage compiler library not found at {self.path}: build it with "
                "scripts/setup.sh or set SAGE_COMPILER_LIBRARY")
        lib = ctypes.CDLL(str(self.path))
        lib.sage_compile.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int,
                                     ctypes.c_int, ctypes.POINTER(ctypes.c_void_p),
                                     ctypes.POINTER(ctypes.c_void_p)]
        lib.sage_compile.restype = ctypes.c_int
        lib.sage_free.argtypes = [ctypes.c_void_p]
        lib.sage_free.restype = None
        lib.sage_version.argtypes = []
        lib.sage_version.restype = ctypes.c_char_p
        self._lib = lib

    @property
    def version(self) -> str:
        """``"<release>+<git commit>"`` of the library."""
        return self._lib.sage_version().decode()

    def _take(self, pointer: ctypes.c_void_p) -> str:
        if not pointer.value:
            return ""
        try:
            return ctypes.string_at(pointer.value).decode()
        finally:
            self._lib.sage_free(pointer.value)

    def compile(self, source: str, arch: str = "", num_warps: int = 0,
                ptx_version: int = 80) -> str:
        """Compiles sage IR to PTX (prefixed with ``// sage.kernel`` lines).

        ``arch`` and ``num_warps`` default to the module's own ``sage.target``
        and ``sage.num_warps`` (else sm_90a and 4 warps).

        Raises:
            CompilationError: with every diagnostic of the compiler.
        """
        ptx, error = ctypes.c_void_p(), ctypes.c_void_p()
        status = self._lib.sage_compile(source.encode(), arch.encode(), int(num_warps),
                                        int(ptx_version), ctypes.byref(ptx),
                                        ctypes.byref(error))
        ptx_text, error_text = self._take(ptx), self._take(error)
        if status != 0:
            raise CompilationError(error_text.strip() or "sage compilation failed")
        return ptx_text
