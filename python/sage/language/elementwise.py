"""Elementwise math on scalars and tiles: constants, promotion, casts.

Rules (docs/language.md, "Values and types"):

* A Python number next to a value takes the value's dtype (an int constant
  next to a float value becomes a float; a float constant next to an integer
  value is an error).
* Two integer values of different widths: the narrower is sign-extended.
  Two float values of different dtypes: both become the wider (f16 with bf16
  gives f32). An integer value with a float value is an error: cast first.
* A scalar next to a tile is splat to the tile's shape; two tiles broadcast
  their size-1 dimensions (``sage.broadcast``).
"""

from __future__ import annotations

from sage.language.core import (DType, TileType, Type, element_of, float32, int1, int32,
                                int64, uint8)
from sage.language.diagnostics import error
from sage.language.values import Value, backend

Operand = Value | int | float | bool

# Python-level operator name -> (float op, integer op); None: not defined.
_BINARY = {
    "add": ("arith.addf", "arith.addi"),
    "sub": ("arith.subf", "arith.subi"),
    "mul": ("arith.mulf", "arith.muli"),
    "div": ("arith.divf", None),
    "floordiv": (None, "arith.divsi"),
    "mod": ("arith.remf", "arith.remsi"),
    "maximum": ("arith.maximumf", "arith.maxsi"),
    "minimum": ("arith.minimumf", "arith.minsi"),
    "and": (None, "arith.andi"),
    "or": (None, "arith.ori"),
    "xor": (None, "arith.xori"),
}
_PREDICATES = {  # name -> (cmpf predicate, cmpi predicate)
    "lt": ("olt", "slt"), "le": ("ole", "sle"), "gt": ("ogt", "sgt"),
    "ge": ("oge", "sge"), "eq": ("oeq", "eq"), "ne": ("une", "ne"),
}
_UNARY = {  # name -> (float op, integer op)
    "exp2": ("math.exp2", None), "log2": ("math.log2", None),
    "exp": ("math.exp", None), "log": ("math.log", None),
    "sqrt": ("math.sqrt", None), "abs": ("math.absf", "math.absi"),
    "neg": ("arith.negf", None), "floor": ("math.floor", None),
}
_INT_RANGE = {1: (0, 1), 8: (-2**7, 2**7 - 1), 32: (-2**31, 2**31 - 1),
              64: (-2**63, 2**63 - 1)}


def with_element(type_: Type, dtype: DType) -> Type:
    """``type_`` (scalar or tile) with its element replaced by ``dtype``."""
    return TileType(type_.shape, dtype) if isinstance(type_, TileType) else dtype


def constant(value: int | float | bool, type_: Type) -> Value:
    """A constant of ``type_`` (a scalar dtype or a tile type)."""
    dtype = element_of(type_)
    if isinstance(value, Value):
        raise error("expected a Python number here, got a runtime value")
    if not isinstance(value, (bool, int, float)):
        raise error(f"expected a number, got {type(value).__name__}")
    if dtype.is_int:
        if isinstance(value, float):
            raise error(f"float constant {value!r} where an integer ({dtype.mlir}) is needed")
        low, high = _INT_RANGE[dtype.bits]
        if not low <= int(value) <= high:
            raise error(f"constant {value} does not fit {dtype.mlir}")
        value = bool(value) if dtype is int1 else int(value)
    else:
        value = float(value)
    return Value(type_, backend().constant(value, type_))


def python_dtype(value: int | float | bool) -> DType:
    """The dtype a lone Python number gets: i1, i32 (i64 if it needs it) or f32."""
    if isinstance(value, bool):
        return int1
    if isinstance(value, int):
        low, high = _INT_RANGE[32]
        return int32 if low <= value <= high else int64
    if isinstance(value, float):
        return float32
    raise error(f"expected a runtime value or a number, got {type(value).__name__}")


def to_value(x: Operand, dtype: DType | None = None) -> Value:
    """``x`` itself, or a Python number as a scalar constant (of ``dtype`` if given)."""
    if isinstance(x, Value):
        return x
    return constant(x, dtype or python_dtype(x))


def cast(x: Operand, dtype: DType) -> Value:
    """``x`` converted to ``dtype`` (``.to(dtype)``), keeping its shape."""
    if not isinstance(dtype, DType):
        raise error(f"cast target must be a dtype such as sl.float32, got {dtype!r}")
    x = to_value(x)
    if x.is_pointer:
        raise error("a pointer cannot be converted; use sl.addptr for offsets")
    source = x.dtype
    if source == dtype:
        return x
    if dtype is uint8 or (source is uint8 and dtype.bits <= 8):
        # Unsigned bytes come only from a quantize; they are read by the
        # matmul or dequantize of that quantization, or widened (as
        # unsigned) to a wider integer or a float.
        raise error(f"no cast to uint8 or from it to {dtype.mlir}: an sl.uint8_per_* "
                    "quantization feeds sl.qmatmul or sl.dequantize, or widens to a wider "
                    "integer or a float")
    if dtype is int1:
        raise error("no cast to i1: compare instead (x != 0)")
    result = with_element(x.type, dtype)
    if source.is_float and dtype.is_float and 16 == source.bits == dtype.bits:
        return cast(cast(x, float32), dtype)  # f16 <-> bf16 goes through f32
    if source.is_int and dtype.is_int:
        op = ("arith.extui" if source in (int1, uint8) else "arith.extsi") \
            if dtype.bits > source.bits else "arith.trunci"
    elif source.is_float and dtype.is_float:
        op = "arith.extf" if dtype.bits > source.bits else "arith.truncf"
    elif dtype.is_float:
        op = "arith.uitofp" if source in (int1, uint8) else "arith.sitofp"
    else:
        op = "arith.fptosi"
    return Value(result, backend().cast(op, x, result))


def bitcast(x: Operand, dtype: DType) -> Value:
    """``x``'s bits read as ``dtype`` (``arith.bitcast``), keeping its shape: an
    i32 as an f32 or back. Integer arithmetic on a float's bits (its
    exponent field, its low mantissa bits) and floats assembled from bits
    go through it.

    Raises:
        CompilationError: for a pointer, or another pair of dtypes.
    """
    if not isinstance(dtype, DType):
        raise error(f"bitcast target must be a dtype such as sl.float32, got {dtype!r}")
    x = to_value(x)
    if x.is_pointer:
        raise error("a pointer cannot be bitcast; use sl.addptr for offsets")
    if x.dtype == dtype:
        return x
    if {x.dtype, dtype} != {int32, float32}:
        raise error(f"sl.bitcast reads i32 as f32 or f32 as i32, got {x.dtype.mlir} to "
                    f"{dtype.mlir}")
    result = with_element(x.type, dtype)
    return Value(result, backend().cast("arith.bitcast", x, result))


def _common_dtype(a: DType, b: DType) -> DType:
    if a == b:
        return a
    if a.is_float and b.is_float:
        return a if a.bits > b.bits else b if b.bits > a.bits else float32
    if a.kind == b.kind == "int":
        return a if a.bits > b.bits else b
    raise error(f"operands have different types {a.mlir} and {b.mlir}: "
                f"convert one explicitly with .to(...)")


def _common_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    if not a or not b:
        return a or b
    shape = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise error(f"tile shapes {a} and {b} do not broadcast "
                        "(dimensions must match or be 1)")
        shape.append(max(x, y))
    return tuple(shape)


def to_shape(x: Value, shape: tuple[int, ...]) -> Value:
    """A scalar splat, or a tile broadcast, to ``shape`` (``()`` keeps a scalar)."""
    if x.shape == shape or not shape:
        return x
    from sage.language.ops import broadcast, splat
    return broadcast(x, shape) if x.is_tile else splat(x, shape)


def promote(*operands: Operand) -> list[Value]:
    """Values of one dtype and one shape (see the module rules)."""
    values = [x for x in operands if isinstance(x, Value)]
    if not values:
        values = [to_value(operands[0])]
    for v in values:
        if v.is_pointer:
            raise error("pointers support only + (an element offset); "
                        "use sl.addptr or ptr + offset")
    dtype = values[0].dtype
    shape = values[0].shape
    for v in values[1:]:
        dtype = _common_dtype(dtype, v.dtype)
        shape = _common_shape(shape, v.shape)
    out = []
    for x in operands:
        if not isinstance(x, Value):
            x = constant(x, TileType(shape, dtype) if shape else dtype)
        out.append(to_shape(cast(x, dtype), shape))
    return out


def _op_for(table: dict, name: str, dtype: DType, what: str) -> str:
    float_op, int_op = table[name]
    op = float_op if dtype.is_float else int_op
    if op is None:
        kind = "float" if dtype.is_float else "integer"
        hint = {"div": " (use // for integer division)",
                "floordiv": " (use / for floats)"}.get(name, "")
        raise error(f"{what} '{name}' is not defined on {kind} values ({dtype.mlir}){hint}")
    return op


def binary(name: str, a: Operand, b: Operand) -> Value:
    """``a <name> b`` elementwise: add, sub, mul, div, floordiv, mod, maximum,
    minimum, and, or, xor. Integer ``//`` and ``%`` truncate toward zero."""
    pointers = [x for x in (a, b) if isinstance(x, Value) and x.is_pointer]
    if name == "add" and len(pointers) == 1:
        from sage.language.ops import addptr
        return addptr(pointers[0], b if a is pointers[0] else a)
    a, b = promote(a, b)
    op = _op_for(_BINARY, name, a.dtype, "operator")
    return Value(a.type, backend().arith(op, [a, b], a.type))


def compare(name: str, a: Operand, b: Operand) -> Value:
    """``a <name> b`` elementwise (lt, le, gt, ge, eq, ne), an i1 result."""
    a, b = promote(a, b)
    float_pred, int_pred = _PREDICATES[name]
    op, pred = ("arith.cmpf", float_pred) if a.dtype.is_float else ("arith.cmpi", int_pred)
    result = with_element(a.type, int1)
    return Value(result, backend().compare(op, pred, a, b, result))


def unary(name: str, x: Operand) -> Value:
    """``name(x)`` elementwise: exp2, log2, exp, log, sqrt, abs, neg, floor."""
    x = to_value(x)
    if x.is_pointer:
        raise error(f"'{name}' is not defined on pointers")
    op = _op_for(_UNARY, name, x.dtype, "function")
    if op == "math.absi" and x.dtype is int1:
        return x
    return Value(x.type, backend().arith(op, [x], x.type))


def negate(x: Value) -> Value:
    """``-x``: ``arith.negf`` for floats, ``0 - x`` for integers."""
    return unary("neg", x) if x.dtype.is_float else binary("sub", 0, x)


def invert(x: Value) -> Value:
    """``~x``: logical not of an i1 value, bitwise not of an integer."""
    if x.dtype.is_float:
        raise error("'~' needs integer or boolean operands")
    return binary("xor", x, True if x.dtype is int1 else -1)


def where(condition: Operand, a: Operand, b: Operand) -> Value:
    """``a`` where ``condition`` (i1) holds, else ``b``, elementwise (``arith.select``)."""
    condition = to_value(condition)
    if condition.is_pointer or condition.dtype is not int1:
        raise error(f"sl.where needs an i1 condition (a comparison), got {condition.type.mlir}")
    a, b = promote(a, b)
    shape = _common_shape(condition.shape, a.shape)
    condition, a, b = (to_shape(v, shape) for v in (condition, a, b))
    return Value(a.type, backend().select(condition, a, b, a.type))


def maximum(a: Operand, b: Operand) -> Value:
    """Elementwise maximum (a NaN operand gives NaN)."""
    return binary("maximum", a, b)


def minimum(a: Operand, b: Operand) -> Value:
    """Elementwise minimum (a NaN operand gives NaN)."""
    return binary("minimum", a, b)


def fma(a: Operand, b: Operand, c: Operand) -> Value:
    """``a * b + c`` elementwise with one rounding (``math.fma``; floats).

    The operands broadcast to a common shape and type as in ``a * b``.
    """
    a, b, c = promote(a, b, c)
    if a.is_pointer or not a.dtype.is_float:
        raise error(f"sl.fma needs float operands, got {a.type.mlir}")
    return Value(a.type, backend().arith("math.fma", [a, b, c], a.type))


def exp2(x: Operand) -> Value:
    """Elementwise ``2 ** x`` (floats)."""
    return unary("exp2", x)


def log2(x: Operand) -> Value:
    """Elementwise base-2 logarithm (floats)."""
    return unary("log2", x)


def exp(x: Operand) -> Value:
    """Elementwise ``e ** x`` (floats)."""
    return unary("exp", x)


def log(x: Operand) -> Value:
    """Elementwise natural logarithm (floats)."""
    return unary("log", x)


def floor(x: Operand) -> Value:
    """Elementwise round toward minus infinity (floats)."""
    return unary("floor", x)


def sqrt(x: Operand) -> Value:
    """Elementwise square root (floats)."""
    return unary("sqrt", x)


def abs(x: Operand) -> Value:  # noqa: A001  (sl.abs, as numpy's)
    """Elementwise absolute value."""
    return unary("abs", x)

