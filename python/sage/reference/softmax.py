"""``sage.softmax_update``: one online-softmax step in the exp2 domain (float64)."""

from __future__ import annotations

import numpy as np

from sage.reference.tiles import require_tile


def softmax_update(s: np.ndarray, m: np.ndarray, l: np.ndarray, scale: float = 1.0
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One online-softmax step over a block of logits; every result is float64.

    ``s`` is ``M x N``; the running max ``m`` and running sum ``l`` are
    ``(M, 1)``. With ``t = s * scale`` (log2 units: fold log2(e) and the
    softmax scale into ``scale``)::

        rowmax  = max_j t                  new_max = maximum(m, rowmax)
        base    = 0 where new_max == -inf, else new_max
        alpha   = exp2(m - base)           p       = exp2(t - base)
        new_sum = alpha * l + sum_j p      p_max   = exp2(rowmax - base)

    A row whose logits so far are all -inf gives ``p = 0``, ``alpha = 0``,
    ``p_max = 0`` and ``new_sum = 0`` (given ``l = 0``), with no NaN.

    Returns:
        ``(p, new_max, new_sum, alpha, p_max)``.
    """
    require_tile(s, "s")
    rows = s.shape[0]
    for name, stat in (("m", m), ("l", l)):
        if np.shape(stat) != (rows, 1):
            raise ValueError(f"{name} must have shape ({rows}, 1), got {np.shape(stat)}")
    m64 = np.asarray(m, dtype=np.float64)
    l64 = np.asarray(l, dtype=np.float64)
    with np.errstate(invalid="ignore"):  # only reachable with +inf or NaN logits
        t = np.asarray(s, dtype=np.float64) * np.float64(scale)
        rowmax = t.max(axis=1, keepdims=True)
        new_max = np.maximum(m64, rowmax)
        base = np.where(new_max == -np.inf, 0.0, new_max)
        alpha = np.exp2(m64 - base)
        p = np.exp2(t - base)
        p_max = np.exp2(rowmax - base)
        new_sum = alpha * l64 + p.sum(axis=1, keepdims=True)
    return p, new_max, new_sum, alpha, p_max
