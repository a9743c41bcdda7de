"""``sl.interpret``: runs a kernel on the CPU with numpy, one program at a time.

Each op executes with the reference semantics of ``sage.reference`` (exact
int8 products, the bit-exact quantizer) and its result is held in the
dialect's result type: f32 results of reference functions computed in f64
are rounded to f32, bf16 values are float32 arrays rounded to bf16.
"""

from __future__ import annotations

import builtins
import itertools
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sage import reference
from sage.language.core import (DType, Int8Scheme, PointerType, TileType, Type, bfloat16,
                                element_of, float16, float32, int8, int32, int64)
from sage.language.diagnostics import error
from sage.language.kernel import check_arity, constexpr_values, kernel_signature, run_kernel
from sage.language.tracer import check_num_ctas
from sage.language.values import Value, using_backend

_FROM_NUMPY = {np.dtype(d.numpy): d for d in (int8, int32, int64, float16, float32)}


class Buffer:
    """A flat view of ``array`` as global memory of ``dtype`` elements.

    Needed for bf16: pass a float32 array holding bf16 values
    (``sage.reference.to_bf16``) as ``Buffer(array, sl.bfloat16)``.
    """

    def __init__(self, array: np.ndarray, dtype: DType):
        if not isinstance(array, np.ndarray) or not array.flags.c_contiguous:
            raise ValueError("a kernel buffer is a C-contiguous numpy array")
        if np.dtype(dtype.numpy) != array.dtype:
            raise ValueError(f"{dtype.mlir} elements live in a {np.dtype(dtype.numpy)} array, "
                             f"got {array.dtype}")
        self.array = array
        self.dtype = dtype


@dataclass(frozen=True)
class _Pointer:
    memory: np.ndarray  # flat view of the user's array
    offset: int

    def view(self) -> np.ndarray:
        if self.offset < 0:
            raise error(f"pointer offset {self.offset} lies before the start of its buffer")
        return self.memory[self.offset:]


def convert(x: Any, dtype: DType) -> Any:
    """``x`` held as ``dtype``: a numpy array, or a numpy scalar for a scalar."""
    out = np.asarray(x).astype(dtype.numpy)
    if dtype is bfloat16:
        out = reference.to_bf16(out)
    return out[()]


def _truncating_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    quotient = np.abs(a) // np.where(b == 0, 1, np.abs(b))
    return np.where((a < 0) != (b < 0), -quotient, quotient)


_ARITH: dict[str, Callable[..., Any]] = {
    "arith.addf": np.add, "arith.addi": np.add,
    "arith.subf": np.subtract, "arith.subi": np.subtract,
    "arith.mulf": np.multiply, "arith.muli": np.multiply,
    "arith.divf": np.divide, "arith.divsi": _truncating_div,
    "arith.remf": np.fmod, "arith.remsi": lambda a, b: a - _truncating_div(a, b) * b,
    "arith.maximumf": np.maximum, "arith.maxsi": np.maximum,
    "arith.minimumf": np.minimum, "arith.minsi": np.minimum,
    "arith.andi": np.bitwise_and, "arith.ori": np.bitwise_or, "arith.xori": np.bitwise_xor,
    "arith.negf": np.negative, "math.absf": np.abs, "math.absi": np.abs,
    "math.exp2": np.exp2, "math.log2": np.log2, "math.exp": np.exp, "math.log": np.log,
    "math.sqrt": np.sqrt, "math.floor": np.floor,
    # One rounding: the f32 product is exact in f64, the sum rounds once to f64
    # and again to f32 (a double rounding that differs from fma.rn.f32 only
    # on exact ties).
    "math.fma": lambda a, b, c: np.asarray(a, np.float64) * b + c,
}
_COMPARE = {"olt": np.less, "slt": np.less, "ole": np.less_equal, "sle": np.less_equal,
            "ogt": np.greater, "sgt": np.greater, "oge": np.greater_equal,
            "sge": np.greater_equal, "oeq": np.equal, "eq": np.equal,
            "une": np.not_equal, "ne": np.not_equal}


def _ints(values: Sequence[Value]) -> list[int]:
    return [int(v.handle) for v in values]


class Interpreter:
    """The numpy backend for one program of the grid."""

    def __init__(self, program: tuple[int, int, int], grid: tuple[int, int, int],
                 cluster: _ClusterBarrier | None = None):
        self.program = program
        self.grid = grid
        #: The barrier of this program's thread-block cluster (None: none).
        self.cluster = cluster
        #: Programs per cluster (sl.cluster_barrier checks it, as the tracer's).
        self.num_ctas = cluster.programs if cluster is not None else 1

    def cluster_barrier(self) -> None:
        self.cluster.wait()

    def grid_dependency_wait(self) -> None:
        """Launches run one after another here: the previous one has finished."""

    def launch_dependents(self) -> None:
        """Launches run one after another here: nothing to signal."""

    @staticmethod
    def _counter(counter: Value, op: str) -> np.ndarray:
        cell = counter.handle.view()
        if not len(cell):
            raise error(f"sl.{op}: the counter lies past the end of its buffer")
        return cell

    def counter_add(self, counter: Value, value: Value) -> Any:
        cell = self._counter(counter, "counter_add")
        old = int(cell[0])
        cell[0] = (old + int(value.handle) + 2**31) % 2**32 - 2**31  # wraps, as the GPU's add
        return np.int32(old)

    def counter_wait(self, counter: Value, target: Value) -> None:
        """Launches and their programs run one after another here: a counter
        below its target would never rise."""
        held = int(self._counter(counter, "counter_wait")[0])
        if held < int(target.handle):
            raise error(f"sl.counter_wait: program {self.program} waits for the counter to "
                        f"reach {int(target.handle)}, but it holds {held} and the interpreter "
                        "runs the programs one after another: a program may wait only for "
                        "earlier launches and earlier programs")

    def constant(self, value: int | float | bool, type_: Type) -> Any:
        shape = type_.shape if isinstance(type_, TileType) else ()
        return convert(np.full(shape, value), element_of(type_))

    def program_id(self, axis: int) -> Any:
        return np.int32(self.program[axis])

    def num_programs(self, axis: int) -> Any:
        return np.int32(self.grid[axis])

    def addptr(self, pointer: Value, offset: Value) -> _Pointer:
        return _Pointer(pointer.handle.memory, pointer.handle.offset + int(offset.handle))

    def load(self, pointer: Value, offsets, strides, bounds, result: TileType,
             sigma16_rows: bool = False) -> np.ndarray:
        try:
            tile = reference.load(pointer.handle.view(), _ints(offsets), _ints(strides),
                                  _ints(bounds), result.shape, sigma16_rows=sigma16_rows)
        except ValueError as exc:
            raise error(f"sl.load: {exc}") from None
        return convert(tile, result.element)

    def store(self, value: Value, pointer: Value, offsets, strides, bounds,
              atomic_add: bool, tma: bool = False) -> None:
        try:
            reference.store(pointer.handle.view(), value.handle, _ints(offsets),
                            _ints(strides), _ints(bounds), atomic_add=atomic_add)
        except ValueError as exc:
            raise error(f"sl.store: {exc}") from None

    def splat(self, value: Value, result: TileType) -> np.ndarray:
        return convert(np.full(result.shape, value.handle), result.element)

    def iota(self, axis: int, result: TileType) -> np.ndarray:
        return reference.iota(result.shape, axis)

    def broadcast(self, x: Value, result: TileType, groups: int | None) -> np.ndarray:
        return reference.broadcast(x.handle, result.shape, groups)

    def reduce(self, kind: str, x: Value, axis: int, result: TileType,
               groups: int | None) -> np.ndarray:
        return convert(reference.reduce(x.handle, kind, axis, groups), result.element)

    def smooth(self, x: Value, axis: int, types: Sequence[TileType]) -> list[np.ndarray]:
        return [convert(r, float32) for r in reference.smooth(x.handle, axis)]

    def quantize(self, scheme: Int8Scheme, x: Value, scale: Value | None,
                 types: Sequence[TileType], saturate: bool = True) -> list[np.ndarray]:
        given = None if scale is None else scale.handle
        try:
            q, scales = reference.quantize(x.handle, scheme.granularity, scheme.rounding,
                                           scale=given, saturate=saturate,
                                           unsigned=scheme.unsigned)
        except ValueError as exc:
            raise error(f"sl.quantize: {exc}") from None
        return [q, scales]

    def dequantize(self, scheme: Int8Scheme, q: Value, scales: Value,
                   result: TileType) -> np.ndarray:
        return reference.dequantize(q.handle, scales.handle, scheme.granularity)

    def qmatmul(self, lhs: Value, lhs_scale: Value, rhs: Value, rhs_scale: Value,
                acc: Value | None, contract: tuple[int, int], result: TileType,
                rhs_sigma16: bool = False) -> np.ndarray:
        out = reference.qmatmul(lhs.handle, lhs_scale.handle, rhs.handle, rhs_scale.handle,
                                *contract, acc=None if acc is None else acc.handle,
                                rhs_sigma16=rhs_sigma16)
        return convert(out, float32)

    def matmul(self, lhs: Value, rhs: Value, acc: Value | None, contract: tuple[int, int],
               result: TileType) -> np.ndarray:
        out = reference.matmul(lhs.handle, rhs.handle, *contract,
                               acc=None if acc is None else acc.handle)
        return convert(out, result.element)

    def softmax_update(self, logits: Value, row_max: Value, row_sum: Value,
                       scale: float | None, types: Sequence[TileType]) -> list[np.ndarray]:
        factor = 1.0 if scale is None else float(np.float32(scale))
        results = reference.softmax_update(logits.handle, row_max.handle, row_sum.handle,
                                           factor)
        return [convert(r, float32) for r in results]

    def arith(self, op: str, operands: Sequence[Value], result: Type) -> Any:
        return convert(_ARITH[op](*(v.handle for v in operands)), element_of(result))

    def compare(self, op: str, predicate: str, a: Value, b: Value, result: Type) -> Any:
        return np.asarray(_COMPARE[predicate](a.handle, b.handle))[()]

    def select(self, condition: Value, a: Value, b: Value, result: Type) -> Any:
        return convert(np.where(condition.handle, a.handle, b.handle), element_of(result))

    def cast(self, op: str, x: Value, result: Type) -> Any:
        if op == "arith.bitcast":  # i32 <-> f32: the same bits
            return np.asarray(x.handle, x.dtype.numpy).view(element_of(result).numpy)[()]
        return convert(x.handle, element_of(result))

    def for_loop(self, start: Value, stop: Value, step: Value, inits: Sequence[Value],
                 body: Callable[[Any, list[Any]], list[Value]],
                 num_stages: int = 1, warp_specialize: bool = False,
                 ping_pong: bool = False) -> list[Any]:
        first, last, stride = _ints([start, stop, step])
        if stride <= 0:
            raise error(f"sl.range step must be positive, got {stride}")
        handles = [v.handle for v in inits]
        for i in builtins.range(first, last, stride):
            handles = [v.handle for v in body(convert(i, start.type), handles)]
        return handles


def _argument(name: str, arg: Any) -> Value:
    if isinstance(arg, Buffer):
        return Value(PointerType(arg.dtype), _Pointer(arg.array.reshape(-1), 0))
    if isinstance(arg, np.ndarray):
        dtype = _FROM_NUMPY.get(arg.dtype)
        if dtype is None:
            raise error(f"argument '{name}': no sage element type for numpy {arg.dtype} "
                        "(int8, int32, int64, float16, float32; sl.Buffer for bf16)")
        return _argument(name, Buffer(arg, dtype))
    if isinstance(arg, (bool, np.bool_)):
        raise error(f"argument '{name}': booleans are not kernel arguments")
    if isinstance(arg, np.integer) and np.dtype(type(arg)) in (np.int32, np.int64):
        dtype = _FROM_NUMPY[np.dtype(type(arg))]
    elif isinstance(arg, (int, np.integer)):
        dtype = int32 if -2**31 <= int(arg) < 2**31 else int64
    elif isinstance(arg, (float, np.floating)):
        dtype = float32
    else:
        raise error(f"argument '{name}': expected a numpy array, sl.Buffer or a number, "
                    f"got {type(arg).__name__}")
    return Value(dtype, convert(arg, dtype))


def _grid(grid: int | Sequence[int]) -> tuple[int, int, int]:
    dims = (grid,) if isinstance(grid, int) else tuple(grid)
    if not 1 <= len(dims) <= 3 or any(isinstance(d, bool) or not isinstance(d, int)
                                      or d < 0 for d in dims):
        raise ValueError(f"grid is 1 to 3 non-negative ints, got {grid!r}")
    return dims + (1,) * (3 - len(dims))  # type: ignore[return-value]


class _ClusterAborted(Exception):
    """A program of a cluster left its barrier because another one failed."""


class _ClusterBarrier:
    """The barrier of one cluster's programs, with the GPU's rule: it opens
    when every program that has not returned has reached it (an exited
    program no longer counts, as barrier.cluster.wait waits for the
    non-exited threads only), so no program waits forever."""

    def __init__(self, programs: int):
        self.programs = programs
        self._live, self._arrived, self._round = programs, 0, 0
        self._broken = False
        self._changed = threading.Condition()

    def wait(self) -> None:
        with self._changed:
            if self._broken:
                raise _ClusterAborted()
            here = self._round
            self._arrived += 1
            self._open_if_complete()
            while here == self._round and not self._broken:
                self._changed.wait()
            if here == self._round:
                raise _ClusterAborted()

    def leave(self) -> None:
        """A program returned: the others stop waiting for it."""
        with self._changed:
            self._live -= 1
            self._open_if_complete()

    def abort(self) -> None:
        """A program failed: the others leave the barrier (and raise)."""
        with self._changed:
            self._broken = True
            self._changed.notify_all()

    def _open_if_complete(self) -> None:
        if self._arrived and self._arrived >= self._live:
            self._arrived, self._round = 0, self._round + 1
            self._changed.notify_all()


def _run_cluster(fn: Callable, signature: Any, arguments: list, constants: dict,
                 programs: list[tuple[int, int, int]], dims: tuple[int, int, int]) -> None:
    """The programs of one thread-block cluster, each in a thread of its own,
    joined at their sl.cluster_barrier; the first error of any is raised."""
    barrier = _ClusterBarrier(len(programs))
    errors: list[BaseException] = []

    def program(where: tuple[int, int, int]) -> None:
        try:
            with np.errstate(all="ignore"), using_backend(Interpreter(where, dims, barrier)):
                run_kernel(fn, signature, arguments, constants)
            barrier.leave()
        except _ClusterAborted:
            pass
        except BaseException as failure:  # noqa: BLE001  (re-raised by the caller)
            errors.append(failure)
            barrier.abort()

    threads = [threading.Thread(target=program, args=(where,)) for where in programs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def interpret(fn: Callable, grid: int | Sequence[int], args: Sequence[Any],
              constexprs: Mapping[str, Any] | None = None, num_ctas: int = 1) -> None:
    """Runs kernel ``fn`` on the CPU for every program of ``grid`` (axis 0 fastest).

    ``args`` are the runtime arguments in order: numpy arrays (contiguous,
    used as flat memory and written in place by stores), :class:`Buffer`
    for bf16, and Python numbers (int: i32, or i64 if it needs it; float: f32).
    ``num_ctas`` > 1 runs the programs in thread-block clusters of that many
    along axis 0 (as a launch with ``num_ctas`` does): a cluster's programs
    run together, in threads, so that ``sl.cluster_barrier`` can join them.

    Raises:
        ValueError: a grid or ``num_ctas`` the launch would reject.
    """
    signature = kernel_signature(fn)
    check_arity(fn, signature, len(args), "arguments")
    check_num_ctas(num_ctas)
    constants = constexpr_values(fn, signature, constexprs)
    arguments = [_argument(name, arg) for name, arg in zip(signature.runtime, args)]
    dims = _grid(grid)
    if dims[0] % num_ctas:
        raise ValueError(f"{fn.__name__} runs its programs in clusters of {num_ctas} along "
                         f"grid axis 0, so the grid's first size must be a multiple of "
                         f"{num_ctas}, got {dims[0]}")
    if num_ctas > 1:
        for z, y, x in itertools.product(*(builtins.range(d) for d in (dims[2], dims[1])),
                                         builtins.range(0, dims[0], num_ctas)):
            _run_cluster(fn, signature, arguments, constants,
                         [(x + i, y, z) for i in builtins.range(num_ctas)], dims)
        return
    with np.errstate(all="ignore"):
        for z, y, x in itertools.product(*(builtins.range(d) for d in reversed(dims))):
            with using_backend(Interpreter((x, y, z), dims)):
                run_kernel(fn, signature, arguments, constants)
