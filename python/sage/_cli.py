"""The console commands ``sage-opt`` and ``sage-translate`` of the installed
package: thin callers of ``sage_opt_main`` / ``sage_translate_main`` in the
compiler library (so the package holds one copy of MLIR). Same options and
output as ``build/bin/sage-opt`` and ``build/bin/sage-translate``."""

from __future__ import annotations

import ctypes
import sys

from sage.compiler.library import default_library_path


def _run(tool: str, symbol: str) -> int:
    path = default_library_path()
    if not path.exists():
        print(f"{tool}: the sage compiler library is not at {path} (reinstall the "
              "package, or set SAGE_COMPILER_LIBRARY)", file=sys.stderr)
        return 1
    main = getattr(ctypes.CDLL(str(path)), symbol)
    main.argtypes = (ctypes.c_int, ctypes.POINTER(ctypes.c_char_p))
    main.restype = ctypes.c_int
    argv = [tool.encode()] + [arg.encode() for arg in sys.argv[1:]]
    sys.stdout.flush()
    sys.stderr.flush()
    return main(len(argv), (ctypes.c_char_p * (len(argv) + 1))(*argv, None))


def sage_opt() -> None:
    """``sage-opt``: the sage pass driver (mlir-opt with the sage dialect and passes)."""
    sys.exit(_run("sage-opt", "sage_opt_main"))


def sage_translate() -> None:
    """``sage-translate``: sage IR to PTX, LLVM IR, lowered MLIR or a cubin."""
    sys.exit(_run("sage-translate", "sage_translate_main"))
