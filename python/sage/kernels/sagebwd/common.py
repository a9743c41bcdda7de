"""In-kernel helpers shared by the SageBwd kernels (plain Python, inlined when traced).

Memory layout of the tensors the kernels touch:

* the 16-bit inputs Q, K, V, dO and the output O are *strided* token tensors
  indexed ``(batch, head, row, D)``: element ``(b, h, r, d)`` is at
  ``b * stride_b + h * stride_h + r * stride_n + d`` (unit last-dimension
  stride; any other strides, including 0 for broadcast batches or heads and
  the ``(B, N, H, D)`` layout);
* the kernels' own buffers are contiguous token tensors ``(B * heads, rows,
  D)``: the INT8 copies, dQ, dK, dV (rows = N for query-side tensors, Nkv and
  Hkv for key-side ones);
* block scales ``(B * heads, ceil(rows / BLOCK))`` f32;
* row statistics ``(B * H, N)`` f32 (LSE, delta);
* per-head vectors ``(B * heads, D)`` f32 (K mean) and per-block vectors
  ``(B * H, ceil(N / BLOCK_M), D)`` f32 (Q-smoothing means).

A program addresses its (batch, head) slice through ``bh`` (program id 1,
``bh = batch * heads + head``); offsets are formed in i64 so that large
tensors do not overflow i32.
"""

from __future__ import annotations

import sage.language as sl
from sage.reference.sagebwd import K_SCALE_GROUPS
from sage.reference.tiles import group_count
# The strided-view helpers are the attention kernels' common ones; the SageBwd
# kernels import them from here with the rest.
from sage.kernels.strided import (head_base, kv_head_of, load_strided_rows,  # noqa: F401
                                  store_strided_rows)


def cdiv(n, block: int):
    """``ceil(n / block)`` for a runtime length ``n`` and a constexpr block."""
    return (n + (block - 1)) // block


#: The smallest normal f32 (2^-126): a quantizer flushes smaller scales to 0
#: (sl.quantize), and the forward raises a zero Q scale to it.
SMALLEST_NORMAL = 1.1754943508222875e-38

#: Rows of the transposed INT8 copies (``v_qt``, ``do_qt``, ``q_qt``) and of
#: the per-token Q and K scales are padded to this many tokens: each row
#: starts 16-byte aligned (cp.async and TMA move 16 bytes), and scales load in
#: whole pairs.
TOKEN_PAD = 16


def padded_tokens(n):
    """A token count rounded up to :data:`TOKEN_PAD` (an int, or a runtime
    length in a kernel: then its divisor is known)."""
    return cdiv(n, TOKEN_PAD) * TOKEN_PAD


def scale_row_length(n, BLOCK: int, PER_TOKEN: bool):
    """The row length of ``q_scale`` or ``k_scale`` (one row per (batch,
    head)) for ``n`` tokens in blocks of BLOCK: ``n`` padded to
    :data:`TOKEN_PAD` per token (0 scales past ``n``), else one per block (an
    int, or a runtime length in a kernel)."""
    return padded_tokens(n) if PER_TOKEN else cdiv(n, BLOCK)


def program_head(heads, axis: int = 1):
    """``(batch, head, bh)`` of this program: the head is grid axis ``axis``
    and the batch the next one (grids are (blocks, heads, batch), so no
    runtime division splits a flat index, and the F2I-based integer division
    stays out of the kernels); ``bh = batch * heads + head``."""
    batch = sl.program_id(axis + 1)
    head = sl.program_id(axis)
    return batch, head, batch * heads + head


def slice_of(ptr, bh, rows, width):
    """Pointer to the ``(rows, width)`` slice ``bh`` of a ``(X, rows, width)`` tensor
    (``bh`` 0, a Python int: ``ptr`` already points at the slice)."""
    if isinstance(bh, int) and bh == 0:
        return ptr
    return ptr + bh.to(sl.int64) * rows * width


def load_rows(ptr, bh, row, rows, BLOCK: int, D: int):
    """The ``BLOCK x D`` tile at ``row`` of token tensor slice ``bh`` (0 past ``rows``)."""
    return sl.load(slice_of(ptr, bh, rows, D), (BLOCK, D), (row, 0), (D, 1), (rows, D))


def store_rows(ptr, tile, bh, row, rows, D: int, atomic_add: bool = False) -> None:
    """Writes (or atomically adds) a ``BLOCK x D`` tile at ``row`` of slice ``bh``."""
    sl.store(slice_of(ptr, bh, rows, D), tile, (row, 0), (D, 1), (rows, D),
             atomic_add=atomic_add)


def store_transposed_rows(ptr, tile, bh, row, rows, stride, D: int) -> None:
    """Writes a ``BLOCK x D`` tile transposed, as columns ``row ..`` of slice
    ``bh`` of a ``(X, D, stride)`` tensor (rows past ``rows`` are skipped)."""
    sl.store(slice_of(ptr, bh, D, stride), tile, (row, 0), (1, stride), (rows, D))


def load_transposed_block(ptr, bh, col, cols, stride, BLOCK: int, D: int):
    """The ``D x BLOCK`` tile of columns ``col ..`` of slice ``bh`` of a ``(X, D,
    stride)`` tensor (0 past ``cols``)."""
    return sl.load(slice_of(ptr, bh, D, stride), (D, BLOCK), (0, col), (stride, 1), (D, cols))


def load_row_stat(ptr, bh, row, rows, BLOCK: int, end=None):
    """A ``BLOCK x 1`` f32 row statistic (LSE, delta) of slice ``bh`` at
    ``row`` (0 past ``end``, by default ``rows``: a caller that knows the
    tile ends before ``rows`` may say so, and a block-aligned ``end`` lets
    one bounds check serve the whole tile)."""
    return sl.load(slice_of(ptr, bh, rows, 1), (BLOCK, 1), (row, 0), (1, 0),
                   (rows if end is None else end, 1))


def store_row_stat(ptr, value, bh, row, rows) -> None:
    """Writes a ``BLOCK x 1`` row statistic of slice ``bh`` at ``row``."""
    sl.store(slice_of(ptr, bh, rows, 1), value, (row, 0), (1, 0), (rows, 1))


def load_block_scale(ptr, bh, block, nblocks):
    """The ``1 x 1`` f32 scale of block ``block`` of slice ``bh``."""
    return sl.load(slice_of(ptr, bh, nblocks, 1), (1, 1), (0, block), (0, 1), (1, nblocks))


def store_block_scale(ptr, scale, bh, block, nblocks) -> None:
    """Writes the ``1 x 1`` scale of block ``block`` of slice ``bh``."""
    sl.store(slice_of(ptr, bh, nblocks, 1), scale, (0, block), (0, 1), (1, nblocks))


def load_vector(ptr, index, D: int):
    """Row ``index`` of a ``(X, D)`` f32 array as a ``1 x D`` tile."""
    return sl.load(slice_of(ptr, index, 1, D), (1, D), (0, 0), (0, 1), (1, D))


def store_vector(ptr, value, index, D: int) -> None:
    """Writes a ``1 x D`` tile as row ``index`` of a ``(X, D)`` array."""
    sl.store(slice_of(ptr, index, 1, D), value, (0, 0), (0, 1), (1, D))


def quantize_block_to(x, q_ptr, scale_ptr, bh, block, row, rows, nblocks, D: int,
                      PER_TOKEN: bool = False, transposed_stride=None,
                      scale_rows=None):
    """The pre-passes' quantize step: INT8 of tile ``x``, stored with its scales.

    Per block (one scale, slice ``bh`` of a (X, nblocks) array) or, with
    PER_TOKEN, one scale per row (slice ``bh`` of a (X, rows) array, see
    :func:`load_scale`; ``scale_rows``, default ``rows``, is that array's row
    length: a padded one gets 0 scales past ``rows`` up to it). Rows of ``x``
    past ``rows`` are not stored. Per block they take part in the absmax, so
    they must already be 0; per token each sets only its own scale, which is
    stored (and returned) as 0 whatever the row holds. With
    ``transposed_stride`` the INT8 tile is stored transposed, into a (X, D,
    transposed_stride) tensor (:func:`store_transposed_rows`).
    Returns the INT8 tile and its scales (a ``BLOCK x 1`` column per token,
    else ``1 x 1``), as stored.
    """
    x_q, scale = quantize_block(x, row, rows, PER_TOKEN)
    store_quantized(x_q, scale, q_ptr, scale_ptr, bh, block, row, rows, nblocks, D, PER_TOKEN,
                    transposed_stride, scale_rows)
    return x_q, scale


def quantize_block(x, row, rows, PER_TOKEN: bool = False):
    """:func:`quantize_block_to`'s quantization alone: the INT8 tile and its
    scales (per token, 0 for the rows past ``rows``)."""
    if PER_TOKEN:
        x_q, scale = sl.quantize(x, sl.int8_per_token)
        # One select a row: a tail row need not be zeroed element by element.
        return x_q, sl.where(row_ids(row, x.shape[0]) < rows, scale, 0.0)
    return sl.quantize(x, sl.int8_per_block)


def store_quantized(x_q, scale, q_ptr, scale_ptr, bh, block, row, rows, nblocks, D: int,
                    PER_TOKEN: bool = False, transposed_stride=None, scale_rows=None) -> None:
    """:func:`quantize_block_to`'s stores alone: of :func:`quantize_block`'s
    tile and scales."""
    if PER_TOKEN:
        store_row_stat(scale_ptr, scale, bh, row, rows if scale_rows is None else scale_rows)
    else:
        store_block_scale(scale_ptr, scale, bh, block, nblocks)
    if transposed_stride is None:
        store_rows(q_ptr, x_q, bh, row, rows, D)
    else:
        store_transposed_rows(q_ptr, x_q, bh, row, rows, transposed_stride, D)


def key_group_count(BLOCK: int) -> int:
    """K's scale groups per block of BLOCK keys (:data:`K_SCALE_GROUPS`)."""
    return group_count(K_SCALE_GROUPS, BLOCK)


def quantize_key_groups(k, k_q, k_scale, k_group_scale, bh, block, row, rows, nblocks,
                        D: int) -> None:
    """The pre-pass's fine quantization of K: INT8 of the ``BLOCK x D`` tile
    ``k`` (smoothed keys, rows past ``rows`` already 0) with one scale per
    :data:`K_SCALE_GROUPS` group (the group's absmax / 127, 0 below the
    smallest normal f32), stored with the scales twice: per group, for the
    forward (slice ``bh`` of a (X, nblocks * groups) array, block ``block``'s
    groups in order), and per token, each its group's (slice ``bh`` of a
    (X, rows padded to 16) array, 0 past ``rows``), for the backward."""
    BLOCK = k.shape[0]
    groups = key_group_count(BLOCK)
    peaks = sl.max(sl.absmax(k, 1), 0, groups=K_SCALE_GROUPS)
    scale = peaks / 127.0
    scale = sl.where(scale < SMALLEST_NORMAL, 0.0, scale)
    store_row_stat(k_group_scale, scale, bh, block * groups, nblocks * groups)
    tokens = sl.broadcast(scale, (BLOCK, 1), groups=K_SCALE_GROUPS)
    # |K| <= its group's absmax = 127 * scale: no clamp needed.
    k_tile, _ = sl.quantize(k, sl.int8_per_token, scale=tokens, saturate=False)
    store_row_stat(k_scale, sl.where(row_ids(row, BLOCK) < rows, tokens, 0.0), bh, row,
                   padded_tokens(rows))
    store_rows(k_q, k_tile, bh, row, rows, D)


def load_key_group_scales(k_group_scale, bh, col, n_kv, BLOCK_N: int, KV_BLOCK: int,
                          whole: bool = False):
    """K's group scales (:func:`quantize_key_groups`, pre-pass blocks of
    KV_BLOCK keys) of the BLOCK_N keys at ``col`` (a multiple of BLOCK_N) as
    a ``1 x G`` row, in the order of :func:`key_groups`' groups (0 past the
    last block). ``whole``: the caller knows that every key of the block
    exists, and the view ends with the block (one bounds check for the
    tile, not one a scale)."""
    per_block = key_group_count(KV_BLOCK)
    count = per_block * max(1, BLOCK_N // KV_BLOCK)
    nblocks = cdiv(n_kv, KV_BLOCK)
    if whole and BLOCK_N >= KV_BLOCK:
        # A multiple of `count` as the compiler sees it, and so the end: one
        # bounds check for the tile (MemoryOpsToLLVM's wholeTileDims).
        first = (col // BLOCK_N) * count
        end = first + count
    else:
        first = (col // KV_BLOCK) * per_block
        end = nblocks * per_block
    return sl.load(slice_of(k_group_scale, bh, nblocks * per_block, 1), (1, count),
                   (0, first), (0, 1), (1, end))


def key_groups(BLOCK_N: int, KV_BLOCK: int) -> int:
    """The ``groups`` mask that splits a forward block of BLOCK_N keys into
    K's scale groups (pre-pass blocks of KV_BLOCK keys): the group bits and,
    where a forward block spans several pre-pass blocks, the bits that
    choose the block. Group g of :func:`load_key_group_scales`' row is
    ``pext(key, mask)``."""
    if BLOCK_N < 8 or BLOCK_N & (BLOCK_N - 1) or KV_BLOCK & (KV_BLOCK - 1):
        raise ValueError(f"K's scale groups need power-of-two blocks of at least 8 keys, "
                         f"got {BLOCK_N} and {KV_BLOCK}")
    return K_SCALE_GROUPS | ((BLOCK_N - 1) & ~(KV_BLOCK - 1))


def load_scale(ptr, bh, block, row, rows, BLOCK: int, PER_TOKEN: bool, end=None):
    """The scales of the tile :func:`quantize_block_to` wrote at ``row``: a
    ``BLOCK x 1`` column with PER_TOKEN (``end`` as :func:`load_row_stat`'s),
    else the block's ``1 x 1``."""
    if PER_TOKEN:
        return load_row_stat(ptr, bh, row, rows, BLOCK, end)
    return load_block_scale(ptr, bh, block, cdiv(rows, BLOCK))


def load_col_stat(ptr, bh, col, cols, BLOCK: int):
    """Entries ``col .. col + BLOCK`` of slice ``bh`` of an (X, cols) f32 array as
    a ``1 x BLOCK`` row (a per-token statistic laid along the key axis)."""
    return sl.load(slice_of(ptr, bh, cols, 1), (1, BLOCK), (0, col), (0, 1), (1, cols))


def row_ids(row, BLOCK: int):
    """``BLOCK x 1`` i32 tile of the absolute row indices ``row + i``."""
    return sl.iota((BLOCK, 1), 0) + row


def col_ids(col, BLOCK: int):
    """``1 x BLOCK`` i32 tile of the absolute column indices ``col + j``."""
    return sl.iota((1, BLOCK), 1) + col


def visible(row, col, n, n_kv, BLOCK_M: int, BLOCK_N: int, CAUSAL: bool,
            transposed: bool = False):
    """``BLOCK_M x BLOCK_N`` i1: query ``row+i`` exists, key ``col+j`` exists and,
    when causal, ``col+j <= row+i + (n_kv - n)``: aligned bottom-right, as
    FlashAttention, so the last query sees every key (causal needs
    N <= Nkv; with N == Nkv this is ``j <= i``). ``transposed`` gives the
    ``BLOCK_N x BLOCK_M`` mask of the backward's S^T orientation: element
    ``(j, i)`` for key ``col+j`` and query ``row+i``."""
    if transposed:
        shape = (BLOCK_N, BLOCK_M)
        keys = sl.broadcast(row_ids(col, BLOCK_N), shape)
        queries = sl.broadcast(col_ids(row, BLOCK_M), shape)
    else:
        shape = (BLOCK_M, BLOCK_N)
        queries = sl.broadcast(row_ids(row, BLOCK_M), shape)
        keys = sl.broadcast(col_ids(col, BLOCK_N), shape)
    mask = (queries < n) & (keys < n_kv)
    if CAUSAL:
        mask = mask & (keys <= queries + (n_kv - n))
    return mask


def key_bias(col, n_kv, BLOCK_N: int):
    """``1 x BLOCK_N`` f32: 0 for keys ``col+j < n_kv``, -inf past the end.

    Added to S it masks the keys a non-causal block must not see with one
    add per element (a compare and a select otherwise). Rows past the end of
    the queries need no mask: their Q rows load as 0, so their logits stay
    finite, and they are never stored.
    """
    return sl.where(col_ids(col, BLOCK_N) < n_kv, sl.zeros((1, BLOCK_N), sl.float32),
                    float("-inf"))


def _diagonal(n: int):
    return sl.iota((n, n), 0) == sl.iota((n, n), 1)


def column_to_row(x):
    """An ``n x 1`` tile as a ``1 x n`` tile (the language has no transpose:
    select the diagonal of its broadcast and reduce over rows, exactly)."""
    n = x.shape[0]
    return sl.sum(sl.where(_diagonal(n), sl.broadcast(x, (n, n)), 0.0), axis=0)


def smoothing_bias(q_mean, k_q, k_scale, PER_TOKEN: bool = False):
    """The Q-smoothing term ``q_mean . (s_K K^_j)^T`` as a ``1 x BLOCK_N`` row, in f32.

    It is added to every row of S (spec 3.2: a per-column bias, not
    softmax-invariant). Computed from the dequantized K tile already in
    registers, as a column (a row-wise reduction), then turned into a row.
    """
    k_deq = sl.dequantize(k_q, k_scale, sl.int8_per_token if PER_TOKEN else sl.int8_per_block)
    column = sl.sum(k_deq * q_mean, axis=1)
    return column_to_row(column)
