"""The tracing backend: emits sage IR text, one op per ``sl`` call.

Handles are SSA names (``%a`` for arguments, ``%7``, ``%7#1`` otherwise).
Every op carries ``loc("file.py":line:col)`` of the user line that made it,
so compiler diagnostics point at the kernel source.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from sage.language.core import DType, Int8Scheme, TileType, Type, bfloat16, element_of, float16, int1
from sage.language.diagnostics import error, user_location
from sage.language.values import Value
from sage.reference import to_bf16

_HEX_DIGITS = {16: 4, 32: 8}


def float_literal(value: float, dtype: DType) -> str:
    """An MLIR literal for ``value`` rounded to ``dtype``: decimal when finite,
    the bit pattern in hex otherwise (``0xFF800000`` is f32 -inf)."""
    if dtype is float16:
        rounded = np.float16(value)
        bits = rounded.view(np.uint16)
    elif dtype is bfloat16:
        rounded = to_bf16(np.float32(value))
        bits = np.uint16(rounded.view(np.uint32) >> np.uint32(16))
    else:
        rounded = np.float32(value)
        bits = rounded.view(np.uint32)
    if not np.isfinite(rounded):
        return f"0x{int(bits):0{_HEX_DIGITS[dtype.bits]}X}"
    text = repr(float(rounded))
    if "." not in text:  # '1e-05' -> '1.0e-05': MLIR floats need a point
        mantissa, _, exponent = text.partition("e")
        text = f"{mantissa}.0" + (f"e{exponent}" if exponent else "")
    return text


def _capability(arch: str) -> int:
    """The compute capability of a target, ``sm_90a`` -> 90."""
    return int(arch[3:].rstrip("af"))


def scalar_literal(value: int | float | bool, dtype: DType) -> str:
    """The literal of one element of ``dtype``."""
    if dtype is int1:
        return "true" if value else "false"
    if dtype.is_int:
        return str(int(value))
    return float_literal(value, dtype)


class _Region:
    """The ops of one region (the function body or a loop body)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.constants: dict[str, str] = {}


class IRBuilder:
    """Collects a kernel body as sage IR text while the kernel function runs."""

    def __init__(self, num_ctas: int = 1, arch: str = "sm_90a") -> None:
        #: Programs per cluster and the target: sl.cluster_barrier checks them
        #: where the kernel calls it (the verifier would name no Python line).
        self.num_ctas = num_ctas
        self.arch = arch
        self._count = 0
        self._regions = [_Region()]
        self._defined_in: dict[str, _Region] = {}

    # -- names and text ---------------------------------------------------

    def argument(self, name: str) -> str:
        """The handle of the function argument ``name``."""
        handle = f"%{name}"
        self._defined_in[handle] = self._regions[0]
        return handle

    def _fresh(self, results: int = 1) -> list[str]:
        """New SSA names (``%n``, or ``%n#i`` for several results), defined here."""
        base = f"%{self._count}"
        self._count += 1
        names = [base] if results == 1 else [f"{base}#{i}" for i in range(results)]
        for name in names:
            self._defined_in[name] = self._regions[-1]
        return names

    @staticmethod
    def _result_prefix(names: Sequence[str]) -> str:
        if not names:
            return ""
        base = names[0].split("#")[0]
        return f"{base}:{len(names)} = " if len(names) > 1 else f"{base} = "

    def _use(self, value: Value) -> str:
        region = self._defined_in.get(value.handle)
        if region is not None and not any(region is r for r in self._regions):
            raise error("a value defined inside an sl.range loop body is used outside "
                        "that loop; carry it by assigning it to a name that exists "
                        "before the loop")
        return value.handle

    @staticmethod
    def _loc() -> str:
        location = user_location()
        return f" {location.mlir}" if location is not None else ""

    def _op(self, text: str, results: int = 1) -> list[str]:
        names = self._fresh(results) if results else []
        self._regions[-1].lines.append(f"{self._result_prefix(names)}{text}{self._loc()}")
        return names

    def _one(self, text: str) -> str:
        return self._op(text)[0]

    def body_lines(self) -> list[str]:
        """The function body traced so far."""
        return list(self._regions[0].lines)

    def _uses(self, values: Sequence[Value]) -> str:
        return ", ".join(self._use(v) for v in values)

    # -- ops ----------------------------------------------------------------

    def constant(self, value: int | float | bool, type_: Type) -> str:
        literal = scalar_literal(value, element_of(type_))
        if isinstance(type_, TileType):
            text = f"arith.constant dense<{literal}> : {type_.mlir}"
        elif type_ is int1:
            text = f"arith.constant {literal}"
        else:
            text = f"arith.constant {literal} : {type_.mlir}"
        region = self._regions[-1]
        if text not in region.constants:
            region.constants[text] = self._one(text)
        return region.constants[text]

    def program_id(self, axis: int) -> str:
        return self._one(f"sage.program_id {axis}")

    def num_programs(self, axis: int) -> str:
        return self._one(f"sage.num_programs {axis}")

    def cluster_barrier(self) -> None:
        if _capability(self.arch) < 90:
            raise error(f"sl.cluster_barrier needs sm_90 (thread-block clusters), "
                        f"the kernel targets {self.arch}")
        self._op("sage.cluster_barrier", results=0)

    # Below sm_90 a kernel never starts early: the wait and the signal are
    # nothing there, so one kernel serves every target.
    def grid_dependency_wait(self) -> None:
        if _capability(self.arch) >= 90:
            self._op("sage.grid_dependency_wait", results=0)

    def launch_dependents(self) -> None:
        if _capability(self.arch) >= 90:
            self._op("sage.launch_dependents", results=0)

    def counter_add(self, counter: Value, value: Value) -> str:
        return self._one(f"sage.counter_add {self._use(counter)}, {self._use(value)} : "
                         f"{counter.type.mlir}")

    def counter_wait(self, counter: Value, target: Value) -> None:
        self._op(f"sage.counter_wait {self._use(counter)}, {self._use(target)} : "
                 f"{counter.type.mlir}", results=0)

    def addptr(self, pointer: Value, offset: Value) -> str:
        return self._one(f"sage.addptr {self._use(pointer)}, {self._use(offset)} : "
                         f"{pointer.type.mlir}")

    def _view(self, pointer: Value, offsets, strides, bounds) -> str:
        return (f"{self._use(pointer)}[{self._uses(offsets)}] strides [{self._uses(strides)}] "
                f"bounds [{self._uses(bounds)}]")

    def load(self, pointer: Value, offsets, strides, bounds, result: TileType,
             sigma16_rows: bool = False) -> str:
        order = " sigma16_rows" if sigma16_rows else ""
        return self._one(f"sage.load {self._view(pointer, offsets, strides, bounds)}{order} : "
                         f"{pointer.type.mlir} -> {result.mlir}")

    def store(self, value: Value, pointer: Value, offsets, strides, bounds,
              atomic_add: bool, tma: bool = False) -> None:
        atomic = "atomic_add " if atomic_add else ""
        atomic += "tma " if tma else ""
        self._op(f"sage.store {atomic}{self._use(value)}, "
                 f"{self._view(pointer, offsets, strides, bounds)} : "
                 f"{value.type.mlir}, {pointer.type.mlir}", results=0)

    def splat(self, value: Value, result: TileType) -> str:
        return self._one(f"sage.splat {self._use(value)} : {value.type.mlir} -> {result.mlir}")

    def iota(self, axis: int, result: TileType) -> str:
        return self._one(f"sage.iota {axis} : {result.mlir}")

    def broadcast(self, x: Value, result: TileType, groups: int | None) -> str:
        grouped = "" if groups is None else f" groups {groups}"
        return self._one(f"sage.broadcast {self._use(x)}{grouped} : {x.type.mlir} -> "
                         f"{result.mlir}")

    def reduce(self, kind: str, x: Value, axis: int, result: TileType,
               groups: int | None) -> str:
        grouped = "" if groups is None else f" groups {groups}"
        return self._one(f"sage.reduce {kind} {self._use(x)} axis {axis}{grouped} : "
                         f"{x.type.mlir} -> {result.mlir}")

    def smooth(self, x: Value, axis: int, types: Sequence[TileType]) -> list[str]:
        return self._op(f"sage.smooth {self._use(x)} axis {axis} : {x.type.mlir} -> "
                        f"{types[0].mlir}, {types[1].mlir}", results=2)

    def quantize(self, scheme: Int8Scheme, x: Value, scale: Value | None,
                 types: Sequence[TileType], saturate: bool = True) -> list[str]:
        given = f" scale {self._use(scale)}" if scale is not None else ""
        if not saturate:
            given += " unsaturated"
        scale_type = f", {scale.type.mlir}" if scale is not None else ""
        return self._op(f"sage.quantize {scheme.mlir} {self._use(x)}{given} : "
                        f"{x.type.mlir}{scale_type} -> {types[0].mlir}, {types[1].mlir}",
                        results=2)

    def dequantize(self, scheme: Int8Scheme, q: Value, scales: Value, result: TileType) -> str:
        return self._one(f"sage.dequantize {scheme.mlir} {self._use(q)}, {self._use(scales)} : "
                         f"{q.type.mlir}, {scales.type.mlir} -> {result.mlir}")

    def _acc(self, acc: Value | None) -> str:
        return f" acc {self._use(acc)}" if acc is not None else ""

    def qmatmul(self, lhs: Value, lhs_scale: Value, rhs: Value, rhs_scale: Value,
                acc: Value | None, contract: tuple[int, int], result: TileType,
                rhs_sigma16: bool = False) -> str:
        order = " rhs_sigma16" if rhs_sigma16 else ""
        if lhs.type.element.name == "uint8":
            order += " lhs_unsigned"
        return self._one(
            f"sage.qmatmul {self._use(lhs)}[{self._use(lhs_scale)}], "
            f"{self._use(rhs)}[{self._use(rhs_scale)}]{self._acc(acc)} "
            f"contract({contract[0]}, {contract[1]}){order} : {lhs.type.mlir}, "
            f"{lhs_scale.type.mlir}, "
            f"{rhs.type.mlir}, {rhs_scale.type.mlir} -> {result.mlir}")

    def matmul(self, lhs: Value, rhs: Value, acc: Value | None, contract: tuple[int, int],
               result: TileType) -> str:
        return self._one(f"sage.matmul {self._use(lhs)}, {self._use(rhs)}{self._acc(acc)} "
                         f"contract({contract[0]}, {contract[1]}) : {lhs.type.mlir}, "
                         f"{rhs.type.mlir} -> {result.mlir}")

    def softmax_update(self, logits: Value, row_max: Value, row_sum: Value,
                       scale: float | None, types: Sequence[TileType]) -> list[str]:
        attr = "" if scale is None else f" scale {float_literal(scale, types[0].element)}"
        return self._op(f"sage.softmax_update {self._uses([logits, row_max, row_sum])}{attr} : "
                        f"{logits.type.mlir}, {row_max.type.mlir}", results=5)

    def arith(self, op: str, operands: Sequence[Value], result: Type) -> str:
        return self._one(f"{op} {self._uses(operands)} : {result.mlir}")

    def compare(self, op: str, predicate: str, a: Value, b: Value, result: Type) -> str:
        return self._one(f"{op} {predicate}, {self._uses([a, b])} : {a.type.mlir}")

    def select(self, condition: Value, a: Value, b: Value, result: Type) -> str:
        types = f"{condition.type.mlir}, {result.mlir}" if a.is_tile else result.mlir
        return self._one(f"arith.select {self._uses([condition, a, b])} : {types}")

    def cast(self, op: str, x: Value, result: Type) -> str:
        return self._one(f"{op} {self._use(x)} : {x.type.mlir} to {result.mlir}")

    def for_loop(self, start: Value, stop: Value, step: Value, inits: Sequence[Value],
                 body: Callable[[str, list[str]], list[Value]],
                 num_stages: int = 1, warp_specialize: bool = False,
                 ping_pong: bool = False) -> list[str]:
        """``scf.for`` with ``inits`` as iter_args; ``body`` traces one iteration;
        ``num_stages`` > 1 becomes its ``sage.num_stages`` attribute,
        ``warp_specialize`` its ``sage.warp_specialize`` and ``ping_pong``
        its ``sage.ping_pong``."""
        loc = self._loc()
        iv, *args = self._fresh_each(1 + len(inits))
        header = (f"scf.for {iv} = {self._use(start)} to {self._use(stop)} "
                  f"step {self._use(step)}")
        region = _Region()
        self._regions.append(region)
        for name in (iv, *args):
            self._defined_in[name] = region
        try:
            yields = body(iv, args)
            if yields:
                types = ", ".join(v.type.mlir for v in yields)
                region.lines.append(f"scf.yield {self._uses(yields)} : {types}{self._loc()}")
        finally:
            self._regions.pop()
        results = self._fresh(len(inits)) if inits else []
        if inits:
            pairs = ", ".join(f"{a} = {self._use(v)}" for a, v in zip(args, inits))
            types = ", ".join(v.type.mlir for v in inits)
            header += f" iter_args({pairs}) -> ({types})"
        lines = self._regions[-1].lines
        lines.append(f"{self._result_prefix(results)}{header} : {start.type.mlir} {{")
        lines.extend(f"  {line}" for line in region.lines)
        named = [f"sage.num_stages = {num_stages} : i32"] if num_stages > 1 else []
        if warp_specialize:
            named.append("sage.warp_specialize")
        if ping_pong:
            named.append("sage.ping_pong")
        attrs = f" {{{', '.join(named)}}}" if named else ""
        lines.append(f"}}{attrs}{loc}")
        return results

    def _fresh_each(self, count: int) -> list[str]:
        names = []
        for _ in range(count):
            names += self._fresh()
        return names
