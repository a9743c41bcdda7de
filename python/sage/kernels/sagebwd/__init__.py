"""SageBwd (INT8 trainable attention) written in the sage kernel language.

Kernels (module-level functions; grids in :mod:`.launch`; docs/sagebwd.md):

* :func:`quantize_kv_kernel` (the forward pre-pass: K mean and V channel
  scales, smoothing, INT8 of K and V);
* :func:`sagebwd_forward` (INT8 of c*Q, block by block, then O and the log2
  LSE);
* :func:`sagebwd_backward_prepass` (delta and per-block INT8 dO);
* :func:`sagebwd_backward` (dQ, dK, dV).

:mod:`.interpreted` runs them all on the CPU interpreter; the float64
emulation they are checked against is :mod:`sage.reference.sagebwd`.
"""

from sage.kernels.sagebwd.backward import sagebwd_backward
from sage.kernels.sagebwd.backward_prepass import sagebwd_backward_prepass
from sage.kernels.sagebwd.forward import sagebwd_forward
from sage.kernels.sagebwd.prepass import quantize_kv_kernel

__all__ = ["quantize_kv_kernel", "sagebwd_backward",
           "sagebwd_backward_prepass", "sagebwd_forward"]
