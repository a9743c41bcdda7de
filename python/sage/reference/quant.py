"""``sage.quantize`` and ``sage.dequantize`` with the INT8 schemes."""

from __future__ import annotations

import numpy as np

from sage.reference.tiles import require_tile

GRANULARITIES = ("per_block", "per_token", "per_channel")
ROUNDINGS = ("rne", "rna")
INT8_MAX = 127


def scale_shape(shape: tuple[int, int], granularity: str) -> tuple[int, int]:
    """Shape of the scale tile for a tile of ``shape``."""
    m, n = shape
    if granularity == "per_block":
        return (1, 1)
    if granularity == "per_token":
        return (m, 1)
    if granularity == "per_channel":
        return (1, n)
    raise ValueError(f"unknown granularity {granularity!r}; expected one of {GRANULARITIES}")


def _granule_absmax(x32: np.ndarray, granularity: str) -> np.ndarray:
    """max |x| over each granule, keeping rank 2 (exact; NaN propagates)."""
    axes = {"per_block": (0, 1), "per_token": (1,), "per_channel": (0,)}[granularity]
    return np.max(np.abs(x32), axis=axes, keepdims=True)


def _round(y: np.ndarray, rounding: str) -> np.ndarray:
    if rounding == "rne":
        return np.rint(y)
    if rounding == "rna":
        # floor(|y| + 0.5) is exact here: |y| <= 127 * (1 + 2^-23) after the
        # clamp-free product, and adding 0.5 to such float32 values is exact
        # in float64.
        mag = np.floor(np.abs(y.astype(np.float64)) + 0.5)
        return (np.sign(y) * mag).astype(np.float32)
    raise ValueError(f"unknown rounding {rounding!r}; expected one of {ROUNDINGS}")


def quantize(x: np.ndarray, granularity: str = "per_block", rounding: str = "rne",
             scale: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric INT8 quantization exactly as ``sage.quantize`` defines it.

    Per granule, in float32: ``scale = absmax / 127``,
    ``inv = 0 if scale == 0 else 1 / scale``, ``q = clamp(round(x * inv),
    -127, 127)``. With ``scale`` given, that scale is used and returned.

    Returns:
        ``(q, scales)``: int8 values and float32 scales of
        :func:`scale_shape`.
    """
    require_tile(x, "x")
    if rounding not in ROUNDINGS:
        raise ValueError(f"unknown rounding {rounding!r}; expected one of {ROUNDINGS}")
    expected = scale_shape(x.shape, granularity)
    x32 = np.asarray(x, dtype=np.float32)
    with np.errstate(all="ignore"):
        if scale is None:
            scales = _granule_absmax(x32, granularity) / np.float32(INT8_MAX)
        else:
            scales = np.asarray(scale)
            if scales.shape != expected:
                raise ValueError(f"{granularity} scales of a {x.shape} tile have shape "
                                 f"{expected}, got {scales.shape}")
            scales = scales.astype(np.float32)
        inv = np.where(scales == 0, np.float32(0), np.float32(1) / scales).astype(np.float32)
        y = (x32 * inv).astype(np.float32)
        r = _round(y, rounding)
        r = np.where(np.isfinite(r), r, 0)  # unspecified for NaN/inf granules
        q = np.clip(r, -INT8_MAX, INT8_MAX).astype(np.int8)
    return q, scales.astype(np.float32)


def dequantize(q: np.ndarray, scales: np.ndarray, granularity: str = "per_block") -> np.ndarray:
    """``f32(q) * scale`` per element, in float32 (``sage.dequantize``)."""
    require_tile(q, "q")
    expected = scale_shape(q.shape, granularity)
    if scales.shape != expected:
        raise ValueError(f"{granularity} scales of a {q.shape} tile have shape "
                         f"{expected}, got {scales.shape}")
    return (q.astype(np.float32) * scales.astype(np.float32)).astype(np.float32)
