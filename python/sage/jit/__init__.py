"""The JIT: ``@sage.jit`` kernels that specialise, compile through a memory
and disk cache, and launch through the CUDA driver (or run in the
interpreter with SAGE_INTERPRET=1), and ``sage.autotune`` over them. See
docs/jit.md.

Importing this package needs neither torch nor the compiler library; both
are loaded on first use.
"""

import sys
import types
from typing import Any

from sage.jit.autotune import AutotuneError, Autotuner, Config
from sage.jit.compiler import CompiledKernel
from sage.jit.function import JITFunction, SpecializedKernel, jit
from sage.jit import knobs
from sage.jit.knobs import KnobError
from sage.jit.options import LaunchOptions
from sage.jit.specialize import ArgumentError

# The decorator is `sage.autotune`: here `sage.jit.autotune` stays the module
# (a function of that name would hide it, as `jit` would hide this package).
__all__ = ["ArgumentError", "AutotuneError", "Autotuner", "CompiledKernel", "Config",
           "JITFunction", "KnobError", "LaunchOptions", "SpecializedKernel", "jit", "knobs"]


class _DecoratorModule(types.ModuleType):
    """``sage.jit`` is this package *and* the decorator: calling the module
    calls :func:`jit`, so ``@sage.jit`` works while ``import sage.jit.knobs``
    still finds the submodules (a function of the same name would hide them)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return jit(*args, **kwargs)


sys.modules[__name__].__class__ = _DecoratorModule
