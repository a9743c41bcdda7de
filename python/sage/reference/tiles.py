"""Tile ops: smooth, reduce, broadcast, iota, masked load/store, bf16."""

from __future__ import annotations

import numpy as np


def require_tile(x: np.ndarray, name: str) -> None:
    """Raises ValueError unless ``x`` is a non-empty 2-D array."""
    if not isinstance(x, np.ndarray) or x.ndim != 2 or 0 in x.shape:
        raise ValueError(f"{name} must be a non-empty 2-D array, got "
                         f"{getattr(x, 'shape', type(x).__name__)}")


def _require_axis(axis: int) -> None:
    if axis not in (0, 1):
        raise ValueError(f"axis must be 0 or 1, got {axis}")


def to_bf16(x: np.ndarray) -> np.ndarray:
    """Rounds float32 values to bfloat16 (nearest, ties to even); float32 out."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) \
        & np.uint32(0xFFFF0000)
    out = np.where(np.isnan(np.asarray(x, dtype=np.float32)), bits, rounded)
    return out.astype(np.uint32).view(np.float32)


def smooth(x: np.ndarray, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(x - mean, mean)`` with the mean over ``axis`` kept as size 1 (float64)."""
    require_tile(x, "x")
    _require_axis(axis)
    x64 = np.asarray(x, dtype=np.float64)
    mean = x64.mean(axis=axis, keepdims=True)
    return x64 - mean, mean


def reduce(x: np.ndarray, kind: str, axis: int) -> np.ndarray:
    """``sage.reduce``: sum, max, min or absmax along ``axis``, kept as size 1.

    Sums of floating-point tiles are accumulated and returned in float64 (the
    dialect accumulates 16-bit sums in f32); integer sums in int64.
    """
    require_tile(x, "x")
    _require_axis(axis)
    if kind == "sum":
        acc = np.float64 if np.issubdtype(x.dtype, np.floating) else np.int64
        return np.sum(x, axis=axis, keepdims=True, dtype=acc)
    if kind == "max":
        return np.max(x, axis=axis, keepdims=True)
    if kind == "min":
        return np.min(x, axis=axis, keepdims=True)
    if kind == "absmax":
        return np.max(np.abs(x), axis=axis, keepdims=True)
    raise ValueError(f"unknown reduction {kind!r}; expected sum, max, min or absmax")


def broadcast(x: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Expands size-1 dimensions to ``shape`` (``sage.broadcast``)."""
    require_tile(x, "x")
    for have, want in zip(x.shape, shape):
        if have not in (1, want):
            raise ValueError(f"cannot broadcast {x.shape} to {tuple(shape)}: "
                             "only size-1 dimensions expand")
    return np.broadcast_to(x, shape).copy()


def iota(shape: tuple[int, int], axis: int) -> np.ndarray:
    """Each element's index along ``axis`` (int32)."""
    _require_axis(axis)
    rows, cols = np.indices(shape, dtype=np.int32)
    return rows if axis == 0 else cols


def _positions(offsets, strides, bounds, shape):
    r = offsets[0] + np.arange(shape[0])[:, None]
    c = offsets[1] + np.arange(shape[1])[None, :]
    valid = (r >= 0) & (r < bounds[0]) & (c >= 0) & (c < bounds[1])
    return r * strides[0] + c * strides[1], valid


def load(buffer: np.ndarray, offsets, strides, bounds, shape) -> np.ndarray:
    """``sage.load`` from flat memory: out-of-bounds elements read as 0."""
    address, valid = _positions(offsets, strides, bounds, shape)
    out = np.zeros(shape, dtype=buffer.dtype)
    out[valid] = buffer[address[valid]]
    return out


def store(buffer: np.ndarray, value: np.ndarray, offsets, strides, bounds,
          atomic_add: bool = False) -> None:
    """``sage.store`` into flat memory, in place; out-of-bounds are dropped."""
    require_tile(value, "value")
    if atomic_add and buffer.dtype != np.float32:
        raise ValueError("atomic_add needs a float32 buffer")
    address, valid = _positions(offsets, strides, bounds, value.shape)
    if atomic_add:
        np.add.at(buffer, address[valid], value[valid].astype(np.float32))
    else:
        buffer[address[valid]] = value[valid]
