"""sage: an MLIR-based kernel compiler for trainable low-bit (SageBwd) attention.

This package holds the Python side: the kernel language
(:mod:`sage.language`), the JIT (:func:`sage.jit`, :mod:`sage.jit`; autotuning
with :func:`sage.autotune` over :class:`sage.Config`), the
compiler library (:mod:`sage.compiler`), the reference semantics of the
dialect (:mod:`sage.reference`), the runtime helpers (:mod:`sage.runtime`)
and :func:`sage.attention` (SageBwd INT8 attention for torch, loaded on first
access from :mod:`sage.attention_api`). It imports neither torch nor the
compiled library at import time.
"""

from typing import Any

__version__ = "0.1.0"

# `sage.jit` is both the JIT package and the decorator (`@sage.jit`): the
# package module is callable (see sage/jit/__init__.py).
from sage import jit  # noqa: E402
from sage.jit.autotune import Config, autotune  # noqa: E402

# `attention` is not in __all__: `from sage import *` stays torch-free.
__all__ = ["Config", "autotune", "jit"]


def __getattr__(name: str) -> Any:
    """``sage.attention`` on first access (it imports torch)."""
    if name == "attention":
        try:
            from sage.attention_api import attention
        except ModuleNotFoundError as error:
            if error.name != "torch":
                raise
            raise ImportError("sage.attention needs PyTorch (import torch failed); the "
                              "rest of sage works without it") from error
        globals()["attention"] = attention
        return attention
    raise AttributeError(f"module 'sage' has no attribute {name!r}")
