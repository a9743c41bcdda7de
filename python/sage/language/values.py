"""Values of a kernel (scalars, pointers, tiles) and the active backend.

A :class:`Value` pairs a type with a backend *handle*: an SSA name while
tracing to IR, a numpy value while interpreting. Operators on values go
through :mod:`sage.language.elementwise`, so both backends share every type
rule and error.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sage.language.core import DType, PointerType, TileType, Type, element_of
from sage.language.diagnostics import error

# Per thread: the interpreter runs the programs of a thread-block cluster in
# threads of their own, each with its backend.
_STATE = threading.local()


def _backends() -> list[Any]:
    stack = getattr(_STATE, "backends", None)
    if stack is None:
        stack = _STATE.backends = []
    return stack


@contextmanager
def using_backend(backend: Any) -> Iterator[Any]:
    """Makes ``backend`` (an IR builder or the interpreter) run the ``sl`` calls."""
    stack = _backends()
    stack.append(backend)
    try:
        yield backend
    finally:
        stack.pop()


def backend() -> Any:
    """The backend of the kernel being traced or interpreted."""
    stack = _backends()
    if not stack:
        raise error("sage.language functions run only inside a kernel "
                    "(sl.trace, sl.interpret or @sage.jit)")
    return stack[-1]


class Value:
    """A runtime value of a kernel: a scalar, a pointer or a rank-2 tile."""

    __slots__ = ("type", "handle")
    __hash__ = None  # == builds a comparison, so values are not hashable

    def __init__(self, type_: Type, handle: Any):
        self.type = type_
        self.handle = handle

    @property
    def is_tile(self) -> bool:
        return isinstance(self.type, TileType)

    @property
    def is_pointer(self) -> bool:
        return isinstance(self.type, PointerType)

    @property
    def shape(self) -> tuple[int, ...]:
        """``(M, N)`` for a tile, ``()`` for a scalar or pointer."""
        return self.type.shape if isinstance(self.type, TileType) else ()

    @property
    def dtype(self) -> DType | PointerType:
        """The element dtype of a tile or scalar; the pointer type of a pointer."""
        return self.type if self.is_pointer else element_of(self.type)

    def __repr__(self) -> str:
        return f"<sage value {self.type.mlir}>"

    def __bool__(self) -> bool:
        raise error("a runtime value has no Python truth value: use sl.where for "
                    "per-element choices, or make the condition an sl.constexpr")

    def __iter__(self):
        raise error(f"cannot iterate over a runtime value of type {self.type.mlir} "
                    "(use sl.range for runtime loops)")

    def __index__(self) -> int:
        raise error(f"a runtime {self.type.mlir} value is not a compile-time integer: "
                    "shapes, axes and Python ranges need sl.constexpr values")

    def to(self, dtype: DType) -> Value:
        """This value converted to ``dtype`` (same shape)."""
        return _ew.cast(self, dtype)

    def broadcast_to(self, shape: tuple[int, int]) -> Value:
        """This tile with its size-1 dimensions repeated up to ``shape``."""
        from sage.language.ops import broadcast
        return broadcast(self, shape)

    def __add__(self, other): return _ew.binary("add", self, other)
    def __radd__(self, other): return _ew.binary("add", other, self)
    def __sub__(self, other): return _ew.binary("sub", self, other)
    def __rsub__(self, other): return _ew.binary("sub", other, self)
    def __mul__(self, other): return _ew.binary("mul", self, other)
    def __rmul__(self, other): return _ew.binary("mul", other, self)
    def __truediv__(self, other): return _ew.binary("div", self, other)
    def __rtruediv__(self, other): return _ew.binary("div", other, self)
    def __floordiv__(self, other): return _ew.binary("floordiv", self, other)
    def __rfloordiv__(self, other): return _ew.binary("floordiv", other, self)
    def __mod__(self, other): return _ew.binary("mod", self, other)
    def __rmod__(self, other): return _ew.binary("mod", other, self)
    def __and__(self, other): return _ew.binary("and", self, other)
    def __rand__(self, other): return _ew.binary("and", other, self)
    def __or__(self, other): return _ew.binary("or", self, other)
    def __ror__(self, other): return _ew.binary("or", other, self)
    def __xor__(self, other): return _ew.binary("xor", self, other)
    def __rxor__(self, other): return _ew.binary("xor", other, self)
    def __lt__(self, other): return _ew.compare("lt", self, other)
    def __le__(self, other): return _ew.compare("le", self, other)
    def __gt__(self, other): return _ew.compare("gt", self, other)
    def __ge__(self, other): return _ew.compare("ge", self, other)
    def __eq__(self, other): return _ew.compare("eq", self, other)  # type: ignore[override]
    def __ne__(self, other): return _ew.compare("ne", self, other)  # type: ignore[override]
    def __neg__(self): return _ew.negate(self)
    def __abs__(self): return _ew.unary("abs", self)
    def __invert__(self): return _ew.invert(self)


from sage.language import elementwise as _ew  # noqa: E402  (operators need the values)
