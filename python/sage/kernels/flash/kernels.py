"""FlashAttention forward in 16 bits (f16 or bf16), written in the sage language.

One program owns ``BLOCK_M`` query rows of one (batch, query head): it loads
its Q tile once, then walks the key blocks of its kv head with an online
softmax in base 2, the logits and P·V accumulated in f32 by the tensor cores
(``sl.matmul``, the O accumulator the PV matmul's own ``acc``), and stores
O (and, with ``STORE_LSE``, the row log-sum-exp).

Memory (every count in elements):

* ``q``, ``o``: (B, H, N, D) *strided* token tensors: element (b, h, i, d) at
  ``b * stride_*b + h * stride_*h + i * stride_*n + d`` (unit last stride;
  torch SDPA's (B, H, N, D) contiguous layout, a (B, N, H, D) tensor seen
  through ``transpose(1, 2)``, and any other strides with a unit last one);
* ``k``, ``v``: (B, Hkv, Nkv, D), strided the same way; H is a multiple of
  Hkv (GQA/MQA: query head h reads kv head ``h // GROUP``);
* ``lse``: (B, H, N) f32, contiguous, natural log: ``lse[i] = ln sum_j
  exp(sm_scale * q_i . k_j)`` over the keys row i sees (written only with
  ``STORE_LSE``).

V is contracted over its rows (keys), its unit stride along D: the
compiler copies its tiles as they are (TMA, pipelined like K's) and the
tensor cores read them N-major (wgmma's transposed B; docs/lowering.md).
No Vᵀ copy is made.

Causal masking is aligned top-left, as ``scaled_dot_product_attention(...,
is_causal=True)``: query row i sees keys ``j <= i`` (with N > Nkv the rows
past Nkv see every key; with N < Nkv the keys past N are never seen).
Only the key blocks that need a mask get one (the key tail, the causal
diagonal, and block 0, which opens the skewed loop): the loop is split in
two, the first part mask-free. The loops run one key block ahead: QKᵀ of
block j+1 and P(j)·V(j) are on the tensor cores while the softmax of block
j+1 runs (FlashAttention-3's intra-warpgroup overlap).

Grid: (ceil(N / BLOCK_M), H, B), one program per tile (a block of
BLOCK_M query rows of one head); with ``PERSISTENT`` any number of programs
(one per SM), program p taking tiles p, p + grid, ... Tiles are numbered
query block first, then head, then batch, so the programs that run
together share the K and V of one or two heads in L2; causal tiles run
their longest query blocks first within each head. BLOCK_M is 64 rows per
warpgroup (wgmma): 128 on 8 warps. With ``WARP_SPECIALIZE`` a producer
warpgroup beside them issues the K and V copies of both loops (which
share its rings), so the consumer warpgroups meet at mbarriers only, not
at a barrier every trip; persistent, it goes on to the next tile's copies
while the consumers finish this one.

Every tensor is read and written as a whole: the batch and the head are
leading dimensions of each ``sl.load``/``sl.store`` view, so each TMA
tensor map is built once per program, whichever tiles it visits.
"""

from __future__ import annotations

import sage.language as sl
from sage.kernels.strided import kv_head_of

#: ln(2): the kernel's row statistics are in base 2 (log2 e folded into the
#: scale of the logits); LSE is stored in natural-log units.
LN2 = 0.6931471805599453


def flash_forward(q, k, v, o, lse, qk_scale, N, N_KV, BATCH, HEADS,
                  stride_qb, stride_qh, stride_qn, stride_kb, stride_kh, stride_kn,
                  stride_vb, stride_vh, stride_vn, stride_ob, stride_oh, stride_on,
                  D: sl.constexpr, BLOCK_M: sl.constexpr, BLOCK_N: sl.constexpr,
                  CAUSAL: sl.constexpr = False, GROUP: sl.constexpr = 1,
                  STAGES: sl.constexpr = 2, STORE_LSE: sl.constexpr = False,
                  WARP_SPECIALIZE: sl.constexpr = False, PING_PONG: sl.constexpr = False,
                  POSITIVE_SCALE: sl.constexpr = False, PERSISTENT: sl.constexpr = False,
                  TMA_STORE: sl.constexpr = False):
    """O (and LSE) of one block of BLOCK_M query rows of one (batch, head).

    ``qk_scale`` (f32) is the softmax scale times log2(e): the logits are
    ``s * qk_scale`` in base-2 units; ``POSITIVE_SCALE`` says it is > 0 (the
    softmax then fuses the scaling into each exponent's FFMA). q, k,
    v and o share their 16-bit type; BATCH and HEADS count the batches and
    query heads. Grid: (ceil(N / BLOCK_M), HEADS, BATCH), or with PERSISTENT
    any number of programs on axis 0; the module docstring has the layouts.
    """
    blocks = (N + BLOCK_M - 1) // BLOCK_M
    KV_HEADS = HEADS // GROUP

    def tile(block, head, batch, active=None):
        """O (and LSE) of query block ``block`` of (``batch``, ``head``); with
        ``active`` false (an i1) nothing: no key trips, nothing stored."""
        row = block * BLOCK_M
        rows_out = N if active is None else sl.where(active, N, 0)
        kv_head = kv_head_of(head, GROUP)

        def rows(x, h, heads, at, count, strides, BLOCK):
            """The ``BLOCK x D`` tile at row ``at`` of (``batch``, ``h``) of a
            (BATCH, heads, count, D) tensor with ``strides``; 0 past ``count``."""
            return sl.load(x, (BLOCK, D), (batch, h, at, 0), (*strides, 1),
                           (BATCH, heads, count, D))

        # Loaded once; rows past N read 0 (finite logits, never stored).
        qt = rows(q, head, HEADS, row, N, (stride_qb, stride_qh, stride_qn), BLOCK_M)

        def scores(col):
            """S = Q Kᵀ of the key block at ``col`` (f32, in flight until used)."""
            kt = rows(k, kv_head, KV_HEADS, col, N_KV, (stride_kb, stride_kh, stride_kn),
                      BLOCK_N)
            return sl.matmul(qt, kt, contract=(1, 1))

        def masked(x, col):
            """``x`` with -inf where a key does not exist or, causal, lies past
            the row: the key tail and the causal diagonal."""
            keys = sl.iota((1, BLOCK_N), 1) + col
            if CAUSAL:
                # Row i sees keys <= i that exist: one compare per element.
                last = sl.minimum(sl.iota((BLOCK_M, 1), 0) + row, N_KV - 1)
                return sl.where(keys <= last, x, float("-inf"))
            # Only the key tail: one add per element.
            return x + sl.where(keys < N_KV, sl.zeros((1, BLOCK_N), sl.float32), float("-inf"))

        def probabilities(s, col, m, l, MASKED: bool):
            """The online softmax of one key block: 16-bit P, the new row
            statistics and alpha, the factor that rescales O to the new max."""
            if POSITIVE_SCALE:
                # A positive scale keeps the order of the logits (and -inf): the
                # mask and the row max work on S, the max is scaled once per
                # row, and each exponent is one FFMA, s * scale - base
                # (sage.softmax_update scales every logit first: an FMUL and an
                # FADD per element).
                if MASKED:
                    s = masked(s, col)
                new_m = sl.maximum(m, sl.max(s, 1) * qk_scale)
                base = sl.where(new_m == float("-inf"), 0.0, new_m)
                p = sl.exp2(sl.fma(s, qk_scale, -base))
                alpha = sl.exp2(m - base)
                return p.to(q.dtype.element), new_m, alpha * l + sl.sum(p, 1), alpha
            t = s * qk_scale
            if MASKED:
                # Masked after scaling, so a negative or zero scale keeps -inf.
                t = masked(t, col)
            p, m, l, alpha, p_max = sl.softmax_update(t, m, l)
            return p.to(q.dtype.element), m, l, alpha

        def accumulate(p, col, acc):
            """O += P V over the key block at ``col``; P is the A operand from
            the registers the softmax left it in (16-bit P has the accumulator's
            layout: a renaming)."""
            vb = rows(v, kv_head, KV_HEADS, col, N_KV, (stride_vb, stride_vh, stride_vn),
                      BLOCK_N)
            return sl.matmul(p, vb, contract=(1, 0), acc=acc)

        def trip(col, p, m, l, acc, MASKED: bool):
            """One trip of the skewed loop: QKᵀ of the block at ``col``, then
            P·V of the block before, then the softmax of ``col``'s block (which
            waits for the first matmul only), then O rescaled."""
            s = scores(col)
            acc = accumulate(p, col - BLOCK_N, acc)
            p, m, l, alpha = probabilities(s, col, m, l, MASKED)
            return p, m, l, acc * alpha

        # Key blocks before `unmasked` need no mask: every key exists and, when
        # causal, every row of the block sees every key. Blocks from there to
        # `stop` are masked (the key tail, the causal diagonal).
        stop = N_KV
        unmasked = (N_KV // BLOCK_N) * BLOCK_N
        if CAUSAL:
            stop = sl.minimum(row + BLOCK_M, N_KV)
            unmasked = sl.minimum(((row + 1) // BLOCK_N) * BLOCK_N, unmasked)
        if active is not None:
            stop = sl.where(active, stop, 0)
            unmasked = sl.where(active, unmasked, 0)
        # The loops are skewed by one key block (FlashAttention-3's intra-
        # warpgroup overlap): a trip issues QKᵀ of block j+1, then P(j)·V(j);
        # the softmax of block j+1 waits only for the first (the second stays in
        # flight under its exponentials), and O is rescaled once P(j)·V(j) is
        # done. Block 0 opens (masked: the mask is exact for any block, and
        # N_KV >= 1 makes it exist) and the last P·V closes. (Rescaling O before
        # P(j)·V(j) instead, as FlashAttention-3 does, measured the same.)
        m = sl.full((BLOCK_M, 1), float("-inf"), sl.float32)
        l = sl.zeros((BLOCK_M, 1), sl.float32)
        p, m, l, _ = probabilities(scores(0), 0, m, l, True)
        acc = sl.zeros((BLOCK_M, D), sl.float32)
        for col in sl.range(BLOCK_N, unmasked, BLOCK_N, num_stages=STAGES,
                            warp_specialize=WARP_SPECIALIZE, ping_pong=PING_PONG):
            p, m, l, acc = trip(col, p, m, l, acc, False)
        for masked_col in sl.range(sl.maximum(unmasked, BLOCK_N), stop, BLOCK_N,
                                   num_stages=STAGES, warp_specialize=WARP_SPECIALIZE,
                                   ping_pong=PING_PONG):
            p, m, l, acc = trip(masked_col, p, m, l, acc, True)
        acc = accumulate(p, ((stop - 1) // BLOCK_N) * BLOCK_N, acc)
        # Every row sees key 0 (Nkv >= 1), so l > 0: one reciprocal per row and a
        # multiply per element instead of a division per element.
        out = acc * (1.0 / l)
        # With TMA_STORE the copy engine writes O from shared memory (not
        # for the second tile of a causal pair, whose bounds depend on the
        # tile: its map would be built on the device every trip).
        sl.store(o, out.to(o.dtype.element), (batch, head, row, 0),
                 (stride_ob, stride_oh, stride_on, 1), (BATCH, HEADS, rows_out, D),
                 tma=TMA_STORE and active is None)
        if STORE_LSE:
            # LSE is (BATCH, HEADS, N) contiguous: strides in i64.
            sl.store(lse, (m + sl.log2(l)) * LN2, (batch, head, row, 0),
                     (HEADS.to(sl.int64) * N, N, 1, 0), (BATCH, HEADS, rows_out, 1))

    if PERSISTENT and CAUSAL:
        # A causal query block's work grows with its index: block j and
        # block blocks-1-j together see blocks+1 key blocks, whatever j. A
        # program takes such pairs, the long block first, so that every
        # program gets the same work (programs striding over single blocks
        # get sums that differ by up to a fifth); the middle block of an odd
        # count pairs with nothing. (Measured: still no faster than one
        # program per tile, whose scheduling the hardware balances; see
        # ops.TILES.)
        pairs = (blocks + 1) // 2
        for pair in sl.range(sl.program_id(0), pairs * HEADS * BATCH, sl.num_programs(0)):
            j = pair % pairs
            head, batch = (pair // pairs) % HEADS, pair // (pairs * HEADS)
            tile(blocks - 1 - j, head, batch)
            tile(j, head, batch, active=j != blocks - 1 - j)
    elif PERSISTENT:
        for t in sl.range(sl.program_id(0), blocks * HEADS * BATCH, sl.num_programs(0)):
            tile(t % blocks, (t // blocks) % HEADS, t // (blocks * HEADS))
    elif CAUSAL:
        # The last query blocks see the most keys: start them first, so the
        # short programs fill the last wave instead of the long ones.
        tile(blocks - 1 - sl.program_id(0), sl.program_id(1), sl.program_id(2))
    else:
        tile(sl.program_id(0), sl.program_id(1), sl.program_id(2))
