"""``sage.qmatmul`` and ``sage.matmul``."""

from __future__ import annotations

import numpy as np

from sage.reference.tiles import require_tile

MAX_INT8_CONTRACTION = 131072  # 127 * 127 * 131072 < 2**31


def _as_rows_by_k(x: np.ndarray, contract: int, name: str) -> np.ndarray:
    if contract not in (0, 1):
        raise ValueError(f"{name} contracted dimension must be 0 or 1, got {contract}")
    return x if contract == 1 else x.T


def int8_dot(lhs: np.ndarray, rhs: np.ndarray, lhs_contract: int = 1,
             rhs_contract: int = 1) -> np.ndarray:
    """The exact integer product of two int8 tiles, as int32 (M x N)."""
    require_tile(lhs, "lhs")
    require_tile(rhs, "rhs")
    a = _as_rows_by_k(lhs, lhs_contract, "lhs").astype(np.int64)
    b = _as_rows_by_k(rhs, rhs_contract, "rhs").astype(np.int64)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"contracted sizes differ: {a.shape[1]} vs {b.shape[1]}")
    if a.shape[1] > MAX_INT8_CONTRACTION:
        raise ValueError(f"contraction of {a.shape[1]} elements may overflow int32 "
                         f"(at most {MAX_INT8_CONTRACTION})")
    dot = a @ b.T
    assert np.all(np.abs(dot) < 2**31)
    return dot.astype(np.int32)


def _row_scale(scale: np.ndarray, operand: np.ndarray, contract: int, name: str) -> np.ndarray:
    """The operand's scale as a column (one value per output row/col)."""
    other = 1 - contract
    if scale.ndim != 2 or scale.shape[contract] != 1:
        raise ValueError(f"{name} scale {scale.shape} varies along the contracted dimension")
    if scale.shape[other] not in (1, operand.shape[other]):
        raise ValueError(f"{name} scale must have size 1 or {operand.shape[other]} "
                         f"along dimension {other}, got {scale.shape[other]}")
    return scale.reshape(-1, 1) if scale.shape[other] != 1 else scale.reshape(1, 1)


def qmatmul(lhs: np.ndarray, lhs_scale: np.ndarray, rhs: np.ndarray, rhs_scale: np.ndarray,
            lhs_contract: int = 1, rhs_contract: int = 1,
            acc: np.ndarray | None = None) -> np.ndarray:
    """``acc + f(dot) * (lhs_scale * rhs_scale)``; the epilogue in float64."""
    dot = int8_dot(lhs, rhs, lhs_contract, rhs_contract)
    sa = _row_scale(np.asarray(lhs_scale), lhs, lhs_contract, "lhs").astype(np.float64)
    sb = _row_scale(np.asarray(rhs_scale), rhs, rhs_contract, "rhs").astype(np.float64)
    out = dot.astype(np.float64) * (sa * sb.T)
    return out if acc is None else np.asarray(acc, np.float64) + out


def matmul(lhs: np.ndarray, rhs: np.ndarray, lhs_contract: int = 1, rhs_contract: int = 1,
           acc: np.ndarray | None = None) -> np.ndarray:
    """The 16-bit matmul in float64 (the GPU accumulates in f32)."""
    require_tile(lhs, "lhs")
    require_tile(rhs, "rhs")
    a = _as_rows_by_k(lhs, lhs_contract, "lhs").astype(np.float64)
    b = _as_rows_by_k(rhs, rhs_contract, "rhs").astype(np.float64)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"contracted sizes differ: {a.shape[1]} vs {b.shape[1]}")
    out = a @ b.T
    return out if acc is None else np.asarray(acc, np.float64) + out
