"""``sage.load`` and ``sage.store`` on flat (1-D) numpy "global memory"."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sage.reference.sigma16 import sigma16_token
from sage.reference.tiles import require_pair, require_tile

#: Leading dimensions a view may have before the tile's two (a TMA tensor
#: map has rank 5 at most; kMaxLeadingDims in the compiler).
MAX_LEADING_DIMS = 3


def _addresses(buffer: np.ndarray, offsets: Sequence[int], strides: Sequence[int],
               bounds: Sequence[int], shape: tuple[int, int],
               sigma16_rows: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Element addresses of a tile and the mask of its in-bounds elements
    (tile row ``i`` at view row ``sigma16_token(i)`` with ``sigma16_rows``)."""
    if not isinstance(buffer, np.ndarray) or buffer.ndim != 1:
        raise ValueError("buffer must be a 1-D numpy array (flat global memory)")
    leading = len(offsets) - 2
    if not 0 <= leading <= MAX_LEADING_DIMS or len(strides) != len(offsets) \
            or len(bounds) != len(offsets):
        raise ValueError(f"offsets, strides and bounds must have 2 to {2 + MAX_LEADING_DIMS} "
                         f"entries each, as many of each, got {len(offsets)}, {len(strides)} "
                         f"and {len(bounds)}")
    # Leading dimensions pick one index each: they move the base, and an
    # index outside its dimension empties the view.
    base, inside = 0, True
    for offset, stride, bound in zip(offsets[:leading], strides[:leading], bounds[:leading]):
        base += int(offset) * int(stride)
        inside = inside and 0 <= int(offset) < int(bound)
    offsets = require_pair(offsets[leading:], "offsets")
    strides = require_pair(strides[leading:], "strides")
    bounds = require_pair(bounds[leading:], "bounds")
    if not inside:
        bounds = (0, bounds[1])
    rows = np.arange(shape[0], dtype=np.int64)
    if sigma16_rows:
        if shape[0] % 16:
            raise ValueError(f"sigma16_rows needs a multiple of 16 rows, got {shape[0]}")
        rows = sigma16_token(rows)
    row = offsets[0] + rows[:, None]
    col = offsets[1] + np.arange(shape[1], dtype=np.int64)[None, :]
    valid = (row >= 0) & (row < bounds[0]) & (col >= 0) & (col < bounds[1])
    address = base + row * strides[0] + col * strides[1]
    outside = valid & ((address < 0) | (address >= buffer.size))
    if outside.any():
        raise ValueError("an in-bounds element lies outside the buffer "
                         f"(address {int(address[outside][0])}, buffer size {buffer.size})")
    return address, valid


def load(buffer: np.ndarray, offsets: Sequence[int], strides: Sequence[int],
         bounds: Sequence[int], shape: Sequence[int], sigma16_rows: bool = False
         ) -> np.ndarray:
    """``sage.load``: reads a ``shape`` tile from flat memory, masking the outside.

    Element ``(i, j)`` is ``buffer[(offsets[0]+i)*strides[0] +
    (offsets[1]+j)*strides[1]]`` when ``0 <= offsets[d]+idx[d] < bounds[d]``
    for both dimensions ``d`` and 0 otherwise. The tile has ``buffer``'s dtype.
    Up to :data:`MAX_LEADING_DIMS` leading entries of ``offsets``, ``strides``
    and ``bounds`` come first, each picking one index (the whole tile reads 0
    when one lies outside its bound).
    With ``sigma16_rows`` the rows come in sigma16 order: row ``i`` is read
    as view row ``sigma16_token(i)`` (:mod:`sage.reference.sigma16`).
    """
    tile_shape = require_pair(shape, "shape")
    if min(tile_shape) < 1:
        raise ValueError(f"shape must have no empty dimension, got {tile_shape}")
    address, valid = _addresses(buffer, offsets, strides, bounds, tile_shape, sigma16_rows)
    out = np.zeros(tile_shape, dtype=buffer.dtype)
    out[valid] = buffer[address[valid]]
    return out


def store(buffer: np.ndarray, value: np.ndarray, offsets: Sequence[int],
          strides: Sequence[int], bounds: Sequence[int], atomic_add: bool = False) -> None:
    """``sage.store``: writes the in-bounds elements of ``value`` into ``buffer`` in place.

    Addressing and bounds are those of :func:`load`; out-of-bounds elements
    are dropped. ``value`` must have ``buffer``'s dtype. With ``atomic_add``
    each element is added to memory instead (float32 only): the additions are
    done in float32 in row-major order, whereas the GPU's order is
    unspecified, so compare overlapping atomic results with a tolerance.
    """
    require_tile(value, "value")
    if isinstance(buffer, np.ndarray) and value.dtype != buffer.dtype:
        raise ValueError(f"value dtype {value.dtype} differs from the buffer's {buffer.dtype}")
    if atomic_add and value.dtype != np.float32:
        raise ValueError(f"atomic_add needs a float32 buffer and values, got {value.dtype}")
    address, valid = _addresses(buffer, offsets, strides, bounds, value.shape)
    if atomic_add:
        np.add.at(buffer, address[valid], value[valid])
    else:
        buffer[address[valid]] = value[valid]
