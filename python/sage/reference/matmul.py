"""``sage.qmatmul`` (i8 x i8 -> i32, scaled) and ``sage.matmul`` (16-bit into
f32, or i8 into i32).

Operand layouts follow the dialect's ``contract(lhs_contract, rhs_contract)``:
lhs is ``M x K`` when ``lhs_contract == 1`` and ``K x M`` when 0; rhs is
``N x K`` when ``rhs_contract == 1`` and ``K x N`` when 0; the result is
``M x N``. So ``contract(1, 1)`` is ``lhs @ rhs.T`` and ``contract(1, 0)``
is ``lhs @ rhs``.
"""

from __future__ import annotations

import numpy as np

from sage.reference.sigma16 import sigma16_slot
from sage.reference.tiles import require_axis, require_tile, to_bf16

# 127 * 127 * 131072 < 2**31: the int32 accumulator cannot overflow.
MAX_INT8_CONTRACTION = 131072
#: The same for an unsigned lhs (u8 x s8 products: 255 * 127 * 65536 < 2^31).
MAX_UINT8_CONTRACTION = 65536


def max_contraction(unsigned_lhs: bool) -> int:
    """The longest contraction whose int32 sum cannot overflow: 131072, or
    65536 with an unsigned lhs."""
    return MAX_UINT8_CONTRACTION if unsigned_lhs else MAX_INT8_CONTRACTION


def _rows_by_k(x: np.ndarray, contract: int, name: str) -> np.ndarray:
    """The operand as ``rows x K`` (transposed when it contracts dimension 0)."""
    require_tile(x, name)
    require_axis(contract, f"{name}_contract")
    return x if contract == 1 else x.T


def _check_acc(acc: np.ndarray | None, shape: tuple[int, int]) -> np.ndarray:
    if acc is None:
        return np.zeros(shape, np.float64)
    if not isinstance(acc, np.ndarray) or acc.shape != shape:
        raise ValueError(f"acc must have the result's shape {shape}, "
                         f"got {getattr(acc, 'shape', type(acc).__name__)}")
    return acc.astype(np.float64)


def int8_dot(lhs_q: np.ndarray, rhs_q: np.ndarray, lhs_contract: int = 1,
             rhs_contract: int = 1) -> np.ndarray:
    """The exact integer product of two int8 tiles, ``M x N`` int32; lhs may
    be uint8 (an unsigned quantization: u8 x s8 products).

    Computed in int64; raises ValueError if the contraction is longer than
    131072 (65536 with a uint8 lhs) or a result does not fit int32 (possible
    only with -128 entries, which the quantizer never produces).
    """
    for name, x, allowed in (("lhs", lhs_q, (np.int8, np.uint8)), ("rhs", rhs_q, (np.int8,))):
        if isinstance(x, np.ndarray) and x.dtype not in allowed:
            raise ValueError(f"{name} must be {' or '.join(np.dtype(t).name for t in allowed)}, "
                             f"got {x.dtype}")
    most = max_contraction(getattr(lhs_q, "dtype", None) == np.uint8)
    a = _rows_by_k(lhs_q, lhs_contract, "lhs").astype(np.int64)
    b = _rows_by_k(rhs_q, rhs_contract, "rhs").astype(np.int64)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"contracted sizes differ: lhs {a.shape[1]}, rhs {b.shape[1]}")
    if a.shape[1] > most:
        raise ValueError(f"contraction of {a.shape[1]} elements may overflow int32 "
                         f"(at most {most})")
    dot = a @ b.T
    if dot.size and (dot.max() > np.iinfo(np.int32).max or dot.min() < np.iinfo(np.int32).min):
        raise ValueError("the int8 product does not fit int32")
    return dot.astype(np.int32)


def _scale_column(scale: np.ndarray, operand: np.ndarray, contract: int, name: str) -> np.ndarray:
    """An operand's scale as a float64 column: one value per result row/column.

    The scale has the operand's rank: size 1 along the contracted dimension,
    and 1 or the operand's size along the other.
    """
    if not isinstance(scale, np.ndarray) or scale.ndim != 2:
        raise ValueError(f"{name} scale must be a 2-D numpy array, "
                         f"got {getattr(scale, 'shape', type(scale).__name__)}")
    if not np.issubdtype(scale.dtype, np.floating):
        raise ValueError(f"{name} scale must be float32, got {scale.dtype}")
    kept = 1 - contract
    if scale.shape[contract] != 1:
        raise ValueError(f"{name} scale {scale.shape}: scale varies along the "
                         "contracted dimension")
    if scale.shape[kept] not in (1, operand.shape[kept]):
        raise ValueError(f"{name} scale {scale.shape} must have size 1 or "
                         f"{operand.shape[kept]} along dimension {kept}")
    return scale.astype(np.float64).reshape(-1, 1)


def qmatmul(lhs_q: np.ndarray, lhs_scale: np.ndarray, rhs_q: np.ndarray,
            rhs_scale: np.ndarray, lhs_contract: int = 1, rhs_contract: int = 1,
            acc: np.ndarray | None = None, rhs_sigma16: bool = False) -> np.ndarray:
    """``sage.qmatmul``: ``acc + float(dot) * (lhs_scale * rhs_scale)``, ``M x N`` float64.

    ``dot`` is :func:`int8_dot`. ``lhs_scale`` is ``(M,1)`` or ``(1,1)`` when
    ``lhs_contract == 1`` and ``(1,M)`` or ``(1,1)`` when 0; ``rhs_scale`` is
    ``(N,1)``/``(1,1)`` when ``rhs_contract == 1`` and ``(1,N)``/``(1,1)``
    when 0. A scale that is not size 1 along its operand's contracted
    dimension is a ValueError. The epilogue is computed in float64 (the GPU
    does it in f32: compare with a tolerance, or emulate the f32 epilogue).
    With ``rhs_sigma16`` rhs holds its contraction index in sigma16 order
    (logical ``k`` at ``sigma16_slot(k)``, :mod:`sage.reference.sigma16`):
    it needs ``lhs_contract == 1`` and a contraction of a multiple of 16.
    """
    if rhs_sigma16:
        require_tile(rhs_q, "rhs")
        k = rhs_q.shape[require_axis(rhs_contract, "rhs_contract")]
        if k % 16 or lhs_contract != 1:
            raise ValueError("rhs_sigma16 needs lhs contracted over its columns and a "
                             f"contraction of a multiple of 16, got {k}")
        logical = sigma16_slot(np.arange(k))
        rhs_q = rhs_q[:, logical] if rhs_contract == 1 else rhs_q[logical, :]
    dot = int8_dot(lhs_q, rhs_q, lhs_contract, rhs_contract)
    lhs_s = _scale_column(lhs_scale, lhs_q, lhs_contract, "lhs")
    rhs_s = _scale_column(rhs_scale, rhs_q, rhs_contract, "rhs")
    return _check_acc(acc, dot.shape) + dot.astype(np.float64) * (lhs_s * rhs_s.T)


def _check_16bit(x: np.ndarray, name: str) -> None:
    if x.dtype == np.float16:
        return
    if x.dtype != np.float32:
        raise ValueError(f"{name} must be float16 or bf16 values in float32, got {x.dtype}")
    same = (to_bf16(x) == x) | np.isnan(x)
    if not same.all():
        raise ValueError(f"{name} is float32 standing for bf16 but holds values that bf16 "
                         "cannot represent (round them with to_bf16)")


def matmul(lhs: np.ndarray, rhs: np.ndarray, lhs_contract: int = 1, rhs_contract: int = 1,
           acc: np.ndarray | None = None) -> np.ndarray:
    """``sage.matmul``: ``acc + sum_k lhs * rhs``, ``M x N``.

    16-bit operands (both float16, or both float32 arrays holding
    bf16-representable values) give float64: products and sums are float64;
    the GPU accumulates in f32 in its own order, so compare with a tolerance.
    int8 operands give int32, exactly: :func:`int8_dot` plus ``acc`` (int32),
    the sum wrapping modulo 2^32 as the tensor cores' does.
    """
    if isinstance(lhs, np.ndarray) and lhs.dtype == np.int8:
        dot = int8_dot(lhs, rhs, lhs_contract, rhs_contract)
        if acc is None:
            return dot
        if not isinstance(acc, np.ndarray) or acc.shape != dot.shape or acc.dtype != np.int32:
            raise ValueError(f"acc must be int32 of the result's shape {dot.shape}, got "
                             f"{getattr(acc, 'dtype', type(acc).__name__)} "
                             f"{getattr(acc, 'shape', '')}")
        return (acc.astype(np.int64) + dot).astype(np.int32)  # wraps modulo 2^32
    a = _rows_by_k(lhs, lhs_contract, "lhs")
    b = _rows_by_k(rhs, rhs_contract, "rhs")
    _check_16bit(a, "lhs")
    _check_16bit(b, "rhs")
    if a.dtype != b.dtype:
        raise ValueError(f"operands must both be f16 or both bf16, got {a.dtype} and {b.dtype}")
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"contracted sizes differ: lhs {a.shape[1]}, rhs {b.shape[1]}")
    out = a.astype(np.float64) @ b.astype(np.float64).T
    return _check_acc(acc, out.shape) + out
