"""The JIT: ``@sage.jit`` kernels that specialise, compile through a memory
and disk cache, and launch through the CUDA driver (or run in the
interpreter with SAGE_INTERPRET=1). See docs/jit.md.

Importing this package needs neither torch nor the compiler library; both
are loaded on first use.
"""

import sys
import types
from typing import Any

from sage.jit.compiler import CompiledKernel
from sage.jit.function import JITFunction, SpecializedKernel, jit
from sage.jit import knobs
from sage.jit.knobs import KnobError
from sage.jit.specialize import ArgumentError

__all__ = ["ArgumentError", "CompiledKernel", "JITFunction", "KnobError",
           "SpecializedKernel", "jit", "knobs"]


class _DecoratorModule(types.ModuleType):
    """``sage.jit`` is this package *and* the decorator: calling the module
    calls :func:`jit`, so ``@sage.jit`` works while ``import sage.jit.knobs``
    still finds the submodules (a function of the same name would hide them)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return jit(*args, **kwargs)


sys.modules[__name__].__class__ = _DecoratorModule
