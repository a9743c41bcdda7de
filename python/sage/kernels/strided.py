"""In-kernel helpers for strided token tensors, shared by the attention kernels
(plain Python, inlined when traced).

A strided token tensor is indexed ``(batch, head, row, D)``: element
``(b, h, r, d)`` is at ``b * stride_b + h * stride_h + r * stride_n + d``
(unit last-dimension stride; any other strides, including 0 for broadcast
batches or heads and the ``(B, N, H, D)`` layout). Offsets are formed in i64
so that large tensors do not overflow i32.
"""

from __future__ import annotations

import sage.language as sl


def kv_head_of(head, GROUP: int):
    """The kv head that query head ``head`` (of one batch) reads (GQA/MQA):
    ``GROUP`` = heads / kv heads is a constexpr, so the division is a
    multiply."""
    return head // GROUP


def head_base(ptr, batch, head, stride_b, stride_h):
    """Pointer to the ``(rows, D)`` slice ``(batch, head)`` of a strided token tensor."""
    return ptr + batch.to(sl.int64) * stride_b + head.to(sl.int64) * stride_h


def load_strided_rows(base, row, rows, stride_n, BLOCK: int, D: int):
    """The ``BLOCK x D`` tile at ``row`` of a strided slice (see :func:`head_base`;
    0 past ``rows``)."""
    return sl.load(base, (BLOCK, D), (row, 0), (stride_n, 1), (rows, D))


def store_strided_rows(base, tile, row, rows, stride_n, D: int) -> None:
    """Writes a ``BLOCK x D`` tile at ``row`` of a strided slice."""
    sl.store(base, tile, (row, 0), (stride_n, 1), (rows, D))
