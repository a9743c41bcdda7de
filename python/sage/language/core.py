"""Types of the kernel language: element dtypes, pointer/tile types, schemes,
``constexpr`` and the description of a runtime argument (:class:`ArgSpec`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sage.reference.quant import INT8_MAX, UINT8_MAX


@dataclass(frozen=True)
class DType:
    """An element type: ``name`` is the Python-side name, ``mlir`` the IR spelling."""

    name: str
    mlir: str
    kind: str  # "int", "float" or "bool"
    bits: int
    numpy: type  # how the interpreter holds it (bf16 lives in float32)

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        """Signless integers (i1 included)."""
        return self.kind in ("int", "bool")

    def __repr__(self) -> str:
        return f"sl.{self.name}"

    def __str__(self) -> str:
        return self.mlir


int1 = DType("int1", "i1", "bool", 1, np.bool_)
int8 = DType("int8", "i8", "int", 8, np.int8)
#: Unsigned bytes (an ``sl.uint8_per_*`` quantization): ``i8`` in the IR,
#: read as unsigned by ``sl.qmatmul``.
uint8 = DType("uint8", "i8", "int", 8, np.uint8)
int32 = DType("int32", "i32", "int", 32, np.int32)
int64 = DType("int64", "i64", "int", 64, np.int64)
float16 = DType("float16", "f16", "float", 16, np.float16)
bfloat16 = DType("bfloat16", "bf16", "float", 16, np.float32)
float32 = DType("float32", "f32", "float", 32, np.float32)

DTYPES = (int1, int8, uint8, int32, int64, float16, bfloat16, float32)


@dataclass(frozen=True)
class PointerType:
    """A pointer to global memory holding ``element`` values (``!sage.ptr<...>``)."""

    element: DType

    @property
    def mlir(self) -> str:
        return f"!sage.ptr<{self.element.mlir}>"

    def __str__(self) -> str:
        return self.mlir


def pointer_type(dtype: DType) -> PointerType:
    """The type of a pointer to ``dtype`` elements."""
    if not isinstance(dtype, DType) or dtype in (int1, uint8):
        raise TypeError(f"a pointer holds i8, i32, i64, f16, bf16 or f32, got {dtype!r}")
    return PointerType(dtype)


@dataclass(frozen=True)
class TileType:
    """A rank-2 statically shaped tile (``tensor<MxNxT>``)."""

    shape: tuple[int, int]
    element: DType

    @property
    def mlir(self) -> str:
        return f"tensor<{self.shape[0]}x{self.shape[1]}x{self.element.mlir}>"

    def __str__(self) -> str:
        return self.mlir


Type = DType | PointerType | TileType


def element_of(type_: Type) -> DType:
    """The element dtype of a scalar or tile type."""
    return type_.element if isinstance(type_, TileType) else type_


class constexpr:
    """Annotation of a compile-time parameter: ``BLOCK: sl.constexpr``.

    Inside the kernel its value is the plain Python value given at trace time
    (an int, float, bool, scheme, ...), so it can size tiles and drive Python
    ``if`` statements.
    """


@dataclass(frozen=True)
class Int8Scheme:
    """8-bit quantization: symmetric INT8, ``#sage.int8<granularity[, rna]>``
    (values in [-127, 127], scale absmax / 127), or with ``unsigned`` the
    unsigned ``#sage.uint8<granularity[, rna]>`` of non-negative tiles
    (values in [0, 255], scale absmax / 255; stored as ``sl.uint8``)."""

    granularity: str  # "per_block", "per_token" or "per_channel"
    rounding: str = "rne"
    unsigned: bool = False

    def __post_init__(self) -> None:
        if self.granularity not in ("per_block", "per_token", "per_channel"):
            raise ValueError(f"unknown granularity {self.granularity!r}")
        if self.rounding not in ("rne", "rna"):
            raise ValueError(f"unknown rounding {self.rounding!r}")

    @property
    def mlir(self) -> str:
        suffix = "" if self.rounding == "rne" else f", {self.rounding}"
        name = "uint8" if self.unsigned else "int8"
        return f"#sage.{name}<{self.granularity}{suffix}>"

    @property
    def storage(self) -> DType:
        return uint8 if self.unsigned else int8

    @property
    def qmax(self) -> int:
        """The largest quantized value (127, or 255 unsigned)."""
        return UINT8_MAX if self.unsigned else INT8_MAX

    def scale_shape(self, shape: tuple[int, int]) -> tuple[int, int]:
        """Shape of the scale tile of a tile of ``shape``."""
        rows, cols = shape
        return {"per_block": (1, 1), "per_token": (rows, 1),
                "per_channel": (1, cols)}[self.granularity]

    def with_rounding(self, rounding: str) -> Int8Scheme:
        """The same granularity with ``"rne"`` or ``"rna"`` rounding."""
        return Int8Scheme(self.granularity, rounding, self.unsigned)


int8_per_block = Int8Scheme("per_block")
int8_per_token = Int8Scheme("per_token")
int8_per_channel = Int8Scheme("per_channel")
uint8_per_block = Int8Scheme("per_block", unsigned=True)
uint8_per_token = Int8Scheme("per_token", unsigned=True)
uint8_per_channel = Int8Scheme("per_channel", unsigned=True)


def _power_of_two(value: int | None, name: str) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0 or value & (value - 1):
        raise ValueError(f"{name} must be a positive power of two, got {value!r}")


@dataclass(frozen=True)
class ArgSpec:
    """One runtime kernel argument as the JIT specialises it.

    ``type`` is a :class:`PointerType` or a scalar dtype (i32, i64, f32).
    ``alignment`` (bytes, pointers only) and ``divisibility`` (integers only)
    are promises emitted as ``sage.alignment`` / ``sage.divisibility``
    argument attributes.
    """

    type: PointerType | DType
    alignment: int | None = None
    divisibility: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.type, PointerType):
            if self.divisibility is not None:
                raise ValueError("divisibility applies to integer arguments; "
                                 "use alignment for pointers")
        elif self.type in (int32, int64, float32):
            if self.alignment is not None:
                raise ValueError("alignment applies to pointer arguments only")
            if self.divisibility is not None and self.type is float32:
                raise ValueError("divisibility applies to integer arguments only")
        else:
            raise ValueError(f"a runtime argument is a pointer, i32, i64 or f32, "
                             f"got {self.type!r}")
        _power_of_two(self.alignment, "alignment")
        _power_of_two(self.divisibility, "divisibility")

    @classmethod
    def pointer(cls, dtype: DType, alignment: int | None = None) -> ArgSpec:
        """A pointer to ``dtype`` elements, optionally ``alignment`` bytes aligned."""
        return cls(pointer_type(dtype), alignment=alignment)

    @classmethod
    def scalar(cls, dtype: DType, divisibility: int | None = None) -> ArgSpec:
        """An i32, i64 or f32 scalar, an integer optionally a multiple of ``divisibility``."""
        return cls(dtype, divisibility=divisibility)
