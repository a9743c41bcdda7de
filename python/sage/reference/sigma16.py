"""The sigma16 order: token ``t`` of every 16 at slot ``4*((t//2)%4) + 2*(t//8) + t%2``.

An INT8 matmul operand stored with its contraction index in this order lets
the other operand come from an accumulator's registers as they are (the
8-bit tensor-core A fragment holds, in this order, the columns the
accumulator layout gives a thread: docs/lowering.md, "sigma16"). Used by
``sage.load``'s ``sigma16_rows`` and ``sage.qmatmul``'s ``rhs_sigma16``; the
compiler's definition is ``sigma16Slot`` in include/sage/Layout/Encodings.h.
"""

from __future__ import annotations

import numpy as np


def sigma16_slot(token: np.ndarray | int) -> np.ndarray:
    """The slot of each token (indices of any size: blocks of 16 stay in place)."""
    t = np.asarray(token, dtype=np.int64)
    low = t & 15
    return (t & ~15) | (4 * ((low // 2) % 4) + 2 * (low // 8) + low % 2)


def sigma16_token(slot: np.ndarray | int) -> np.ndarray:
    """The token at each slot: the inverse of :func:`sigma16_slot`."""
    s = np.asarray(slot, dtype=np.int64)
    return (s & ~14) | ((s >> 1) & 6) | ((s << 2) & 8)
