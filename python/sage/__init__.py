"""sage: an MLIR-based kernel compiler for trainable low-bit (SageBwd) attention.

This package holds the Python side: the reference semantics of the dialect
(:mod:`sage.reference`) and the runtime helpers (:mod:`sage.runtime`). It
imports neither torch nor the compiled library at import time.
"""

__version__ = "0.1.0"
