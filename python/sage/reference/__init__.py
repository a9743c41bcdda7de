"""Reference semantics of the sage dialect in numpy.

Every op of the dialect has a function here with exactly the dialect's rules
(see docs/dialect/Sage.md). Conventions:

* Tiles are 2-D arrays; row statistics are ``(M, 1)`` and column statistics
  ``(1, N)``: every value keeps rank 2.
* Where the dialect pins an f32 rounding step (the quantizer's scale,
  reciprocal, product and rounding; the qmatmul epilogue order), the
  reference performs exactly those float32 operations, so GPU results can be
  compared bit for bit. Everything else (means, softmax, 16-bit matmuls,
  accumulations) is float64 and is compared with a tolerance, since the GPU
  computes it in f32 with its own summation order.
* bfloat16 values are float32 arrays holding bf16-representable numbers
  (:func:`to_bf16`), since numpy has no bfloat16.
"""

from sage.reference.matmul import int8_dot, matmul, qmatmul
from sage.reference.quant import (GRANULARITIES, ROUNDINGS, dequantize,
                                  quantize, scale_shape)
from sage.reference.softmax import softmax_update
from sage.reference.tiles import (broadcast, iota, load, reduce, smooth,
                                  store, to_bf16)

__all__ = [
    "GRANULARITIES", "ROUNDINGS", "broadcast", "dequantize", "int8_dot",
    "iota", "load", "matmul", "qmatmul", "quantize", "reduce", "scale_shape",
    "smooth", "softmax_update", "store", "to_bf16",
]
