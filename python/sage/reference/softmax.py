"""``sage.softmax_update``: one online-softmax step in the exp2 domain."""

from __future__ import annotations

import numpy as np

from sage.reference.tiles import require_tile


def softmax_update(s: np.ndarray, m: np.ndarray, l: np.ndarray, scale: float = 1.0):
    """Returns ``(p, new_max, new_sum, alpha, p_max)`` in float64.

    Rows with no finite logit yet use 0 as the exponent base, so they give
    ``p = 0``, ``alpha = 0``, ``p_max = 0`` and no NaN.
    """
    require_tile(s, "s")
    rows = s.shape[0]
    for name, stat in (("m", m), ("l", l)):
        if np.shape(stat) != (rows, 1):
            raise ValueError(f"{name} must have shape ({rows}, 1), got {np.shape(stat)}")
    t = np.asarray(s, np.float64) * scale
    m = np.asarray(m, np.float64)
    rowmax = t.max(axis=1, keepdims=True)
    new_max = np.maximum(m, rowmax)
    base = np.where(new_max == -np.inf, 0.0, new_max)
    with np.errstate(invalid="ignore"):
        alpha = np.exp2(m - base)
        p = np.exp2(t - base)
        p_max = np.exp2(rowmax - base)
    new_sum = alpha * np.asarray(l, np.float64) + p.sum(axis=1, keepdims=True)
    return p, new_max, new_sum, alpha, p_max
