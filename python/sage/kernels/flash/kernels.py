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
* ``k``: (B, Hkv, Nkv, D), strided the same way; H is a multiple of Hkv
  (GQA/MQA: query head h reads kv head ``h // GROUP``);
* ``v``: like ``k``, or with ``TRANSPOSED_V`` Vᵀ: (B, Hkv, D, ·) with
  ``stride_vn`` the stride of its D rows (key j of row d at ``d * stride_vn
  + j``; the rows may be padded past Nkv);
* ``lse``: (B, H, N) f32, contiguous, natural log: ``lse[i] = ln sum_j
  exp(sm_scale * q_i . k_j)`` over the keys row i sees (written only with
  ``STORE_LSE``).

Why Vᵀ: sagegpu-promote-operands gives the tensor cores K-major shared tiles
only, and V (Nkv x D) is contracted over its rows. Loaded as it is, the
compiler reads V into registers and stores it transposed to shared memory
on every trip (2-byte ``st.shared`` and a barrier, outside the TMA
pipeline); a Vᵀ copy is contracted over its unit-stride dimension, so its
tiles are TMA copies pipelined like K's. ``sage.kernels.flash.ops`` makes
that copy when the tile plan says so (16-bit wgmma can read an MN-major B
from shared memory: once the compiler does, V needs no copy).

Causal masking is aligned top-left, as ``scaled_dot_product_attention(...,
is_causal=True)``: query row i sees keys ``j <= i`` (with N > Nkv the rows
past Nkv see every key; with N < Nkv the keys past N are never seen).
Only the key blocks that need a mask get one (the key tail, the causal
diagonal): the loop is split in two, the first part mask-free.

Grid: (ceil(N / BLOCK_M), H, B). BLOCK_M is 64 rows per warpgroup (wgmma):
128 on 8 warps.
"""

from __future__ import annotations

import sage.language as sl
from sage.kernels.strided import head_base, kv_head_of, load_strided_rows, store_strided_rows

#: ln(2): the kernel's row statistics are in base 2 (log2 e folded into the
#: scale of the logits); LSE is stored in natural-log units.
LN2 = 0.6931471805599453


def flash_forward(q, k, v, o, lse, qk_scale, N, N_KV,
                  stride_qb, stride_qh, stride_qn, stride_kb, stride_kh, stride_kn,
                  stride_vb, stride_vh, stride_vn, stride_ob, stride_oh, stride_on,
                  D: sl.constexpr, BLOCK_M: sl.constexpr, BLOCK_N: sl.constexpr,
                  CAUSAL: sl.constexpr = False, GROUP: sl.constexpr = 1,
                  STAGES: sl.constexpr = 2, TRANSPOSED_V: sl.constexpr = False,
                  STORE_LSE: sl.constexpr = False):
    """O (and LSE) of one block of BLOCK_M query rows of one (batch, head).

    ``qk_scale`` (f32) is the softmax scale times log2(e): the logits are
    ``s * qk_scale`` in base-2 units. q, k, v and o share their 16-bit type.
    Grid: (ceil(N / BLOCK_M), H, B); the module docstring has the layouts.
    """
    head = sl.program_id(1)
    batch = sl.program_id(2)
    block = sl.program_id(0)
    if CAUSAL:
        # The last query blocks see the most keys: start them first, so the
        # short programs fill the last wave instead of the long ones.
        block = sl.num_programs(0) - 1 - block
    row = block * BLOCK_M
    kv_head = kv_head_of(head, GROUP)
    q_base = head_base(q, batch, head, stride_qb, stride_qh)
    k_base = head_base(k, batch, kv_head, stride_kb, stride_kh)
    v_base = head_base(v, batch, kv_head, stride_vb, stride_vh)
    # Loaded once; rows past N read 0 (finite logits, never stored).
    qt = load_strided_rows(q_base, row, N, stride_qn, BLOCK_M, D)

    def attend(col, m, l, acc, MASKED: bool):
        """One key block: S = Q Kᵀ, the online softmax, O = O * alpha + P V."""
        kt = load_strided_rows(k_base, col, N_KV, stride_kn, BLOCK_N, D)
        s = sl.matmul(qt, kt, contract=(1, 1))
        # V after S's matmul is issued: read through registers (V as it is),
        # its load then runs under that matmul; a TMA copy of Vᵀ is issued by
        # the pipeline wherever it is written.
        if TRANSPOSED_V:
            vt = sl.load(v_base, (D, BLOCK_N), (0, col), (stride_vn, 1), (D, N_KV))
        else:
            vt = load_strided_rows(v_base, col, N_KV, stride_vn, BLOCK_N, D)
        t = s * qk_scale
        if MASKED:
            # Masked after scaling, so any sign of the scale keeps -inf.
            keys = sl.iota((1, BLOCK_N), 1) + col
            if CAUSAL:
                # Row i sees keys <= i that exist: one compare per element.
                last = sl.minimum(sl.iota((BLOCK_M, 1), 0) + row, N_KV - 1)
                t = sl.where(keys <= last, t, float("-inf"))
            else:
                # Only the key tail: one add per element.
                t = t + sl.where(keys < N_KV, sl.zeros((1, BLOCK_N), sl.float32),
                                 float("-inf"))
        p, m, l, alpha, p_max = sl.softmax_update(t, m, l)
        # P goes to the tensor cores from the registers the softmax left it
        # in (16-bit P has the accumulator's layout: a renaming).
        acc = sl.matmul(p.to(vt.dtype), vt, contract=(1, 1) if TRANSPOSED_V else (1, 0),
                        acc=acc * alpha)
        return m, l, acc

    m = sl.full((BLOCK_M, 1), float("-inf"), sl.float32)
    l = sl.zeros((BLOCK_M, 1), sl.float32)
    acc = sl.zeros((BLOCK_M, D), sl.float32)
    # Key blocks before `unmasked` need no mask: every key exists and, when
    # causal, every row of the block sees every key. Blocks from there to
    # `stop` are masked (the key tail, the causal diagonal).
    stop = N_KV
    unmasked = (N_KV // BLOCK_N) * BLOCK_N
    if CAUSAL:
        stop = sl.minimum(row + BLOCK_M, N_KV)
        unmasked = sl.minimum(((row + 1) // BLOCK_N) * BLOCK_N, unmasked)
    for col in sl.range(0, unmasked, BLOCK_N, num_stages=STAGES):
        m, l, acc = attend(col, m, l, acc, False)
    for masked_col in sl.range(unmasked, stop, BLOCK_N, num_stages=STAGES):
        m, l, acc = attend(masked_col, m, l, acc, True)
    # Every row sees key 0 (Nkv >= 1), so l > 0: one reciprocal per row and a
    # multiply per element instead of a division per element.
    out = acc * (1.0 / l)
    store_strided_rows(head_base(o, batch, head, stride_ob, stride_oh),
                       out.to(o.dtype.element), row, N, stride_on, D)
    if STORE_LSE:
        bh = batch.to(sl.int64) * sl.num_programs(1) + head
        sl.store(lse + bh * N, (m + sl.log2(l)) * LN2, (row, 0), (1, 0), (N, 1))
