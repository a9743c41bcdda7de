"""A kernel function's parameters (runtime vs ``sl.constexpr``) and one run of it."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sage.language.core import constexpr
from sage.language.diagnostics import Location, error
from sage.language.loops import rewrite
from sage.language.values import Value


@dataclass(frozen=True)
class KernelSignature:
    """The parameters of a kernel function, in order."""

    runtime: tuple[str, ...]
    constexprs: tuple[str, ...]
    defaults: Mapping[str, Any]


def _is_constexpr(annotation: Any) -> bool:
    if annotation is constexpr:
        return True
    # Under `from __future__ import annotations` the annotation is a string.
    return isinstance(annotation, str) and annotation.split(".")[-1] == "constexpr"


def definition(fn: Callable) -> Location:
    """Where ``fn`` is defined (for errors about the kernel as a whole)."""
    code = fn.__code__
    return Location(code.co_filename, code.co_firstlineno, 1)


def kernel_signature(fn: Callable) -> KernelSignature:
    """Splits ``fn``'s parameters into runtime ones and ``sl.constexpr`` ones."""
    if not callable(fn) or not hasattr(fn, "__code__"):
        raise TypeError(f"a kernel is a Python function, got {fn!r}")
    runtime, constants, defaults = [], [], {}
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise error(f"kernel parameter '{param.name}': *args/**kwargs are not supported",
                        definition(fn))
        (constants if _is_constexpr(param.annotation) else runtime).append(param.name)
        if param.default is not param.empty:
            defaults[param.name] = param.default
    return KernelSignature(tuple(runtime), tuple(constants), defaults)


def constexpr_values(fn: Callable, signature: KernelSignature,
                     given: Mapping[str, Any] | None) -> dict[str, Any]:
    """The constexpr arguments: ``given`` completed by defaults, checked."""
    given = dict(given or {})
    unknown = sorted(set(given) - set(signature.constexprs))
    if unknown:
        hint = [n for n in unknown if n in signature.runtime]
        extra = (f" ({', '.join(hint)} not annotated sl.constexpr)" if hint else "")
        raise error(f"unknown constexpr argument(s) {', '.join(unknown)} for kernel "
                    f"'{fn.__name__}'{extra}", definition(fn))
    values = {}
    for name in signature.constexprs:
        if name in given:
            values[name] = given[name]
        elif name in signature.defaults:
            values[name] = signature.defaults[name]
        else:
            raise error(f"kernel '{fn.__name__}' needs a value for constexpr '{name}'",
                        definition(fn))
        if isinstance(values[name], Value):
            raise error(f"constexpr '{name}' must be a Python value, not a runtime value",
                        definition(fn))
    return values


def check_arity(fn: Callable, signature: KernelSignature, count: int, what: str) -> None:
    """``count`` runtime arguments are given for the kernel's runtime parameters."""
    if count != len(signature.runtime):
        raise error(f"kernel '{fn.__name__}' has {len(signature.runtime)} runtime parameters "
                    f"({', '.join(signature.runtime)}), got {count} {what}", definition(fn))


def run_kernel(fn: Callable, signature: KernelSignature, arguments: Sequence[Value],
               constants: Mapping[str, Any]) -> None:
    """Calls the (loop-rewritten) kernel once on the active backend."""
    kwargs = dict(zip(signature.runtime, arguments))
    kwargs.update(constants)
    result = rewrite(fn)(**kwargs)
    if result is not None:
        raise error(f"kernel '{fn.__name__}' must not return a value; write results with "
                    "sl.store", definition(fn))
