"""The sage compiler as seen from Python: sage IR text in, PTX out."""

from sage.compiler.library import CompilationError, CompilerLibrary

__all__ = ["CompilationError", "CompilerLibrary"]
