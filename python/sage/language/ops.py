"""The sage ops as kernel functions: argument checks and result types.

Each function validates its operands (the same rules as the dialect's
verifiers, reported at the user's line) and asks the active backend to emit
or execute the op.
"""

from __future__ import annotations

from collections.abc import Sequence

import builtins

from sage.language.core import (DType, Int8Scheme, TileType, bfloat16, float16, float32,
                                int8, int32, int64, uint8)
from sage.language.diagnostics import error
from sage.language.elementwise import cast, constant, to_value
from sage.language.values import Value, backend
from sage.reference.matmul import max_contraction
from sage.reference.memory import MAX_LEADING_DIMS
from sage.reference.tiles import group_count

Scalar = Value | int
REDUCTIONS = ("sum", "max", "min", "absmax")


def static_int(x: object, what: str) -> int:
    """``x`` as a compile-time Python int (a constexpr), else an error."""
    if isinstance(x, Value):
        raise error(f"{what} must be a compile-time integer (a Python int or an "
                    f"sl.constexpr parameter), got a runtime {x.type.mlir} value")
    if isinstance(x, bool) or not isinstance(x, int):
        raise error(f"{what} must be an integer, got {x!r}")
    return x


def static_shape(shape: object) -> tuple[int, int]:
    """A tile shape: two compile-time ints of at least 1."""
    if isinstance(shape, Value) or not isinstance(shape, (tuple, list)) or len(shape) != 2:
        raise error(f"a tile shape is a pair of compile-time ints (tiles are 2-D), got {shape!r}")
    dims = tuple(static_int(d, "a tile dimension") for d in shape)
    if builtins.min(dims) < 1:
        raise error(f"tile dimensions must be at least 1, got {dims}")
    return dims  # type: ignore[return-value]


def _axis(axis: object) -> int:
    axis = static_int(axis, "axis")
    if axis not in (0, 1):
        raise error(f"axis must be 0 or 1 (tiles are 2-D), got {axis}")
    return axis


def tile(x: object, what: str, dtypes: Sequence[DType] | None = None) -> Value:
    """``x`` if it is a tile (of one of ``dtypes`` when given), else an error."""
    if not isinstance(x, Value) or not x.is_tile:
        got = x.type.mlir if isinstance(x, Value) else type(x).__name__
        raise error(f"{what} must be a tile, got {got}")
    if dtypes is not None and x.dtype not in dtypes:
        names = ", ".join(dict.fromkeys(d.mlir for d in dtypes))  # int8, uint8: i8
        raise error(f"{what} must be a tile of {names}, got {x.type.mlir}")
    return x


def index(x: Scalar, what: str) -> Value:
    """An integer scalar (Python int or i1/i8/i32/i64 value) as an i64 value."""
    if isinstance(x, Value) and (x.is_tile or x.is_pointer or not x.dtype.is_int):
        raise error(f"{what} must be an integer scalar, got {x.type.mlir}")
    if isinstance(x, float):
        raise error(f"{what} must be an integer, got {x!r}")
    return cast(to_value(x, int64), int64)


def _pointer(x: object, what: str) -> Value:
    if not isinstance(x, Value) or not x.is_pointer:
        got = x.type.mlir if isinstance(x, Value) else type(x).__name__
        raise error(f"{what} must be a pointer argument, got {got}")
    return x


def _grid_axis(axis: object) -> int:
    axis = static_int(axis, "grid axis")
    if axis not in (0, 1, 2):
        raise error(f"grid axis must be 0, 1 or 2, got {axis}")
    return axis


def program_id(axis: int) -> Value:
    """Index of this program along grid ``axis`` (0-2), an i32 (``sage.program_id``)."""
    return Value(int32, backend().program_id(_grid_axis(axis)))


def num_programs(axis: int) -> Value:
    """Number of programs along grid ``axis``, an i32 (``sage.num_programs``)."""
    return Value(int32, backend().num_programs(_grid_axis(axis)))


def cluster_barrier() -> None:
    """Waits until every program of this thread-block cluster reaches it
    (``sage.cluster_barrier``): a launch with ``num_ctas=C`` groups C
    consecutive programs along grid axis 0, resident together. Writes made
    before the barrier (global memory included) are visible to the
    cluster's programs after it, so they can combine partial results
    through global memory. It waits for the cluster's programs that have not
    returned (one that has returned no longer counts, as on the GPU). Needs
    ``num_ctas`` > 1 and sm_90.
    """
    runner = backend()
    if runner.num_ctas < 2:
        raise error("sl.cluster_barrier needs programs in clusters: launch with num_ctas > 1")
    runner.cluster_barrier()


def grid_dependency_wait() -> None:
    """Waits until the kernel launched before this one on the same stream has
    finished and its writes are visible (``sage.grid_dependency_wait``, PTX
    ``griddepcontrol.wait``; sm_90).

    A kernel that calls it is launched so that it may start while that
    kernel is still running (programmatic dependent launch): what it does
    before the wait overlaps the other kernel's tail, so it must neither read
    what that kernel writes nor write what it reads or writes. Every kernel
    launched before that one has finished when this one starts. Below sm_90,
    where kernels never start early, and in the interpreter, which runs
    launches one after another, it is nothing.
    """
    backend().grid_dependency_wait()


def launch_dependents() -> None:
    """Lets the kernel launched after this one on the same stream start once
    every program of this one has called it or finished, if that kernel
    waits with :func:`grid_dependency_wait` or :func:`counter_wait`
    (``sage.launch_dependents``, PTX ``griddepcontrol.launch_dependents``;
    sm_90). It orders no memory: that kernel still waits for this one to
    finish, or for the counters this one raises. Without it, that
    kernel starts when this one finishes. Below sm_90 and in the interpreter
    it is nothing.
    """
    backend().launch_dependents()


def _counter(counter: object, what: str) -> Value:
    counter = _pointer(counter, what)
    if counter.type.element != int32:
        raise error(f"{what} must point to i32, got {counter.type.mlir}")
    return counter


def _int32(x: Scalar, what: str) -> Value:
    """An integer scalar as an i32 value (a Python int must fit; an i64 value
    is an error rather than truncated)."""
    if isinstance(x, Value) and (x.is_tile or x.is_pointer or not x.dtype.is_int):
        raise error(f"{what} must be an integer scalar, got {x.type.mlir}")
    if isinstance(x, Value) and x.dtype == int64:
        raise error(f"{what} must be an i32 scalar (counters are i32), got i64")
    if isinstance(x, bool) or (not isinstance(x, Value) and not isinstance(x, int)):
        raise error(f"{what} must be an integer, got {x!r}")
    if isinstance(x, int) and not -2**31 <= x < 2**31:
        raise error(f"{what} must fit in i32, got {x}")
    return cast(to_value(x, int32), int32)


def counter_add(counter: Value, value: Scalar = 1) -> Value:
    """Adds ``value`` to the i32 at ``counter`` once for the whole program
    (``sage.counter_add``) and returns what it held before, the same i32 in
    every thread.

    Programs signal each other through such counters in global memory: every
    write the program made before the add is visible to a program that sees
    the new value (:func:`counter_wait`, or a later add), and the program
    sees what the counter's earlier adds released (acq_rel at GPU scope).
    ``counter`` is an i32 pointer argument, advanced to the counter (``ptr +
    index``); counters start where the caller left them (launch a zeroed
    buffer). Every thread of the program runs it: not inside a
    warp-specialised loop.
    """
    counter = _counter(counter, "counter_add's counter")
    value = _int32(value, "counter_add's value")
    return Value(int32, backend().counter_add(counter, value))


def counter_wait(counter: Value, target: Scalar) -> None:
    """Waits until the i32 at ``counter`` holds at least ``target`` (signed;
    ``sage.counter_wait``); then what the :func:`counter_add` calls that
    raised it released is visible to the program, TMA copies included.

    A program may only wait for programs that run: ones of an earlier launch,
    programs of its own launch that started before it and do not wait for it
    (the start order is a ticket's, a :func:`counter_add` at the program's
    start, not the program ids'), or those of the kernel launched before it
    on its stream, which it may overlap: a
    kernel that waits on counters starts early where that kernel calls
    :func:`launch_dependents` (programmatic dependent launch; all of that
    kernel's programs are then resident). The interpreter runs launches and
    their programs one after another: there a counter below its target is an
    error (the wait would hang). Every thread of the program runs it.
    """
    counter = _counter(counter, "counter_wait's counter")
    target = _int32(target, "counter_wait's target")
    backend().counter_wait(counter, target)


def addptr(pointer: Value, offset: Scalar) -> Value:
    """``pointer`` advanced by ``offset`` elements (``sage.addptr``; also ``ptr + n``)."""
    pointer = _pointer(pointer, "addptr's pointer")
    offset = index(offset, "a pointer offset")
    return Value(pointer.type, backend().addptr(pointer, offset))


def _view(offsets: Sequence[Scalar], strides: Sequence[Scalar],
          bounds: Sequence[Scalar]) -> list[list[Value]]:
    out = []
    for name, entries in (("offsets", offsets), ("strides", strides), ("bounds", bounds)):
        if (isinstance(entries, Value) or not isinstance(entries, (tuple, list))
                or not 2 <= len(entries) <= 2 + MAX_LEADING_DIMS):
            raise error(f"{name} must be a tuple of 2 to {2 + MAX_LEADING_DIMS} entries (up to "
                        f"{MAX_LEADING_DIMS} leading dimensions, then one per tile dimension), "
                        f"got {entries!r}")
        out.append([index(x, f"an entry of {name}") for x in entries])
    if not len(out[0]) == len(out[1]) == len(out[2]):
        raise error(f"offsets, strides and bounds must have one entry per view dimension, got "
                    f"{len(out[0])}, {len(out[1])} and {len(out[2])}")
    return out


def load(pointer: Value, shape: tuple[int, int], offsets: Sequence[Scalar],
         strides: Sequence[Scalar], bounds: Sequence[Scalar],
         sigma16_rows: bool = False) -> Value:
    """A ``shape`` tile read from a strided view (``sage.load``).

    Element ``(i, j)`` comes from ``pointer + (offsets[0]+i)*strides[0] +
    (offsets[1]+j)*strides[1]`` if ``0 <= offsets[d]+idx[d] < bounds[d]`` for
    both dimensions, else it is 0. All counts are elements.

    The view may have up to 3 leading dimensions before the tile's two (a
    batch and a head): ``offsets``, ``strides`` and ``bounds`` then have one
    more entry each, first, and each leading offset picks one index (the
    tile reads 0 unless ``0 <= offsets[l] < bounds[l]``). ``sl.load(k, (BN,
    D), (b, h, col, 0), (sb, sh, sn, 1), (B, H, N, D))`` reads the same tile
    as a load from ``k + b*sb + h*sh`` with offsets ``(col, 0)``, but a TMA
    copy of it uses one tensor map over the whole tensor, built once
    however many heads a (persistent) program visits.

    ``sigma16_rows=True`` reads the rows in sigma16 order: row ``i`` of the
    tile is row ``sigma16_token(i)`` of the view (permuted inside every 16,
    :mod:`sage.reference.sigma16`; the tile needs a multiple of 16 rows). A
    copy stored from such a tile is the ``rhs_sigma16`` operand of
    :func:`qmatmul`.
    """
    pointer = _pointer(pointer, "load's pointer")
    result = TileType(static_shape(shape), pointer.type.element)
    if not isinstance(sigma16_rows, bool):
        raise error("sigma16_rows must be a Python bool")
    if sigma16_rows and result.shape[0] % 16:
        raise error(f"sigma16_rows permutes rows inside every 16: the tile needs a "
                    f"multiple of 16 rows, got {result.shape[0]}")
    return Value(result, backend().load(pointer, *_view(offsets, strides, bounds), result,
                                        sigma16_rows))


def store(pointer: Value, value: Value, offsets: Sequence[Scalar],
          strides: Sequence[Scalar], bounds: Sequence[Scalar],
          atomic_add: bool = False, tma: bool = False) -> None:
    """Writes the in-bounds elements of tile ``value`` (``sage.store``).

    Addressing as :func:`load`. ``atomic_add=True`` adds each element to
    memory atomically instead (f32 only). ``tma=True`` asks for the copy
    engine: the tile goes to shared memory and one thread has it stored
    (sm_90a, a view TMA accepts: 16-byte aligned rows and base, unit inner
    stride); the compiler falls back to plain stores otherwise. It frees the
    threads' load/store queues (a GEMM's epilogue) at the price of shared
    memory for the tile. Results are the same. Both together are a bulk
    reduction: the copy engine adds the whole tile (each element atomically,
    at L2; ``cp.reduce.async.bulk.tensor``) where the view allows, else the
    threads' atomics do.
    """
    pointer = _pointer(pointer, "store's pointer")
    value = tile(value, "the stored value")
    if value.dtype != pointer.type.element:
        raise error(f"cannot store a {value.type.mlir} tile through a {pointer.type.mlir}: "
                    f"convert it with .to(sl.{pointer.type.element.name})")
    if not isinstance(atomic_add, bool):
        raise error("atomic_add must be a Python bool")
    if atomic_add and value.dtype != float32:
        raise error(f"atomic_add stores need f32 values, got {value.type.mlir}")
    if not isinstance(tma, bool):
        raise error("tma must be a Python bool")
    backend().store(value, pointer, *_view(offsets, strides, bounds), atomic_add, tma)


def splat(value: Value | int | float, shape: tuple[int, int]) -> Value:
    """A ``shape`` tile with every element ``value`` (``sage.splat``)."""
    result_shape = static_shape(shape)
    value = to_value(value)
    if value.is_tile or value.is_pointer:
        raise error(f"splat takes a scalar, got {value.type.mlir}")
    result = TileType(result_shape, value.dtype)
    return Value(result, backend().splat(value, result))


def full(shape: tuple[int, int], value: Value | int | float, dtype: DType) -> Value:
    """A ``shape`` tile of ``dtype`` filled with ``value`` (a number or a scalar value)."""
    if not isinstance(dtype, DType):
        raise error(f"full's dtype must be a dtype such as sl.float32, got {dtype!r}")
    if isinstance(value, Value):
        return splat(cast(value, dtype), shape)
    return constant(value, TileType(static_shape(shape), dtype))


def zeros(shape: tuple[int, int], dtype: DType) -> Value:
    """A ``shape`` tile of zeros of ``dtype``."""
    return full(shape, 0, dtype)


def iota(shape: tuple[int, int], axis: int) -> Value:
    """An i32 tile whose element ``(i, j)`` is ``i`` (axis 0) or ``j`` (axis 1) (``sage.iota``)."""
    result = TileType(static_shape(shape), int32)
    axis = _axis(axis)
    return Value(result, backend().iota(axis, result))


def _group_count(groups: object, extent: int) -> int:
    """Checks a ``groups`` bit mask against an axis of ``extent`` (the
    dialect's rule) and returns the number of groups."""
    groups = static_int(groups, "groups")
    try:
        return group_count(groups, extent)
    except ValueError as e:
        raise error(str(e)) from None


def broadcast(x: Value, shape: tuple[int, int], groups: int | None = None) -> Value:
    """Tile ``x`` with size-1 dimensions repeated up to ``shape`` (``sage.broadcast``).

    With ``groups`` (a bit mask of index bits, as :func:`reduce`'s), the
    dimension of ``x`` whose size is neither 1 nor the target's holds one
    value per group: index ``i`` of the result reads ``x``'s index
    ``pext(i, groups)``, the bits of ``i`` in ``groups`` packed.
    """
    x = tile(x, "broadcast's operand")
    target = static_shape(shape)
    grouped = [d for d in range(2) if x.shape[d] not in (1, target[d])]
    if groups is not None:
        if len(grouped) != 1:
            raise error(f"groups need one dimension of {x.shape} whose size is neither 1 "
                        f"nor the target's {target}")
        count = _group_count(groups, target[grouped[0]])
        if x.shape[grouped[0]] != count:
            raise error(f"groups {groups} take {count} entries along dimension "
                        f"{grouped[0]}, got {x.shape[grouped[0]]}")
    elif grouped:
        raise error(f"cannot broadcast {x.shape} to {target}: only size-1 dimensions expand")
    if x.shape == target:
        return x
    result = TileType(target, x.dtype)
    return Value(result, backend().broadcast(x, result, groups))


def reduce(x: Value, kind: str, axis: int, groups: int | None = None) -> Value:
    """``kind`` (sum, max, min, absmax) of tile ``x`` along ``axis``, kept with size 1.

    With ``groups`` (a bit mask of index bits along ``axis``, a power of two
    extent; some but not all of its bits), indices that agree on those bits
    form a group and the result keeps one value per group along the axis,
    group ``g`` at ``pext(i, groups)`` (the bits of ``i`` in ``groups``,
    packed). ``groups=0b110`` over 128 columns makes 4 groups of the columns
    with equal ``(c // 2) % 4``: those one thread of a lane quad holds in a
    tensor-core accumulator, so the reduction stays in that thread.
    """
    x = tile(x, "the reduced value")
    if kind not in REDUCTIONS:
        raise error(f"unknown reduction {kind!r}; expected one of {', '.join(REDUCTIONS)}")
    axis = _axis(axis)
    kept = 1 if groups is None else _group_count(groups, x.shape[axis])
    shape = (kept, x.shape[1]) if axis == 0 else (x.shape[0], kept)
    result = TileType(shape, x.dtype)
    return Value(result, backend().reduce(kind, x, axis, result, groups))


def sum(x: Value, axis: int, groups: int | None = None) -> Value:  # noqa: A001  (sl.sum, as numpy's)
    """Sum along ``axis`` (16-bit floats accumulate in f32), keeping the axis
    (per group with ``groups``, as :func:`reduce`)."""
    return reduce(x, "sum", axis, groups)


def max(x: Value, axis: int, groups: int | None = None) -> Value:  # noqa: A001
    """Maximum along ``axis``, keeping the axis (per group with ``groups``,
    as :func:`reduce`)."""
    return reduce(x, "max", axis, groups)


def min(x: Value, axis: int, groups: int | None = None) -> Value:  # noqa: A001
    """Minimum along ``axis``, keeping the axis (per group with ``groups``,
    as :func:`reduce`)."""
    return reduce(x, "min", axis, groups)


def absmax(x: Value, axis: int, groups: int | None = None) -> Value:
    """Maximum of ``|x|`` along ``axis``, keeping the axis (per group with
    ``groups``, as :func:`reduce`)."""
    return reduce(x, "absmax", axis, groups)


def smooth(x: Value, axis: int = 0) -> tuple[Value, Value]:
    """``(x - mean, mean)`` in f32, the mean along ``axis`` (``sage.smooth``)."""
    x = tile(x, "smooth's operand", (float16, bfloat16, float32))
    axis = _axis(axis)
    mean_shape = (1, x.shape[1]) if axis == 0 else (x.shape[0], 1)
    types = [TileType(x.shape, float32), TileType(mean_shape, float32)]
    handles = backend().smooth(x, axis, types)
    return Value(types[0], handles[0]), Value(types[1], handles[1])


def _scheme(scheme: object) -> Int8Scheme:
    if not isinstance(scheme, Int8Scheme):
        raise error(f"expected a quantization scheme such as sl.int8_per_block, got {scheme!r}")
    return scheme


def quantize(x: Value, scheme: Int8Scheme, scale: Value | None = None,
             saturate: bool = True) -> tuple[Value, Value]:
    """``(q, scales)``: ``x`` quantized with ``scheme`` (``sage.quantize``).

    With ``scale`` (f32, the scheme's scale shape) that scale is used instead
    of computing one and is returned as ``scales``. ``saturate=False`` (with
    a given scale) drops the clamp to [-127, 127], two instructions per
    element: the caller promises ``|round(x / scale)| <= 127`` (as P~ with
    scale ``p_max / 127`` keeps it); the interpreter checks the promise, the
    GPU leaves q unspecified where it is broken.
    """
    scheme = _scheme(scheme)
    x = tile(x, "the quantized value", (float16, bfloat16, float32))
    scale_type = TileType(scheme.scale_shape(x.shape), float32)
    if scale is not None:
        scale = tile(scale, "quantize's scale", (float32,))
        if scale.type != scale_type:
            raise error(f"{scheme.granularity} scale of a {x.type.mlir} tile must be "
                        f"{scale_type.mlir}, got {scale.type.mlir}")
    if not isinstance(saturate, bool):
        raise error("saturate must be a Python bool")
    if not saturate and scale is None:
        raise error("saturate=False needs a given scale: a computed absmax scale keeps "
                    "the clamp")
    types = [TileType(x.shape, scheme.storage), scale_type]
    handles = backend().quantize(scheme, x, scale, types, saturate)
    return Value(types[0], handles[0]), Value(types[1], handles[1])


def dequantize(q: Value, scales: Value, scheme: Int8Scheme) -> Value:
    """``f32(q) * scale`` per element with ``scheme``'s granules (``sage.dequantize``)."""
    scheme = _scheme(scheme)
    q = tile(q, "the dequantized value", (scheme.storage,))
    expected = TileType(scheme.scale_shape(q.shape), float32)
    scales = tile(scales, "dequantize's scales", (float32,))
    if scales.type != expected:
        raise error(f"{scheme.granularity} scales of a {q.type.mlir} tile must be "
                    f"{expected.mlir}, got {scales.type.mlir}")
    result = TileType(q.shape, float32)
    return Value(result, backend().dequantize(scheme, q, scales, result))


def _contraction(lhs: Value, rhs: Value, contract: object, acc_dtype: DType = float32
                 ) -> tuple[tuple[int, int], TileType]:
    if not isinstance(contract, (tuple, list)) or len(contract) != 2:
        raise error(f"contract is a pair (lhs dim, rhs dim), got {contract!r}")
    dims = (_axis(contract[0]), _axis(contract[1]))
    k_lhs, k_rhs = lhs.shape[dims[0]], rhs.shape[dims[1]]
    if k_lhs != k_rhs:
        raise error(f"contracted sizes differ: lhs {lhs.type.mlir} has {k_lhs} along "
                    f"dimension {dims[0]}, rhs {rhs.type.mlir} has {k_rhs} along {dims[1]}")
    return dims, TileType((lhs.shape[1 - dims[0]], rhs.shape[1 - dims[1]]), acc_dtype)


def _check_int8_contraction(lhs: Value, dims: tuple[int, int]) -> None:
    most = max_contraction(lhs.dtype == uint8)
    if lhs.shape[dims[0]] > most:
        raise error(f"a contraction of {lhs.shape[dims[0]]} elements may overflow int32 "
                    f"(at most {most})")


def _accumulator(acc: Value | None, result: TileType) -> Value | None:
    if acc is not None:
        acc = tile(acc, "acc", (result.element,))
        if acc.type != result:
            raise error(f"acc must be the result type {result.mlir}, got {acc.type.mlir}")
    return acc


def _scale_of(scale: Value, operand: Value, contract: int, what: str) -> Value:
    scale = tile(scale, f"{what} scale", (float32,))
    kept = 1 - contract
    if scale.shape[contract] != 1:
        raise error(f"{what} scale {scale.type.mlir} varies along the contracted "
                    f"dimension {contract} of {operand.type.mlir}; it must have size 1 there")
    if scale.shape[kept] not in (1, operand.shape[kept]):
        raise error(f"{what} scale {scale.type.mlir} must have size 1 or "
                    f"{operand.shape[kept]} along dimension {kept}")
    return scale


def qmatmul(lhs: Value, lhs_scale: Value, rhs: Value, rhs_scale: Value,
            contract: tuple[int, int] = (1, 1), acc: Value | None = None,
            rhs_sigma16: bool = False) -> Value:
    """``acc + f32(lhs . rhs) * (lhs_scale * rhs_scale)`` on i8 tiles (``sage.qmatmul``).

    ``contract=(1, 1)`` is ``lhs @ rhs.T``, ``(1, 0)`` is ``lhs @ rhs`` and
    ``(0, 0)`` is ``lhs.T @ rhs``. Each scale is ``1x1`` or one value per row
    (column) of its operand's kept dimension.

    ``rhs_sigma16=True``: rhs holds its contraction index in sigma16 order
    (logical ``k`` at ``sigma16_slot(k)``, as a copy stored from a
    ``load(..., sigma16_rows=True)`` tile holds it). Then an lhs computed in
    registers (an INT8 P quantized from a matmul result) feeds the tensor
    cores without a trip through shared memory. Needs ``contract=(1, _)``
    and a contraction of a multiple of 16.

    lhs may be ``sl.uint8`` (an ``sl.uint8_per_*`` quantization of a
    non-negative tile): its bytes are read as unsigned (the tensor cores'
    u8 x s8 form; a contraction of at most 65536).
    """
    lhs = tile(lhs, "qmatmul's lhs", (int8, uint8))
    rhs = tile(rhs, "qmatmul's rhs", (int8,))
    dims, result = _contraction(lhs, rhs, contract)
    if not isinstance(rhs_sigma16, bool):
        raise error("rhs_sigma16 must be a Python bool")
    if rhs_sigma16 and (dims[0] != 1 or lhs.shape[1] % 16):
        raise error(f"rhs_sigma16 needs lhs contracted over its columns (contract=(1, _)) "
                    f"and a contraction of a multiple of 16, got contract={dims} with "
                    f"lhs {lhs.type.mlir}")
    _check_int8_contraction(lhs, dims)
    lhs_scale = _scale_of(lhs_scale, lhs, dims[0], "lhs")
    rhs_scale = _scale_of(rhs_scale, rhs, dims[1], "rhs")
    acc = _accumulator(acc, result)
    return Value(result, backend().qmatmul(lhs, lhs_scale, rhs, rhs_scale, acc, dims, result,
                                           rhs_sigma16))


def matmul(lhs: Value, rhs: Value, contract: tuple[int, int] = (1, 1),
           acc: Value | None = None) -> Value:
    """``acc + lhs . rhs`` (``sage.matmul``), accumulated by the tensor cores.

    Two f16 (or two bf16) tiles accumulate in f32; two int8 tiles in int32,
    exactly, with sums that wrap modulo 2^32 (as the tensor cores' do): one
    call contracts at most 131072 elements, and a loop of calls over a total
    contraction of at most 131072 elements of [-127, 127] never wraps. An INT8
    GEMM accumulates its whole K this way and applies its scales once, after
    the loop (``sl.qmatmul`` scales every product instead). ``contract`` as
    in :func:`qmatmul`.
    """
    lhs = tile(lhs, "matmul's lhs", (float16, bfloat16, int8))
    rhs = tile(rhs, "matmul's rhs", (float16, bfloat16, int8))
    if lhs.dtype != rhs.dtype:
        raise error(f"matmul operands must both be f16, both bf16 or both int8, got "
                    f"{lhs.type.mlir} and {rhs.type.mlir}")
    is_int = lhs.dtype == int8
    dims, result = _contraction(lhs, rhs, contract, int32 if is_int else float32)
    if is_int:
        _check_int8_contraction(lhs, dims)
    acc = _accumulator(acc, result)
    return Value(result, backend().matmul(lhs, rhs, acc, dims, result))


def softmax_update(logits: Value, row_max: Value, row_sum: Value,
                   scale: float | None = None) -> tuple[Value, Value, Value, Value, Value]:
    """One online-softmax step in the exp2 domain (``sage.softmax_update``).

    Returns ``(p, new_max, new_sum, alpha, p_max)``; ``scale`` (a Python
    float) multiplies the logits first.
    """
    logits = tile(logits, "softmax_update's logits", (float32,))
    stat = TileType((logits.shape[0], 1), float32)
    for what, v in (("row_max", row_max), ("row_sum", row_sum)):
        if tile(v, what, (float32,)).type != stat:
            raise error(f"{what} must be {stat.mlir} for {logits.type.mlir} logits, "
                        f"got {v.type.mlir}")
    if scale is not None:
        if isinstance(scale, Value) or isinstance(scale, bool) or not isinstance(scale, (int, float)):
            raise error(f"softmax_update's scale must be a compile-time number, got {scale!r}")
        scale = float(scale)
    types = [logits.type, stat, stat, stat, stat]
    handles = backend().softmax_update(logits, row_max, row_sum, scale, types)
    return tuple(Value(t, h) for t, h in zip(types, handles))  # type: ignore[return-value]

