"""Tile ops: ``sage.smooth``, ``sage.reduce``, ``sage.broadcast``, ``sage.iota``,
plus the bfloat16 helper :func:`to_bf16` and argument checks shared by the
other modules."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

REDUCTIONS = ("sum", "max", "min", "absmax")


def require_tile(x: object, name: str) -> np.ndarray:
    """Returns ``x`` if it is a non-empty 2-D numpy array, else raises ValueError."""
    if not isinstance(x, np.ndarray) or x.ndim != 2 or 0 in x.shape:
        what = getattr(x, "shape", type(x).__name__)
        raise ValueError(f"{name} must be a non-empty 2-D array (a numpy tile), got {what}")
    return x


def require_axis(axis: int, name: str = "axis") -> int:
    """Returns ``axis`` if it is 0 or 1, else raises ValueError."""
    if axis not in (0, 1) or isinstance(axis, bool):
        raise ValueError(f"{name} must be 0 or 1, got {axis!r}")
    return int(axis)


def require_pair(value: Sequence[int], name: str) -> tuple[int, int]:
    """Returns ``value`` as a pair of Python ints, else raises ValueError."""
    pair = tuple(int(v) for v in value)
    if len(pair) != 2:
        raise ValueError(f"{name} must have 2 entries (one per dimension), got {len(pair)}")
    return pair  # type: ignore[return-value]


def to_bf16(x: np.ndarray) -> np.ndarray:
    """Rounds values to the nearest bfloat16 and returns them as float32.

    bfloat16 is the upper 16 bits of a float32 (8 significand bits including
    the implicit one), so the rounding is round-to-nearest-even on those bits;
    values beyond the largest bf16 round to infinity as IEEE requires. A NaN
    stays a NaN (its sign and upper payload are kept and the quiet bit is set,
    so the result is a bf16 NaN). float16/float64 input is first converted to
    float32 (exact for float16).
    """
    x32 = np.asarray(x, dtype=np.float32)
    bits = x32.view(np.uint32)
    lsb = (bits >> np.uint32(16)) & np.uint32(1)
    with np.errstate(over="ignore"):  # only NaN bit patterns can wrap around
        rounded = (bits + np.uint32(0x7FFF) + lsb) & np.uint32(0xFFFF0000)
    nan = (bits & np.uint32(0xFFFF0000)) | np.uint32(0x00400000)
    out = np.where(np.isnan(x32), nan, rounded).astype(np.uint32)
    return out.view(np.float32)


def smooth(x: np.ndarray, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``sage.smooth``: returns ``(x - mean, mean)`` in float64.

    ``mean`` is the average over ``axis`` (the token axis) with that axis kept
    at size 1: shape ``(1, N)`` for ``axis=0``, ``(M, 1)`` for ``axis=1``.
    The dialect computes it in f32; compare with a tolerance.
    """
    require_tile(x, "x")
    axis = require_axis(axis)
    x64 = np.asarray(x, dtype=np.float64)
    mean = x64.mean(axis=axis, keepdims=True)
    return x64 - mean, mean


def group_count(groups: int, extent: int) -> int:
    """The number of groups (``2**popcount(groups)``) that the bit mask
    ``groups`` makes of ``extent`` indices (``sage.reduce``'s and
    ``sage.broadcast``'s ``groups``): indices that agree on the bits of
    ``groups`` are one group.

    Raises:
        ValueError: ``extent`` is not a power of two of at least 2, or
            ``groups`` is not some, but not all, of its index bits.
    """
    if extent < 2 or extent & (extent - 1):
        raise ValueError(f"groups need a power-of-two extent of at least 2, got {extent}")
    if not 0 < groups < extent - 1:
        raise ValueError(f"groups {groups} must be some, not all, of the index bits "
                         f"below {extent}")
    return 1 << bin(groups).count("1")


def group_index(groups: int, extent: int) -> np.ndarray:
    """The group of each of ``extent`` indices: ``pext(i, groups)``, the bits
    of ``i`` in ``groups`` packed from bit 0 up (int64)."""
    group_count(groups, extent)
    index = np.arange(extent, dtype=np.int64)
    out = np.zeros(extent, np.int64)
    at = 0
    for bit in range(extent.bit_length()):
        if groups >> bit & 1:
            out |= ((index >> bit) & 1) << at
            at += 1
    return out


def reduce(x: np.ndarray, kind: str, axis: int, groups: int | None = None) -> np.ndarray:
    """``sage.reduce``: ``kind`` in ``("sum", "max", "min", "absmax")`` along ``axis``.

    The reduced axis is kept with size 1, or with ``groups`` (a bit mask,
    :func:`group_count`) reduced per group: the result keeps one entry per
    group along the axis, group ``g`` at ``g = pext(i, groups)``
    (:func:`group_index`). ``max``/``min``/``absmax`` are
    exact and keep the float dtype (a NaN in the set gives NaN). Float sums
    are accumulated and returned in float64 (the dialect accumulates 16-bit
    sums in f32, in an unspecified order: compare with a tolerance). Integer
    sums and integer ``absmax`` are computed and returned in int64, so they
    cannot wrap (``|-128|`` does not fit int8).
    """
    require_tile(x, "x")
    axis = require_axis(axis)
    if groups is not None:
        index = group_index(groups, x.shape[axis])
        parts = [reduce(np.compress(index == g, x, axis=axis), kind, axis)
                 for g in range(group_count(groups, x.shape[axis]))]
        return np.concatenate(parts, axis=axis)
    integer = np.issubdtype(x.dtype, np.integer)
    if kind == "sum":
        return np.sum(x, axis=axis, keepdims=True, dtype=np.int64 if integer else np.float64)
    if kind == "max":
        return np.max(x, axis=axis, keepdims=True)
    if kind == "min":
        return np.min(x, axis=axis, keepdims=True)
    if kind == "absmax":
        wide = x.astype(np.int64) if integer else x
        return np.max(np.abs(wide), axis=axis, keepdims=True)
    raise ValueError(f"unknown reduction {kind!r}; expected one of {REDUCTIONS}")


def broadcast(x: np.ndarray, shape: Sequence[int], groups: int | None = None) -> np.ndarray:
    """``sage.broadcast``: repeats size-1 dimensions of ``x`` up to ``shape``.

    Every other dimension must already equal the target's (ValueError
    otherwise), but with ``groups`` (a bit mask, :func:`group_count`) the
    one dimension whose extent is neither 1 nor the target's: there index
    ``i`` of the result reads ``x``'s index ``pext(i, groups)`` (the inverse
    of :func:`reduce`'s groups). Returns a new array of ``x``'s dtype.
    """
    require_tile(x, "x")
    target = require_pair(shape, "shape")
    if groups is not None:
        dims = [d for d in range(2) if x.shape[d] not in (1, target[d])]
        if len(dims) != 1:
            raise ValueError(f"groups need one dimension of {x.shape} whose size is neither "
                             f"1 nor the target's {target}")
        dim = dims[0]
        if x.shape[dim] != group_count(groups, target[dim]):
            raise ValueError(f"groups {groups} take {group_count(groups, target[dim])} "
                             f"entries along dimension {dim}, got {x.shape[dim]}")
        x = np.take(x, group_index(groups, target[dim]), axis=dim)
    for have, want in zip(x.shape, target):
        if have != want and have != 1:
            raise ValueError(f"cannot broadcast {x.shape} to {target}: "
                             "only size-1 dimensions expand")
    return np.broadcast_to(x, target).copy()


def iota(shape: Sequence[int], axis: int) -> np.ndarray:
    """``sage.iota``: an int32 tile whose element ``(i, j)`` is ``i`` (axis 0) or ``j`` (axis 1)."""
    target = require_pair(shape, "shape")
    axis = require_axis(axis)
    if min(target) < 1:
        raise ValueError(f"shape must have no empty dimension, got {target}")
    return np.indices(target, dtype=np.int32)[axis]
