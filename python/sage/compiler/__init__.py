"""The sage compiler as seen from Python: sage IR text in, PTX (and every
intermediate product) out, through the native binding over the C API of
``libsage_compiler.so``."""

from sage.compiler.library import (CompilationError, CompileOptions, CompileOutput,
                                   CompilerLibrary, default_library)

__all__ = ["CompilationError", "CompileOptions", "CompileOutput", "CompilerLibrary",
           "default_library"]
