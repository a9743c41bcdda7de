"""Reference semantics of the ``sage`` dialect, in numpy.

One function per op, with exactly the dialect's rules (docs/dialect/Sage.md).
Later GPU kernels and the CPU interpreter are checked against these.

Conventions:

* Tiles are 2-D numpy arrays. Row statistics are ``(M, 1)`` and column
  statistics ``(1, N)``: every value keeps rank 2 ("keepdims").
* Float inputs are float16 or float32. numpy has no bfloat16, so a bf16 tile
  is a float32 array holding bf16-representable values (see :func:`to_bf16`).
* Precision: f32 where the dialect pins an f32 rounding step; f64 elsewhere,
  compare those with a tolerance. The pinned steps are the quantizer's
  (``scale = absmax / 127``, ``inv = 1 / scale``, ``x * inv``, the rounding;
  and ``dequantize``'s product), emulated with numpy float32 operations so
  results compare bit for bit. Everything else (smooth's mean, softmax,
  16-bit matmuls, qmatmul's epilogue, float sums) is computed and returned
  in float64, while the GPU computes it in f32 in its own order.
* Integer products (:func:`int8_dot`) are exact.
"""

from sage.reference.matmul import (MAX_INT8_CONTRACTION, MAX_UINT8_CONTRACTION, int8_dot,
                                   matmul, qmatmul)
from sage.reference.memory import load, store
from sage.reference.sigma16 import sigma16_slot, sigma16_token
from sage.reference.quant import (GRANULARITIES, INT8_MAX, ROUNDINGS, UINT8_MAX, absmax_scales,
                                  dequantize, quantize, round_to_integer, scale_shape)
from sage.reference.softmax import softmax_update
from sage.reference.tiles import (REDUCTIONS, broadcast, group_count, group_index, iota, reduce,
                                  smooth, to_bf16)

__all__ = [
    "GRANULARITIES", "INT8_MAX", "MAX_INT8_CONTRACTION", "MAX_UINT8_CONTRACTION",
    "REDUCTIONS", "ROUNDINGS", "UINT8_MAX",
    "absmax_scales", "broadcast", "dequantize", "group_count", "group_index", "int8_dot", "iota",
    "load", "matmul", "qmatmul",
    "quantize", "reduce", "round_to_integer", "scale_shape", "sigma16_slot",
    "sigma16_token", "smooth",
    "softmax_update", "store", "to_bf16",
]
