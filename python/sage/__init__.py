"""sage: an MLIR-based kernel compiler for trainable low-bit (SageBwd) attention.

This package holds the Python side: the kernel language
(:mod:`sage.language`), the JIT (:func:`sage.jit`, :mod:`sage.jit`), the
compiler library (:mod:`sage.compiler`), the reference semantics of the
dialect (:mod:`sage.reference`) and the runtime helpers
(:mod:`sage.runtime`). It imports neither torch nor the compiled library at
import time.
"""

__version__ = "0.1.0"

# `sage.jit` is both the JIT package and the decorator (`@sage.jit`): the
# package module is callable (see sage/jit/__init__.py).
from sage import jit  # noqa: E402

__all__ = ["jit"]
