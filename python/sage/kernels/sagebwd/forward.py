"""The SageBwd forward (spec 4.1 step 3-4): INT8 Q K^T, exp2 online softmax,
per-token INT8 P~, INT8 P~ V, then O and the LSE.

Each program quantizes its own block of Q before its key loop (spec 4.1
step 1 for Q, :func:`~sage.kernels.sagebwd.prepass.quantize_q_block`,
stored for the backward after the loop): Q is read once, here, and K and V
come quantized from the pre-pass launch.

One program owns BLOCK_M query rows of one (batch, query head) and walks the
key blocks of its kv head, in the FlashAttention forward's structure
(:mod:`sage.kernels.flash.kernels`):

* every INT8 operand of the key loop is read through a view whose batch and
  head are leading dimensions (K^ as (B, Hkv, rows, D), V^T as (B, Hkv, D,
  padded keys)), so the compiler copies its tiles by TMA with maps encoded
  on the host, pipelined ``STAGES`` deep; with ``WARP_SPECIALIZE`` a producer
  warpgroup issues the K^ and V^T copies and the consumer warpgroups (64
  query rows each) meet it at mbarriers only, and with ``PING_PONG`` they
  take turns issuing their matmuls;
* with ``SKEWED`` the loop is skewed by one key block: a trip issues
  S(j+1) = Q^ K^(j+1)^T, then P^(j) V^(j), and the softmax of block j+1
  runs while the second is on the tensor cores (FlashAttention-3's
  intra-warpgroup overlap); without, a trip runs in dependency order (fewer
  registers: no S beside an in-flight P^ V^). P^ feeds the tensor cores
  from the registers it was quantized in (V^T's keys are in sigma16 order);
* O is written by the copy engine with ``TMA_STORE``.

Grid: (ceil(N / BLOCK_M), H, B); causal programs take the longest query
blocks first. With ``PERSISTENT``, (P,): each program walks every P-th tile
in that order.
"""

from __future__ import annotations

from math import log2

import sage.language as sl
from sage.kernels.sagebwd.common import (SMALLEST_NORMAL, cdiv, col_ids, key_bias, key_groups,
                                         kv_head_of, load_block_scale, load_key_group_scales,
                                         load_scale, load_vector, padded_tokens, row_ids,
                                         smoothing_bias)
from sage.kernels.sagebwd.prepass import load_q_block, quantize_q_block, store_q_block
from sage.reference.sagebwd import (FACTOR_MASK, GRID, K_SCALE_GROUPS, SCORE_BIAS,
                                    SCORE_BIAS_BITS, UNIT_RANGE)

#: The f32 exponent field (bits 23-30).
EXPONENT_BITS = 0x7F800000
#: The bits of an accumulator column that choose the lane of a quad holding
#: it (K's scale groups are these columns, :data:`K_SCALE_GROUPS`): a row's
#: sums over each lane's own columns need no shuffle. LANES: how many.
LANE_COLUMNS = K_SCALE_GROUPS
LANES = 1 << bin(LANE_COLUMNS).count("1")


def sagebwd_forward(q, q_q, q_scale, q_mean, k_q, k_scale, k_group_scale, v_qt, v_scale, o, lse,
                    qk_scale,
                    N, N_KV, BATCH, H, H_KV, stride_qb, stride_qh, stride_qn,
                    stride_ob, stride_oh, stride_on, stride_vtd,
                    D: sl.constexpr,
                    BLOCK_M: sl.constexpr, BLOCK_N: sl.constexpr, CAUSAL: sl.constexpr,
                    SMOOTH_Q: sl.constexpr, KV_BLOCK: sl.constexpr,
                    FINE_SCALES: sl.constexpr = False,
                    GROUP: sl.constexpr = 1, STAGES: sl.constexpr = 2,
                    WARP_SPECIALIZE: sl.constexpr = False, PING_PONG: sl.constexpr = False,
                    TMA_STORE: sl.constexpr = False, SKEWED: sl.constexpr = True,
                    PERSISTENT: sl.constexpr = False, BIASED_SCORES: sl.constexpr = False):
    """O and LSE of one block of BLOCK_M query rows.

    q (B, H, N, D) f16/bf16 with strides ``stride_q*``, quantized here into
    q_q (B*H, N, D) i8, q_scale and (SMOOTH_Q) q_mean for the backward
    (:func:`~sage.kernels.sagebwd.prepass.quantize_q_block`: c*Q, c =
    ``qk_scale`` = sm_scale * log2 e); k_q (B*Hkv, Nkv, D) i8 (K
    smoothed); v_qt (B*Hkv, D, stride_vtd) i8, V^ transposed
    (key-contiguous: K-major for the tensor cores), its tokens in sigma16
    order; *_scale: one f32 per block (with FINE_SCALES Q one per token,
    rows padded to 16 tokens, K one per group of keys of the pre-pass's
    blocks of KV_BLOCK, in k_group_scale (B*Hkv, ceil(Nkv/KV_BLOCK) * 4) and,
    per token, in k_scale, and V one per channel over all its tokens: v_scale
    (B*Hkv, D); :func:`~sage.kernels.sagebwd.common.quantize_key_groups`).
    Without Q-smoothing, K's group scales are applied once per row and group:
    the softmax takes the row max of T per group, then scales it, and each
    exponent's FMA multiplies by the row's and group's product
    (:data:`~sage.reference.sagebwd.K_SCALE_GROUPS`: a thread's columns of
    the accumulator are one group). P~ is quantized per token to [0,
    127], or with FINE_SCALES to unsigned bytes in [0, 255]. o (B, H, N, D)
    with strides ``stride_o*``: f16, bf16 or f32 (the element type of the
    pointer); lse (B, H, N) f32 = log2 of the row's sum of 2^S (log2
    units, smoothed-logit domain).
    BIASED_SCORES (with K_GROUPS) takes S from a biased accumulator, its
    factors truncated and its units snapped to a grid (docs/sagebwd.md,
    "Scores from a biased accumulator"; the emulation follows).
    CAUSAL (needs N <= Nkv; aligned bottom-right) stops at the diagonal
    block. Only the key blocks that need it are masked (the key tail, the
    causal diagonal, and, skewed, block 0, which opens the loop): the loop
    is split in two, the first part mask-free.
    """
    blocks = cdiv(N, BLOCK_M)
    # K's group scales go to the softmax (its per-token scales, each its
    # group's, serve Q-smoothing's bias, which needs K dequantized).
    K_GROUPS = key_groups(BLOCK_N, KV_BLOCK) if FINE_SCALES and not SMOOTH_Q else 0
    # S from the bits of SCORE_BIAS (K_GROUPS only: the softmax folds the bias
    # into its per-group factors).
    BIASED = bool(K_GROUPS) and BIASED_SCORES

    def tile(block, head, batch):
        """O and LSE of query block ``block`` of (``head``, ``batch``)."""
        kv_head = kv_head_of(head, GROUP)
        kv = batch * H_KV + kv_head
        row = block * BLOCK_M
        nkv_blocks = cdiv(N_KV, BLOCK_N)

        def tokens(x, h, heads, at, count, BLOCK):
            """The ``BLOCK x D`` INT8 tile at token ``at`` of (``batch``, ``h``) of
            a contiguous (B * heads, count, D) tensor, seen as (B, heads, count,
            D); 0 past ``count``."""
            return sl.load(x, (BLOCK, D), (batch, h, at, 0),
                           (heads.to(sl.int64) * count * D, count * D, D, 1),
                           (BATCH, heads, count, D))

        x = load_q_block(q, qk_scale, N, stride_qb, stride_qh, stride_qn, batch, head, block,
                         D, BLOCK_M)
        # The K/V pre-pass, launched just before, may still be running (this
        # kernel starts early: programmatic dependent launch): Q's block is
        # read meanwhile; K^, V^T and their scales are read only after it has
        # finished. The key loop's first copies are issued right after the
        # wait (sagegpu-pipeline: nothing before the loop writes global
        # memory), so their latency passes under Q's quantization; Q^ is
        # stored for the backward after the loop.
        sl.grid_dependency_wait()
        qt, sq, qbar = quantize_q_block(x, N, block, BLOCK_M, SMOOTH_Q, FINE_SCALES)
        one = sl.full((1, 1), 1.0, sl.float32)
        # The accumulator S starts from (BIASED): the bits of SCORE_BIAS.
        biased = sl.full((BLOCK_M, BLOCK_N), SCORE_BIAS_BITS, sl.int32) if BIASED else None
        # P~'s quantization scale: 1, as the exponent already scales it to [0, Q].
        ones = sl.full((BLOCK_M, 1), 1.0, sl.float32)
        # S = row_scale * T: Q's scale, a positive factor per row, is applied in
        # the softmax (the row max of T scaled once per row, each exponent one
        # FMA) instead of once per element. A zero scale (a zero Q row, the
        # rows past N) becomes the smallest normal: its logits stay 0 in effect
        # and a masked -inf stays -inf (0 * -inf would be NaN). Q-smoothing adds
        # a per-column term to S: there T is S itself.
        row_scale = one if SMOOTH_Q else sl.maximum(sq, SMALLEST_NORMAL)

        def scores(col, MASKED: bool):
            """T of the key block at ``col`` (in flight until used): with
            K_GROUPS, Q^ K^^T without K's scales (the softmax applies them), as
            the int32 accumulator; BIASED, SCORE_BIAS + Q^ K^^T: the tensor
            cores accumulate onto the bits of SCORE_BIAS, and the accumulator
            read as f32 holds that sum exactly (no conversion a score). Else
            S in f32."""
            kt = tokens(k_q, kv_head, H_KV, col, N_KV, BLOCK_N)
            if K_GROUPS:
                return sl.matmul(qt, kt, contract=(1, 1), acc=biased if BIASED else None)
            # The K scales' rows are padded to 16 tokens: whole pairs load as one
            # access. Every key of an unmasked block exists: there the view ends
            # with the block, so one bounds check serves the whole tile.
            sk = load_scale(k_scale, kv, col // BLOCK_N, col, padded_tokens(N_KV), BLOCK_N,
                            FINE_SCALES, end=None if MASKED else col + BLOCK_N)
            if SMOOTH_Q:
                return (sl.qmatmul(qt, sq, kt, sk, contract=(1, 1))
                        + smoothing_bias(qbar, kt, sk, FINE_SCALES))
            return sl.qmatmul(qt, one, kt, sk, contract=(1, 1))

        def probabilities(t, col, m, unit, l, MASKED: bool):
            """The online softmax of one key block (exp2; S = row_scale * T) and
            P~ quantized per token, in the block's units: P^, the new running
            max, units and row sum, and the factor that rescales O and l to the
            new units (docs/sagebwd.md, "Units").

            P~ per token has scale p_max / Q (Q = 255 unsigned, else 127), p_max
            = 2^(block max - running max): P^ = rint(f16(Q * 2^(S - block max)))
            depends on the block's own max only. O and l are kept in units of
            2^unit (unit = the block's max, floored UNIT_RANGE below the running
            max), so P^ V^ adds to O unscaled (one FMA per element: no multiply
            by P^'s scale, no division per row), and the factor between two
            blocks' units is 2^(unit_old - unit_new) <= 2^UNIT_RANGE."""
            # K_GROUPS: t is the int32 accumulator. Its group maxima are taken
            # as integers where no mask intervenes: int32 maxima fuse three at a
            # time (VIMNMX3; f32 maxima go two at a time), and T, or BIASED the
            # bits of SCORE_BIAS + T (floats > 0, or -inf where masked), order
            # as the values they stand for.
            ints = t
            if BIASED:
                t = sl.bitcast(t, sl.float32)
            elif K_GROUPS:
                t = t.to(sl.float32)
            if MASKED and CAUSAL:
                # Key col+j is visible to query row+i when col+j <= row+i + (N_KV - N):
                # a 1 x BLOCK_N row against a BLOCK_M x 1 column, one compare and
                # one select per element. For a query that exists (row+i < N)
                # this also keeps every key < N_KV; a query past N may see keys
                # past N_KV, whose K rows and scales load as 0 (finite logits),
                # and its row is never stored.
                t = sl.where(col_ids(col, BLOCK_N) <= row_ids(row, BLOCK_M) + (N_KV - N), t,
                             float("-inf"))
            elif MASKED:
                t = t + key_bias(col, N_KV, BLOCK_N)
            if K_GROUPS:
                # S = T * (row scale * group scale), both >= 0: the max of a
                # group's T scaled is the scaled max. Where a mask may put -inf
                # in t, a product below the smallest normal is raised to it, so
                # that -inf stays -inf (0 * -inf would be NaN); where none can,
                # the product multiplies finite T as it is (it is below the
                # smallest normal only for a zero row of Q^ or group of K^,
                # whose T is 0). BIASED: t is SCORE_BIAS + T
                # (the group max less SCORE_BIAS is T's, exactly), and the
                # factor keeps FACTOR_BITS significant bits, so that
                # SCORE_BIAS * factor is exact.
                group_scales = load_key_group_scales(k_group_scale, kv, col, N_KV, BLOCK_N,
                                                     KV_BLOCK, whole=not MASKED)
                factor = row_scale * group_scales
                if MASKED:
                    factor = sl.maximum(factor, SMALLEST_NORMAL)
                if BIASED:
                    group_max = sl.bitcast(sl.max(sl.bitcast(t, sl.int32), 1, groups=K_GROUPS),
                                           sl.float32)
                elif MASKED:
                    group_max = sl.max(t, 1, groups=K_GROUPS)
                else:
                    group_max = sl.max(ints, 1, groups=K_GROUPS).to(sl.float32)
                if BIASED:
                    factor = sl.bitcast(sl.bitcast(factor, sl.int32) & FACTOR_MASK,
                                        sl.float32)
                    group_max = group_max - SCORE_BIAS
                block_max = sl.max(group_max * factor, 1)
            else:
                block_max = sl.max(t, 1) * row_scale
                factor = row_scale
            new_m = sl.maximum(m, block_max)
            new_unit = sl.maximum(block_max, new_m - UNIT_RANGE)
            if MASKED:
                # A row with no key yet (all -inf) keeps units 2^0: exp2 gives 0,
                # not NaN. (A mask-free block gives every row a finite max.)
                new_unit = sl.where(new_m == float("-inf"), 0.0, new_unit)
            # Q * 2^(S - unit) <= Q: it rounds into [0, Q], no clamp, and the
            # scale folds into the exponent's constant. With FINE_SCALES P~ >= 0
            # takes unsigned bytes (Q = 255, twice the resolution;
            # docs/sagebwd.md), else the papers' [0, 127].
            scheme = sl.uint8_per_token if FINE_SCALES else sl.int8_per_token
            constant = log2(scheme.qmax) - new_unit
            if BIASED:
                # The exponent's constant log2(Q) - unit rounded down onto the
                # grid 2^-GRID of the power of two of the row's largest
                # SCORE_BIAS * factor (the unit rises by what it lost): then
                # constant - SCORE_BIAS * factor is exact for every group, and
                # the FMA of SCORE_BIAS + T rounds as the FMA of T would
                # (docs/sagebwd.md, "Scores from a biased accumulator").
                # The row's largest factor, from the block's largest group
                # scale (once a trip, not per row): rounding, the raise and
                # the truncation are monotonic, so this is the largest of
                # the row's factors, bit for bit.
                largest = sl.maximum(row_scale * sl.max(group_scales, 1), SMALLEST_NORMAL)
                largest = sl.bitcast(sl.bitcast(largest, sl.int32) & FACTOR_MASK, sl.float32)
                top = sl.bitcast(largest * SCORE_BIAS, sl.int32) & EXPONENT_BITS
                grid = top - (GRID << 23)
                constant = sl.floor(constant * sl.bitcast((254 << 23) - grid, sl.float32)) \
                    * sl.bitcast(grid, sl.float32)
                new_unit = log2(scheme.qmax) - constant
                constant = sl.broadcast(sl.fma(factor, -SCORE_BIAS, constant),
                                        (BLOCK_M, BLOCK_N), groups=K_GROUPS)
            if K_GROUPS:
                factor = sl.broadcast(factor, (BLOCK_M, BLOCK_N), groups=K_GROUPS)
            shift = sl.exp2(unit - new_unit)
            p = sl.exp2(sl.fma(t, factor, constant))
            # Rounded to f16 first: pairs of f16 round to bytes on the FMA
            # pipe (docs/sagebwd.md, "P~ through f16").
            p_q, _ = sl.quantize(p.to(sl.float16), scheme, scale=ones, saturate=False)
            # l sums the bytes P^ (exact; docs/sagebwd.md, "The row sum of
            # the bytes"): four at a time, from the words P^ V^ reads, each
            # lane of a quad over its own columns (LANE_COLUMNS: no shuffle a
            # trip; the lanes' sums meet once, after the loop).
            l_block = sl.sum(p_q.to(sl.int32), 1, groups=LANE_COLUMNS).to(sl.float32)
            return p_q, new_m, new_unit, shift * l + l_block, shift

        def values(p_q, col):
            """P^ V^ over the key block at ``col``, in the block's units (with
            block scales times V^'s block scale), in flight until used. P^ is
            the A operand from the registers the softmax left it in (V^T's keys
            are in sigma16 order). Without an accumulator operand the product is
            waited for where it is first used. V's fine scales, one per channel
            over all the keys, are applied to O once, after the loop."""
            vt = sl.load(v_qt, (D, BLOCK_N), (batch, kv_head, 0, col),
                         (H_KV.to(sl.int64) * D * stride_vtd, D * stride_vtd, stride_vtd, 1),
                         (BATCH, H_KV, D, stride_vtd))
            sv = one if FINE_SCALES else load_block_scale(v_scale, kv, col // BLOCK_N, nkv_blocks)
            return sl.qmatmul(p_q, one, vt, sv, contract=(1, 1), rhs_sigma16=True)

        def trip(col, p_q, m, unit, l, shift, acc, MASKED: bool):
            """One trip of the skewed loop: S of the block at ``col``, then P^ V^
            of the block before, then the softmax of ``col``'s block (which waits
            for the first matmul only), then O moved to the block before's units
            and P^ V^ added (one FMA per element)."""
            s = scores(col, MASKED)
            pv = values(p_q, col - BLOCK_N)
            p_q, m, unit, l, next_shift = probabilities(s, col, m, unit, l, MASKED)
            return p_q, m, unit, l, next_shift, sl.fma(acc, shift, pv)

        def in_order(first, last, m, unit, l, acc, MASKED: bool):
            """The key blocks from ``first`` to ``last``, each in dependency
            order: S, the softmax, P^ V^ added to O."""
            for col in sl.range(first, last, BLOCK_N, num_stages=STAGES,
                                warp_specialize=WARP_SPECIALIZE, ping_pong=PING_PONG):
                p_q, m, unit, l, shift = probabilities(scores(col, MASKED), col, m, unit, l, MASKED)
                acc = sl.fma(acc, shift, values(p_q, col))
            return m, unit, l, acc

        # Key blocks before `unmasked` need no mask: every key exists and, when
        # causal, every query of the block sees every key. The rest (the key
        # tail, the causal diagonal) are masked. The skewed loop is opened by
        # block 0, masked (the mask is exact for any block, and Nkv >= 1 makes
        # it exist), and closed by the last P^ V^.
        stop = N_KV
        unmasked = (N_KV // BLOCK_N) * BLOCK_N
        if CAUSAL:
            # Bottom-right aligned: query row + i sees keys up to row + i + (N_KV - N).
            stop = sl.minimum(row + BLOCK_M + (N_KV - N), N_KV)
            unmasked = sl.minimum(((row + (N_KV - N) + 1) // BLOCK_N) * BLOCK_N, unmasked)
        # The row statistics: running max, units (log2), row sum in those units.
        m = sl.full((BLOCK_M, 1), float("-inf"), sl.float32)
        unit = sl.zeros((BLOCK_M, 1), sl.float32)
        l = sl.zeros((BLOCK_M, LANES), sl.float32)
        acc = sl.zeros((BLOCK_M, D), sl.float32)
        if SKEWED:
            # O starts at 0 (whatever factor, the first block's, multiplies it).
            p_q, m, unit, l, shift = probabilities(scores(0, True), 0, m, unit, l, True)
            for col in sl.range(BLOCK_N, unmasked, BLOCK_N, num_stages=STAGES,
                                warp_specialize=WARP_SPECIALIZE, ping_pong=PING_PONG):
                p_q, m, unit, l, shift, acc = trip(col, p_q, m, unit, l, shift, acc, False)
            for masked_col in sl.range(sl.maximum(unmasked, BLOCK_N), stop, BLOCK_N,
                                       num_stages=STAGES, warp_specialize=WARP_SPECIALIZE,
                                       ping_pong=PING_PONG):
                p_q, m, unit, l, shift, acc = trip(masked_col, p_q, m, unit, l, shift, acc,
                                                   True)
            acc = sl.fma(acc, shift, values(p_q, ((stop - 1) // BLOCK_N) * BLOCK_N))
        else:
            # In dependency order: fewer registers (no S beside an in-flight
            # P^ V^), the overlap left to the other programs on the SM.
            m, unit, l, acc = in_order(0, unmasked, m, unit, l, acc, False)
            m, unit, l, acc = in_order(unmasked, stop, m, unit, l, acc, True)
        store_q_block(q_q, q_scale, q_mean, qt, sq, qbar, N, H, batch, head, block, D, BLOCK_M,
                      SMOOTH_Q, FINE_SCALES)
        l = sl.sum(l, 1)  # the lanes' sums
        # O and l share the units, so O = acc / l; P^ carried a factor Q that l
        # carries too (LSE takes it out). One division per row, a multiply per
        # element (a division per element is a reciprocal, its checks and a
        # slow-path call each).
        if FINE_SCALES:
            acc = acc * load_vector(v_scale, kv, D)
        sl.store(o, (acc * (1.0 / l)).to(o.dtype.element), (batch, head, row, 0),
                 (stride_ob, stride_oh, stride_on, 1), (BATCH, H, N, D), tma=TMA_STORE)
        # LSE is (B, H, N) contiguous: strides in i64.
        qmax = (sl.uint8_per_token if FINE_SCALES else sl.int8_per_token).qmax
        sl.store(lse, unit + sl.log2(l) - log2(qmax), (batch, head, row, 0),
                 (H.to(sl.int64) * N, N, 1, 0), (BATCH, H, N, 1))

    if not SMOOTH_Q:
        # q_mean is then a one-element stand-in, yet an output of the sage::
        # op: the first program writes it (0), so that it is deterministic
        # without a fill launch of its own.
        first = sl.program_id(0) + sl.program_id(1) + sl.program_id(2)
        sl.store(q_mean, sl.zeros((1, 1), sl.float32), (first, 0), (0, 1), (1, 1))
    if PERSISTENT:
        # A program per resident slot walks the tiles, P apart (P programs),
        # in the grid's launch order below: a head's query blocks together
        # (the programs running at once share K and V in L2; block-major, 128
        # heads at once missed it: 1.4-1.6x slower on the H100), causal
        # from the last block, whose rows see the most keys.
        tiles = blocks * H * BATCH
        for t in sl.range(sl.program_id(0), tiles, sl.num_programs(0)):
            block = t % blocks
            if CAUSAL:
                block = blocks - 1 - block
            hb = t // blocks
            tile(block, hb % H, hb // H)
    elif CAUSAL:
        # The last query blocks see the most keys: start them first, so the
        # short programs fill the last wave instead of the long ones.
        tile(blocks - 1 - sl.program_id(0), sl.program_id(1), sl.program_id(2))
    else:
        tile(sl.program_id(0), sl.program_id(1), sl.program_id(2))
