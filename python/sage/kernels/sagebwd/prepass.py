"""The forward's quantization: K mean, smoothing, Q scaling and INT8 of Q, K, V.

Spec sections 2, 3.1, 3.2 and 4.1 steps 1-2. Every quantization is
``sl.int8_per_block`` (scale absmax / 127, round to nearest even) over one
kernel tile: BLOCK_M rows of Q, BLOCK_N rows of K and V; with FINE_SCALES, Q
is ``sl.int8_per_token``, K has one scale per group of 16 keys of a block
(:data:`~sage.reference.sagebwd.K_SCALE_GROUPS`) and V per channel over all
its tokens
(docs/sagebwd.md, "Scale granularity"). Rows past the end of a sequence are
0 in every quantized tile, so they do not move the absmax.

K and V are quantized by their own launch, :func:`quantize_kv_kernel`, before
the forward: every query block reads all of them. A block of Q is read by
one forward program only, which reads and quantizes it itself
(:func:`load_q_block`, :func:`quantize_q_block`, :func:`store_q_block`), so
Q needs no launch of its own.
"""

from __future__ import annotations

import sage.language as sl
from sage.kernels.sagebwd.common import (SMALLEST_NORMAL, cdiv, head_base, load_strided_rows,
                                         program_head, quantize_block, quantize_block_to,
                                         quantize_key_groups, row_ids, scale_row_length,
                                         store_quantized, store_transposed_rows, store_vector)


#: Key tiles a program of quantize_kv_kernel loads per trip of its
#: statistics loop (all loaded before any is added: more loads in flight).
#: Measured on the statistics kernel this loop came from (one program per
#: head, H100, B4 H32 N4K): D64 0.059 ms with 2, 0.055 with 4; D128 0.097
#: either way.
STATS_TILES = 4
#: Programs per (batch, kv head) of quantize_kv_kernel: one thread-block
#: cluster, resident together (:func:`kv_cluster`). Measured on the H100
#: (B4 H32, 2, 4 and 8 programs, the kernel alone:
#: bench/results/2026-11-27-h100-prepass-layouts.md): 2 is the fastest at
#: N <= 2K (8 leaves a head's few blocks over short waves of clusters) and
#: at D=64; at D=128 from 4K keys 8 is 8% faster at 4K, 4% at 8K and 2% at
#: 16K (a program's share of K and V is then small enough that the
#: resident programs' shares stay in L2 for the quantization's second read).
KV_CLUSTER = 2
#: The cluster at D=128 from :data:`LONG_KEYS` keys.
KV_CLUSTER_LONG = 8
LONG_KEYS = 4096


def kv_cluster(d: int, n_kv: int) -> int:
    """quantize_kv_kernel's programs per (batch, kv head) for head dim ``d``
    and ``n_kv`` keys (see :data:`KV_CLUSTER`)."""
    return KV_CLUSTER_LONG if d == 128 and n_kv >= LONG_KEYS else KV_CLUSTER


def load_q_block(q, qk_scale, N, stride_qb, stride_qh, stride_qn, batch, head, block,
                 D: int, BLOCK_M: int):
    """One BLOCK_M-row block of ``c * Q`` (c = ``qk_scale`` = sm_scale * log2 e)
    in f32, 0 past N: what :func:`quantize_q_block` quantizes. The forward
    kernel reads and quantizes its own query block: Q is read once, and no
    launch of its own precedes the forward.

    q: (B, H, N, D) f16/bf16 with strides ``stride_q*``."""
    q_base = head_base(q, batch, head, stride_qb, stride_qh)
    return load_strided_rows(q_base, block * BLOCK_M, N, stride_qn, BLOCK_M, D).to(
        sl.float32) * qk_scale


def quantize_q_block(x, N, block, BLOCK_M: int, SMOOTH_Q: bool, FINE_SCALES: bool):
    """:func:`load_q_block`'s ``x`` to INT8 (per token with FINE_SCALES, else
    per block), without storing it (:func:`store_q_block` does).

    Returns the INT8 tile, its scales (a BLOCK_M x 1 column per token, else
    1 x 1; 0 past N) and, with SMOOTH_Q, the 1 x D mean of ``x`` over its
    valid rows (else None), subtracted before quantizing: the forward adds
    ``q_mean . K_j^T`` back and the backward adds the dK bias term.
    """
    row = block * BLOCK_M
    mean = None
    if SMOOTH_Q:
        count = sl.minimum(N - row, BLOCK_M).to(sl.float32)
        mean = sl.sum(x, axis=0) / count
        x = sl.where(row_ids(row, BLOCK_M) < N, x - mean, 0.0)
    q_tile, scale = quantize_block(x, row, N, FINE_SCALES)
    return q_tile, scale, mean


def store_q_block(q_q, q_scale, q_mean, q_tile, scale, mean, N, H, batch, head, block,
                  D: int, BLOCK_M: int, SMOOTH_Q: bool, FINE_SCALES: bool) -> None:
    """:func:`quantize_q_block`'s results stored for the backward.

    q_q: (B*H, N, D) i8; q_scale: (B*H, ceil(N/BLOCK_M)) f32, or (B*H, N
    padded to 16) per token with FINE_SCALES (0 scales past N); q_mean:
    (B*H, ceil(N/BLOCK_M), D) f32, written only with SMOOTH_Q.
    """
    bh = batch * H + head
    nblocks = cdiv(N, BLOCK_M)
    if SMOOTH_Q:
        store_vector(q_mean, mean, bh * nblocks + block, D)
    store_quantized(q_tile, scale, q_q, q_scale, bh, block, block * BLOCK_M, N, nblocks, D,
                    FINE_SCALES, scale_rows=scale_row_length(N, BLOCK_M, FINE_SCALES))


def quantize_kv_kernel(k, v, k_mean, k_q, k_scale, k_group_scale, v_qt, v_scale, kv_partials,
                       N_KV, H_KV,
                       stride_kb, stride_kh, stride_kn, stride_vb, stride_vh, stride_vn,
                       stride_vtd, D: sl.constexpr, BLOCK_N: sl.constexpr,
                       SMOOTH_K: sl.constexpr, CLUSTER: sl.constexpr,
                       FINE_SCALES: sl.constexpr = False):
    """K (minus its mean over all the tokens when SMOOTH_K) and V to INT8, for
    one (batch, kv head), by a thread-block cluster of CLUSTER programs
    (launched with ``num_ctas=CLUSTER``, :func:`kv_cluster`) that reads K
    and V from memory once.

    Program r of the cluster owns the BLOCK_N-row blocks r, r + CLUSTER, ...
    With SMOOTH_K or FINE_SCALES it first takes what the quantization needs
    from all Nkv tokens, in f32: its blocks' sums of K (the mean, spec 3.1)
    and absolute maxima of V per channel (V's scales, absmax / 127, 0 below
    the smallest normal f32, as a quantizer's own), element by element in
    each thread's registers, the tile's rows reduced once after the loop.
    The cluster's programs write their partials to ``kv_partials``, meet at
    the cluster barrier, and each reduces all of them (the same values in
    every program, which all write ``k_mean`` and ``v_scale``). Then each
    quantizes its blocks: the second read of its tiles finds some of them
    in L2.

    k, v: (B, Hkv, Nkv, D) f16/bf16 with strides ``stride_k*``, ``stride_v*``;
    k_mean: (B*Hkv, D) f32 (written only with SMOOTH_K); k_q: (B*Hkv, Nkv,
    D) i8; v_qt: (B*Hkv, D, stride_vtd) i8, V^ transposed, its tokens in
    sigma16 order inside every 16 (the forward contracts V over keys, so its
    tensor-core operand is key-contiguous: copied straight to shared memory,
    without a transpose in the kernel; and in the order in which P^,
    quantized in the accumulator's registers, feeds the tensor cores:
    ``rhs_sigma16``); every padded token slot is written (0 past Nkv);
    k_scale, v_scale: (B*Hkv, ceil(Nkv/BLOCK_N)) f32; with FINE_SCALES K
    has one scale per group of keys (:data:`~sage.reference.sagebwd.K_SCALE_GROUPS`,
    :func:`~sage.kernels.sagebwd.common.quantize_key_groups`), stored per
    group in k_group_scale (B*Hkv, ceil(Nkv/BLOCK_N) * 4), for the forward,
    and per token in k_scale (B*Hkv, Nkv padded to 16; 0 scales past Nkv),
    for the backward; v_scale is then (B*Hkv, D), V's
    per-channel scales over all the tokens (V is contracted over keys, so
    its channels are O's columns and the forward applies them once, to O);
    kv_partials: (B*Hkv*2*CLUSTER, D) f32 scratch.
    Grid: (CLUSTER, Hkv, B).
    """
    # The forward, launched next, may start now: it quantizes its Q block
    # while this kernel runs, then waits for it (sl.grid_dependency_wait).
    sl.launch_dependents()
    rank = sl.program_id(0)
    batch, head, bh = program_head(H_KV)
    nblocks = cdiv(N_KV, BLOCK_N)
    k_base = head_base(k, batch, head, stride_kb, stride_kh)
    v_base = head_base(v, batch, head, stride_vb, stride_vh)

    def tiles(row):
        """K's and V's tiles at ``row`` (0 past Nkv). V is read in sigma16
        order and stored as it is, over every padded slot (the block absmax
        does not depend on the order)."""
        return (load_strided_rows(k_base, row, N_KV, stride_kn, BLOCK_N, D),
                sl.load(v_base, (BLOCK_N, D), (row, 0), (stride_vn, 1), (N_KV, D),
                        sigma16_rows=True))
    step = CLUSTER * BLOCK_N
    stats = SMOOTH_K or FINE_SCALES
    if stats:
        sums = sl.zeros((BLOCK_N, D), sl.float32)
        peaks = sl.zeros((BLOCK_N, D), sl.float32)
        # STATS_TILES of the program's blocks a trip (blocks past Nkv load as 0).
        for start in sl.range(rank * BLOCK_N, N_KV, STATS_TILES * step):
            at = [start + i * step for i in range(STATS_TILES)]
            k_tiles = [load_strided_rows(k_base, r, N_KV, stride_kn, BLOCK_N, D)
                       for r in at] if SMOOTH_K else []
            v_tiles = [load_strided_rows(v_base, r, N_KV, stride_vn, BLOCK_N, D)
                       for r in at] if FINE_SCALES else []
            for tile in k_tiles:
                sums = sums + tile.to(sl.float32)
            for tile in v_tiles:
                peaks = sl.maximum(peaks, sl.abs(tile.to(sl.float32)))
    # The quantization keeps two blocks' tiles in flight while it works on a
    # third: a program walks its blocks one after another, and only loads in
    # flight hide the memory's latency (one block ahead: 3% slower at D128;
    # two programs an SM instead: 6% slower, the second read then misses L2
    # more; bench/results/2026-11-26-h100-prepass-one-pass.md and
    # -prepass-q-in-forward.md). Its loop takes three blocks a trip, each
    # with its own registers, so that a tile is loaded into the registers it
    # is used from: a loop-carried rotation (next <- later <- load) makes
    # ptxas copy each tile just after its loads issue, and the copy waits for
    # them (bench/results/2026-11-27-h100-prepass-unrolled.md). Blocks past
    # the program's last are before row 0: their loads and stores are masked
    # off (at most two a program).
    # The first three are loaded before the statistics are reduced and the
    # cluster meets, which they do not depend on: their latency hides
    # behind that work and the wait.
    # It walks the blocks last to first: the statistics loop read the last
    # ones most recently, so the L2 still holds some of them (first to last,
    # each read would evict a block that a later one needs).
    count = cdiv(sl.maximum(N_KV - rank * BLOCK_N, 0), step)
    last = rank * BLOCK_N + (count - 1) * step
    k0, v0 = tiles(last)
    k1, v1 = tiles(last - step)
    k2, v2 = tiles(last - 2 * step)
    mean = None
    scales = None
    if stats:
        # Rows bh*2*CLUSTER + rank (sums) and + CLUSTER (peaks).
        first = bh * (2 * CLUSTER)
        store_vector(kv_partials, sl.sum(sums, axis=0), first + rank, D)
        store_vector(kv_partials, sl.max(peaks, axis=0), first + CLUSTER + rank, D)
        sl.cluster_barrier()

        def partials(top):
            """The cluster's CLUSTER partial rows from row ``top``."""
            return sl.load(kv_partials, (CLUSTER, D), (top, 0), (D, 1), (top + CLUSTER, D))
        if SMOOTH_K:
            mean = sl.sum(partials(first), axis=0) / N_KV.to(sl.float32)
            store_vector(k_mean, mean, bh, D)
        if FINE_SCALES:
            scales = sl.max(partials(first + CLUSTER), axis=0) / 127.0
            scales = sl.where(scales < SMALLEST_NORMAL, 0.0, scales)
            store_vector(v_scale, scales, bh, D)

    def quantize(row, k_tile, vt):
        """Block ``row``'s K and V tiles to INT8, stored with their scales."""
        block = row // BLOCK_N
        kt = k_tile.to(sl.float32)
        if SMOOTH_K:
            # A tail row (loaded as 0) would become -mean: it must stay 0, or
            # it would set its block's (or group's) absmax.
            kt = sl.where(row_ids(row, BLOCK_N) < N_KV, kt - mean, 0.0)
        if FINE_SCALES:
            quantize_key_groups(kt, k_q, k_scale, k_group_scale, bh, block, row, N_KV,
                                nblocks, D)
        else:
            quantize_block_to(kt, k_q, k_scale, bh, block, row, N_KV, nblocks, D)
        if FINE_SCALES:
            # |V| <= its channel's absmax = 127 * scale: no clamp needed, and
            # the scale's multiply fuses into the rounding (sl.quantize).
            v_q, _ = sl.quantize(vt, sl.int8_per_channel, scale=scales, saturate=False)
            store_transposed_rows(v_qt, v_q, bh, row, stride_vtd, stride_vtd, D)
        else:
            quantize_block_to(vt, v_qt, v_scale, bh, block, row, stride_vtd, nblocks, D,
                              transposed_stride=stride_vtd)

    for j in sl.range(0, cdiv(count, 3)):
        top = last - j * (3 * step)
        quantize(top, k0, v0)
        k0, v0 = tiles(top - 3 * step)
        quantize(top - step, k1, v1)
        k1, v1 = tiles(top - 4 * step)
        quantize(top - 2 * step, k2, v2)
        k2, v2 = tiles(top - 5 * step)
