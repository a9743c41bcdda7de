"""What a kernel is specialised on, and how one call's arguments map to it.

A kernel's parameters are either compile-time (annotated ``sl.constexpr``:
their values are baked into the IR) or runtime (pointers, i32/i64/f32
scalars). For each runtime argument the JIT records, per call:

- a pointer: its element dtype and whether it is 16-byte aligned;
- an integer: i32 or i64 (by value range) and whether it is divisible by 16;
- a float: f32.

Alignment and divisibility become ``sage.alignment`` / ``sage.divisibility``
promises in the IR; ``do_not_specialize`` drops them for a parameter (one
compilation for every value). Together with the constexpr values, the warps
and the target, these form the in-memory key of a compiled kernel.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Iterable, NamedTuple

#: The alignment (bytes) and divisibility the JIT specialises on.
SPECIALIZE_MULTIPLE = 16
_I32_MIN, _I32_MAX = -(2 ** 31), 2 ** 31 - 1
_I64_MIN, _I64_MAX = -(2 ** 63), 2 ** 63 - 1

#: Element dtypes by name (sage.language's names) with their size in bytes.
DTYPE_BYTES = {"int8": 1, "int32": 4, "int64": 8, "float16": 2, "bfloat16": 2,
               "float32": 4}
#: Scalar kinds a runtime argument can have besides a pointer.
SCALAR_KINDS = ("int32", "int64", "float32")


class ArgumentError(TypeError):
    """A kernel argument does not fit the kernel's signature; the message
    names the kernel and the argument."""


@dataclass(frozen=True)
class Param:
    """One parameter of a kernel function.

    ``pointee``: the element dtype name a pointer parameter is declared with
    (``sl.pointer_type(...)`` annotation), ``scalar``: a declared scalar kind
    (``sl.int32``/``int64``/``float32``, ``int``, ``float``); both None when
    the parameter is typed by its argument.
    """

    name: str
    index: int
    constexpr: bool
    specialize: bool
    pointee: str | None = None
    scalar: str | None = None
    strided: bool = False
    default: Any = inspect.Parameter.empty


class ArgKey(NamedTuple):
    """What one runtime argument contributes to the specialisation:
    ``kind`` is "pointer" or a scalar kind, ``dtype`` a pointer's element
    dtype, ``multiple`` whether it is 16-byte aligned (pointer) or divisible
    by 16 (integer). A tuple: it is built on every launch."""

    kind: str
    dtype: str | None = None
    multiple: bool = False

    @property
    def letter(self) -> str:
        """The launch signature letter: P, i, l or f."""
        return {"pointer": "P", "int32": "i", "int64": "l", "float32": "f"}[self.kind]


def _annotation_kind(annotation: Any) -> tuple[bool, str | None, str | None]:
    """(is constexpr, declared pointee dtype, declared scalar kind). Only
    annotation objects declare types; other strings (``from __future__
    import annotations``) and unknown annotations leave the parameter typed
    by its argument, as in ``sage.language``."""
    if isinstance(annotation, str):
        return annotation.split(".")[-1] == "constexpr", None, None
    if annotation is float:
        return False, None, "float32"
    if getattr(annotation, "__name__", None) == "constexpr":
        return True, None, None
    element = getattr(annotation, "element", None)
    if element is not None and not hasattr(annotation, "shape"):
        return False, getattr(element, "name", None), None  # sl.pointer_type(dtype)
    kind = getattr(annotation, "name", None)
    return False, None, kind if kind in SCALAR_KINDS else None


def kernel_params(fn: Callable, do_not_specialize: Iterable[str | int] = (),
                  strided: Iterable[str | int] = ()) -> tuple[Param, ...]:
    """The parameters of a kernel function, classified.

    ``do_not_specialize`` and ``strided`` name runtime parameters (by name or
    position): the first drops alignment/divisibility specialisation, the
    second accepts non-contiguous tensors for a pointer.

    Raises:
        ValueError: naming a parameter that is unknown, constexpr (neither
            option applies to compile-time values), or variadic.
    """
    try:  # string annotations (from __future__ import annotations) evaluated
        signature = inspect.signature(fn, eval_str=True)
    except Exception:  # noqa: BLE001 - an annotation that does not evaluate
        signature = inspect.signature(fn)
    raw = list(signature.parameters.values())
    names = [p.name for p in raw]

    def resolve(items: Iterable[str | int], option: str) -> set[str]:
        chosen = set()
        for item in items:
            if isinstance(item, int) and not isinstance(item, bool):
                if not 0 <= item < len(names):
                    raise ValueError(f"{option}: {fn.__name__} has no parameter #{item}")
                item = names[item]
            if item not in names:
                raise ValueError(f"{option}: {fn.__name__} has no parameter {item!r}")
            chosen.add(item)
        return chosen

    fixed = resolve(do_not_specialize, "do_not_specialize")
    loose = resolve(strided, "strided")
    params = []
    for index, p in enumerate(raw):
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise ValueError(f"kernel {fn.__name__}: parameter {p.name} must be a "
                             "plain positional parameter")
        constexpr, pointee, scalar = _annotation_kind(p.annotation)
        if constexpr and p.name in fixed:
            raise ValueError(f"do_not_specialize: {p.name} of {fn.__name__} is a "
                             "constexpr; its value is always compiled in")
        if constexpr and p.name in loose:
            raise ValueError(f"strided: {p.name} of {fn.__name__} is a constexpr")
        params.append(Param(p.name, index, constexpr, p.name not in fixed, pointee,
                            scalar, p.name in loose, p.default))
    return tuple(params)


_INT_KEYS = {(kind, multiple): ArgKey(kind, None, multiple)
             for kind in ("int32", "int64") for multiple in (False, True)}
_FLOAT_KEY = ArgKey("float32")


def scalar_key(param: Param, value: Any) -> ArgKey:
    """The key of a Python scalar argument (plain ints and floats of an
    untyped parameter take a short path: this runs on every launch).

    Raises:
        ArgumentError: for a value that is no int/float or out of range.
    """
    kind = type(value)
    if param.pointee is None and param.scalar is None:
        if kind is int and _I32_MIN <= value <= _I32_MAX:
            return _INT_KEYS["int32", param.specialize and value % SPECIALIZE_MULTIPLE == 0]
        if kind is float:
            return _FLOAT_KEY
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if hasattr(value, "item") and getattr(value, "ndim", None) == 0:
            value = value.item()  # numpy scalars
        else:
            raise ArgumentError(f"argument {param.name}: expected a tensor, an int or a "
                                f"float, got {type(value).__name__}")
    if param.pointee is not None:
        raise ArgumentError(f"argument {param.name}: expected a tensor of "
                            f"{param.pointee}, got {type(value).__name__}")
    if isinstance(value, float) or param.scalar == "float32":
        if param.scalar not in (None, "float32"):
            raise ArgumentError(f"argument {param.name}: expected an integer "
                                f"({param.scalar}), got {value!r}")
        return _FLOAT_KEY
    kind = param.scalar or ("int32" if _I32_MIN <= value <= _I32_MAX else "int64")
    if kind == "int32" and not _I32_MIN <= value <= _I32_MAX:
        raise ArgumentError(f"argument {param.name}: {value} does not fit in int32")
    if not _I64_MIN <= value <= _I64_MAX:
        raise ArgumentError(f"argument {param.name}: {value} does not fit in int64")
    return _INT_KEYS[kind, param.specialize and value % SPECIALIZE_MULTIPLE == 0]


_POINTER_KEYS: dict[tuple, ArgKey] = {}


def pointer_key(param: Param, dtype: str, address: int) -> ArgKey:
    """The key of a pointer argument of element ``dtype`` at ``address``
    (checked once per parameter, dtype and alignment, then memoised).

    Raises:
        ArgumentError: when the dtype differs from the declared one, or the
            address is not a multiple of the element size.
    """
    aligned = param.specialize and address % SPECIALIZE_MULTIPLE == 0
    memo = (param.name, param.pointee, param.scalar, dtype, aligned)
    known = _POINTER_KEYS.get(memo)
    if known is not None and (aligned or address % DTYPE_BYTES[dtype] == 0):
        return known
    if param.scalar is not None:
        raise ArgumentError(f"argument {param.name}: expected a {param.scalar} scalar, "
                            "got a tensor")
    if param.pointee is not None and dtype != param.pointee:
        raise ArgumentError(f"argument {param.name}: expected a tensor of "
                            f"{param.pointee}, got {dtype}")
    if address % DTYPE_BYTES[dtype]:
        raise ArgumentError(f"argument {param.name}: address {address:#x} is not "
                            f"aligned to its {dtype} elements")
    key = _POINTER_KEYS[memo] = ArgKey("pointer", dtype, aligned)
    return key


def arch_for_capability(major: int, minor: int) -> str:
    """The compile target of a device: sm_90 gets the arch-specific sm_90a
    (wgmma); sm_80/86/89 are used as they are."""
    arch = f"sm_{major}{minor}"
    return "sm_90a" if arch == "sm_90" else arch


def arg_specs(keys: tuple[ArgKey, ...]) -> list[Any]:
    """The runtime arguments as ``sage.language.ArgSpec``, in order."""
    import sage.language as sl

    hint = {True: SPECIALIZE_MULTIPLE, False: None}
    return [sl.ArgSpec.pointer(getattr(sl, key.dtype), hint[key.multiple])
            if key.kind == "pointer" else
            sl.ArgSpec.scalar(getattr(sl, key.kind), hint[key.multiple])
            for key in keys]
