"""``sage.quantize`` and ``sage.dequantize`` with the ``#sage.int8`` and
``#sage.uint8`` schemes.

The quantizer's arithmetic is emulated exactly in float32 with numpy float32
operations (IEEE round-to-nearest), never in float64 followed by a cast, so a
kernel's int8 values and scales can be compared bit for bit.
"""

from __future__ import annotations

import numpy as np

from sage.reference.tiles import require_tile

GRANULARITIES = ("per_block", "per_token", "per_channel")
ROUNDINGS = ("rne", "rna")
INT8_MAX = 127
#: The largest value of the unsigned scheme (``#sage.uint8``).
UINT8_MAX = 255

# Axes reduced to get one value per granule.
_GRANULE_AXES = {"per_block": (0, 1), "per_token": (1,), "per_channel": (0,)}


def scale_shape(shape: tuple[int, int], granularity: str) -> tuple[int, int]:
    """Shape of the scale tile of an ``M x N`` tile: ``(1,1)``, ``(M,1)`` or ``(1,N)``."""
    rows, cols = shape
    if granularity == "per_block":
        return (1, 1)
    if granularity == "per_token":
        return (rows, 1)
    if granularity == "per_channel":
        return (1, cols)
    raise ValueError(f"unknown granularity {granularity!r}; expected one of {GRANULARITIES}")


def _check_scales(scales: object, shape: tuple[int, int], granularity: str) -> np.ndarray:
    expected = scale_shape(shape, granularity)
    if not isinstance(scales, np.ndarray) or scales.shape != expected:
        got = getattr(scales, "shape", type(scales).__name__)
        raise ValueError(f"{granularity} scales of a {shape} tile have shape "
                         f"{expected}, got {got}")
    if scales.dtype != np.float32:
        raise ValueError(f"scales must be float32 (the dialect's f32), got {scales.dtype}; "
                         "cast them explicitly")
    return scales


def round_to_integer(y: np.ndarray, rounding: str) -> np.ndarray:
    """Rounds float32 ``y`` to integral float32 values.

    ``"rne"``: half to even (``np.rint``). ``"rna"``: half away from zero,
    ``sign(y) * floor(|y| + 0.5)`` with the addition in float64, where it is
    exact for every float32 that is not already an integer (and cannot round
    a value below one half up to 1). NaN and infinities pass through.
    """
    y = np.asarray(y, dtype=np.float32)
    if rounding == "rne":
        return np.rint(y)
    if rounding == "rna":
        magnitude = np.floor(np.abs(y.astype(np.float64)) + 0.5)
        return (np.sign(y) * magnitude).astype(np.float32)
    raise ValueError(f"unknown rounding {rounding!r}; expected one of {ROUNDINGS}")


def absmax_scales(x: np.ndarray, granularity: str, qmax: int = INT8_MAX) -> np.ndarray:
    """The scales :func:`quantize` computes without a given ``scale``: per
    granule, absmax / ``qmax`` in float32, 0 where that is subnormal (or the
    granule is 0), NaN where it holds NaN. ``x``: a float16/float32 tile."""
    return _scales_of(_absmax(x.astype(np.float32), granularity), qmax)


def _absmax(x32: np.ndarray, granularity: str) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.max(np.abs(x32), axis=_GRANULE_AXES[granularity], keepdims=True)


def _scales_of(absmax: np.ndarray, qmax: int) -> np.ndarray:
    with np.errstate(all="ignore"):
        scales = absmax / np.float32(qmax)
        # Normal or 0 (NaN stays NaN): then |x * inv| < qmax + 1/2 and the
        # kernels need no clamp (sage.quantize's description).
        return np.where(scales < np.finfo(np.float32).tiny, np.float32(0),
                        scales).astype(np.float32)


def quantize(x: np.ndarray, granularity: str, rounding: str = "rne",
             scale: np.ndarray | None = None, qmax: int | None = None,
             saturate: bool = True, unsigned: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``sage.quantize``: symmetric INT8 quantization of a float16/float32 tile.

    Per granule (the whole tile, a row or a column for ``"per_block"``,
    ``"per_token"``, ``"per_channel"``), all in float32::

        absmax = max |x|                        (exact; NaN if the granule holds NaN)
        scale  = absmax / qmax                  (f32 division)
        scale  = 0 if scale < 2**-126 else scale (a subnormal scale is flushed)
        inv    = 0 if scale == 0 else 1 / scale (f32 division)
        y      = x * inv                        (f32 multiply)
        q      = clip(round(y), -qmax, qmax)    ("rne" or "rna", see round_to_integer)

    With ``scale`` (float32, shape :func:`scale_shape`) no absmax is computed:
    that scale is used and returned. An all-zero granule (``-0.0`` included),
    or one whose computed scale would be subnormal (absmax below qmax *
    2**-126), gets scale 0 and q 0; a computed scale being normal, the clip
    never acts on it. A granule holding NaN or infinity (or a given
    non-finite scale) keeps its NaN/infinite scale; its q values are
    unspecified by the dialect and are 0 here. Float32 inputs stand for f32 or
    bf16 tiles (bf16 values held in float32).

    ``saturate=False`` (a given ``scale`` only; ``sage.quantize``'s
    ``unsaturated``) promises ``|round(y)| <= qmax``: the clip is dropped, and
    a finite rounded value beyond it is a ValueError here (unspecified on the
    GPU); non-finite ones give 0, as there. With ``"rne"`` it rounds the
    exact product ``x * inv`` (not rounded to float32 first: the GPU fuses
    the multiply into the rounding's FMA).

    ``unsigned`` (``#sage.uint8``): ``qmax`` defaults to 255 and the clip is
    to ``[0, qmax]`` (negative inputs give 0, also with a computed scale);
    ``saturate=False`` then promises ``0 <= round(y) <= qmax``. The signed
    scheme's ``qmax`` defaults to 127.

    Returns:
        ``(q, scales)``: an int8 (uint8 when ``unsigned``) tile of ``x``'s
        shape and float32 scales.
    """
    require_tile(x, "x")
    if x.dtype not in (np.float16, np.float32):
        raise ValueError(f"quantize takes float16 or float32 (bf16 values in float32) tiles, "
                         f"got {x.dtype}")
    if rounding not in ROUNDINGS:
        raise ValueError(f"unknown rounding {rounding!r}; expected one of {ROUNDINGS}")
    scale_shape(x.shape, granularity)  # validates the granularity
    largest = UINT8_MAX if unsigned else INT8_MAX
    qmax = largest if qmax is None else qmax
    if isinstance(qmax, bool) or not isinstance(qmax, (int, np.integer)) or \
            not 1 <= qmax <= largest:
        raise ValueError(f"qmax must be an integer in [1, {largest}], got {qmax!r}")
    qmin = 0 if unsigned else -qmax

    x32 = x.astype(np.float32)  # exact for float16 and float32
    with np.errstate(all="ignore"):
        absmax = _absmax(x32, granularity)
        if scale is None:
            scales = _scales_of(absmax, qmax)
        else:
            scales = _check_scales(scale, x.shape, granularity).copy()
        inv = np.where(scales == 0, np.float32(0), np.float32(1) / scales).astype(np.float32)
        if not saturate and rounding == "rne":
            # Unsaturated, round-to-nearest-even: the exact product is
            # rounded (the GPU's one FMA with the magic constant); float64
            # holds every product of two float32 exactly.
            r = np.rint(x32.astype(np.float64) * inv.astype(np.float64)).astype(np.float32)
        else:
            y = x32 * inv  # float32 * float32 -> float32, rounded once
            r = round_to_integer(y, rounding)
        r = np.where(np.isnan(r), np.float32(0), r)  # NaN converts to 0 (saturating cvt)
        if not saturate:
            if scale is None:
                raise ValueError("saturate=False needs a given scale (a computed absmax "
                                 "scale keeps the clamp)")
            r = np.where(np.isfinite(r), r, np.float32(0))
            if r.size and (r.max() > qmax or r.min() < qmin):
                raise ValueError(f"quantize with saturate=False: round(x * inv) reaches "
                                 f"[{r.min():g}, {r.max():g}], outside [{qmin}, {qmax}]")
        q = np.clip(r, qmin, qmax).astype(np.uint8 if unsigned else np.int8)
    bad = ~(np.isfinite(absmax) & np.isfinite(scales))  # non-finite granules: q = 0
    q[np.broadcast_to(bad, q.shape)] = 0
    return q, scales.astype(np.float32)


def dequantize(q: np.ndarray, scales: np.ndarray, granularity: str) -> np.ndarray:
    """``sage.dequantize``: ``float32(q) * scale`` per element, the product in float32."""
    require_tile(q, "q")
    _check_scales(scales, q.shape, granularity)
    with np.errstate(all="ignore"):  # an infinite scale times q = 0 is NaN
        return q.astype(np.float32) * scales
