"""Experiments on the SageBwd forward's schedule, made by rewriting its PTX.

Questions that would take a compiler feature to ask properly are asked here
first, on the PTX the compiler emits for the default plan (non-causal, fine
scales, bf16): each variant is a text rewrite that keeps the per-program
arithmetic, so its O must equal the default's bit for bit (but for
``ex2-emulation`` and ``integer-o``), and
only the schedule changes. The JIT loads a variant
through ``SAGE_OVERRIDE_DIR``; each variant runs in a process of its own
(the JIT's caches), with the plan tuner off, the default first (its O is the
reference), and the list is repeated to show the noise. Each call's time
comes with the SM clock and board power it ran at (bench/gpu_clocks.py).

Variants (``--variants``):

* ``default``: the compiler's kernel, one warpgroup a CTA, 64 query rows.
* ``replicas:R[:turns][:stagger=C]``: R one-warpgroup programs in one CTA
  (the programs per SM the default fits, by registers), each with its own
  shared memory, named barrier and program id (``ctaid.x * R`` + its
  warpgroup); the grid's first axis is divided by R. The warpgroup index is
  shuffled from lane 0 so that ptxas keeps it warp-uniform (otherwise every
  shared-memory address and wgmma descriptor becomes per-thread and the loop
  grows by a third). ``turns``: the programs take turns, round robin, to
  issue their S = Q K^T (named barriers 4..4+R-1: wait for one's turn before
  the wgmma fence, pass it after the commit). ``stagger=C``: program r spins
  r * C clock cycles before starting. This is issue #12's "three consumer
  warpgroups taking turns", without a producer and without shared K/V rings.
* ``ex2-emulation:K``: every K-th exponential of the main loop computed on
  the FMA pipe (:func:`ex2_emulation`); P^, hence O, may differ slightly.
* ``integer-o[:check]``: P^ V^ accumulated in its int32 registers across
  the key blocks, without the per-element conversion and FMA of each trip
  and without the units' rescaling (:func:`integer_o`; O differs): how fast
  an "integer O" forward could be; ``check`` adds the per-trip test and
  warp vote that such a forward needs, with a slow path that never runs.
* ``multicast``: clusters of two CTAs, query blocks 2c and 2c + 1 of one
  head, which read the same K^ and V^T tiles: in the mask-free loop (and its
  prologue) CTA rank 0 copies each K^ tile and rank 1 each V^T tile, by TMA
  multicast into both CTAs' shared memory (each CTA's barrier still expects
  the whole tile; the K scales stay each CTA's own), and the CTA barrier
  before each refill, and the one before the loop's barriers are
  invalidated, become cluster barriers (a slot is refilled only once both
  CTAs have read it); a cluster barrier follows the barriers' set-up (the
  first copies, issued right after it, complete on both CTAs' barriers).
  Half the L2 -> SM bytes of the loop's tiles: does the
  energy they cost matter where the kernel runs at the power limit
  (bench/results/2026-11-27-h100-clocks.md)? Non-causal only (both CTAs
  then take the same key blocks); N / BLOCK_M must be even. Measured: 14-15%
  slower than the default at N6K (bench/results/2026-11-27-h100-copy-leaders.md):
  holding two CTAs in step at every refill costs more than the bytes save.
* ``no-refill-barrier``: the CTA barrier before each refill of a key
  block's slot in the loops (the copies of K^ and V^T issued a stage ahead)
  removed. With one warpgroup a CTA, the last readers of the slot are that
  warpgroup's own wgmma groups, which every warp has waited for before its
  copy leader can reach the refill (each wgmma is issued by the four warps
  together): does the barrier cost time? (O is unchanged.)
* ``rotated``: the main loop rotated by its O update (:func:`rotated`): a
  trip issues its P^ V^ and the next trip's S, then waits for the P^ V^
  alone and adds it to O while S runs (the next trip's S no longer waits
  for the O update). Its P^ registers stay held across S, so it fits only
  without a register cap (D=64; at D=128's 168 registers it spills in the
  loop). O is unchanged.
* ``no-row-sum`` and ``no-factor-mask``: bounds, not kernels. The main
  loop's byte row sums (``dp4a``) become moves of their accumulators (l
  stays 0: O is inf), or its factor truncations (``and -8``) go (O may
  differ by a rounding): what the row sum, and what pre-rounded scales,
  would save a trip, schedule included.
* ``split-scores`` (D=128): the loop's S issued as two wgmma groups of 64
  keys (the accumulator's two register halves), the first waited for with
  the second in flight, and the work that needs only the first half (its
  conversions, K scales and partial row maxima) moved between the two
  waits; the second wait is fenced so that ptxas keeps it there.

Usage (GPU machine, ``scripts/gpu/run.sh forward-experiments``)::

    python3 bench/forward_ptx_experiments.py OUT.json OUT.md --d 128 --n 6144 \\
        --variants default replicas:3 replicas:3:turns:stagger=1400 --repeats 2
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402  (bench/common.py)
import gpu_clocks  # noqa: E402  (bench/gpu_clocks.py)

common.add_python_path()

#: The first named barrier of the turns (1..R are the programs' own barriers).
TURN_BARRIER = 4


def _warp_group(threads: int) -> str:
    """PTX that leaves the running thread's warpgroup in %xwg, warp-uniform."""
    shift = threads.bit_length() - 1
    return (f"mov.u32 \t%xwg, %tid.x;\n\tshr.u32 \t%xwg, %xwg, {shift};\n"
            f"\tshfl.sync.idx.b32 \t%xwg, %xwg, 0, 31, -1;\n\t")


def _one(pattern: str, text: str, what: str) -> re.Match[str]:
    """The single match of ``pattern`` (the rewrite assumes the compiler's shape)."""
    found = list(re.finditer(pattern, text))
    if len(found) != 1:
        raise ValueError(f"expected one {what} in the PTX, found {len(found)}")
    return found[0]


def _score_groups(ptx: str) -> list[re.Match[str]]:
    """The wgmma groups (fence .. commit) that compute S (s8 x s8)."""
    return [g for g in re.finditer(r"\twgmma\.fence\.sync\.aligned;\n(.*?)"
                                   r"wgmma\.commit_group\.sync\.aligned;", ptx, re.S)
            if "s32.s8.s8" in g.group(1)]


def replicas(ptx: str, count: int, turns: bool = False, stagger: int = 0) -> str:
    """``count`` one-warpgroup programs in one CTA (see the module docstring)."""
    header = _one(r"threads=(\d+) shared_memory=(\d+)", ptx, "kernel header")
    threads, smem = int(header[1]), int(header[2])
    stride = -(-smem // 1024) * 1024  # 1024-byte aligned (128-byte swizzled tiles)
    ptx = ptx.replace(header[0], f"threads={threads * count} "
                                 f"shared_memory={stride * count}", 1)
    ptx = ptx.replace(f".maxntid {threads}, 1, 1", f".maxntid {threads * count}, 1, 1", 1)
    decl = ptx.index("\t.reg .b32 \t%r<")
    ptx = (ptx[:decl] + "\t.reg .b32 \t%xwg, %xb;\n\t.reg .b64 \t%xo, %xc0, %xc1, %xd;\n"
           "\t.reg .pred \t%xp;\n" + ptx[decl:])
    wg = _warp_group(threads)
    tid = _one(r"mov\.u32 \t(%r\d+), %tid\.x;", ptx, "tid.x read")
    spin = ""
    if stagger:
        spin = (f"\t{wg}mov.u64 \t%xc0, %clock64;\n\tmul.wide.u32 \t%xd, %xwg, {stagger};\n"
                f"$XSPIN:\n\tmov.u64 \t%xc1, %clock64;\n\tsub.s64 \t%xc1, %xc1, %xc0;\n"
                f"\tsetp.lt.s64 \t%xp, %xc1, %xd;\n\t@%xp bra \t$XSPIN;\n")
    ptx = ptx.replace(tid[0], f"{spin}\t{tid[0]}\n\tand.b32 \t{tid[1]}, {tid[1]}, "
                              f"{threads - 1};", 1)
    cta = _one(r"mov\.u32 \t(%r\d+), %ctaid\.x;", ptx, "ctaid.x read")
    ptx = ptx.replace(cta[0], f"{cta[0]}\n\t{wg}mad.lo.u32 \t{cta[1]}, {cta[1]}, {count}, "
                              f"%xwg;", 1)
    base = _one(r"mov\.b64 \t(%rd\d+), sage_scratch;", ptx, "shared base")
    ptx = ptx.replace(base[0], f"{base[0]}\n\t{wg}mul.wide.u32 \t%xo, %xwg, {stride};\n"
                               f"\tadd.s64 \t{base[1]}, {base[1]}, %xo;", 1)
    ptx = ptx.replace("bar.sync \t0;", f"{wg}add.u32 \t%xb, %xwg, 1;\n"
                                       f"\tbar.sync \t%xb, {threads};")
    if not turns:
        return ptx
    pair = 2 * threads
    pieces, pos = [], 0
    for group in _score_groups(ptx):
        pieces += [ptx[pos:group.start()],
                   f"\t{wg}add.u32 \t%xb, %xwg, {TURN_BARRIER};\n\tbar.sync \t%xb, {pair};\n",
                   ptx[group.start():group.end()],
                   f"\n\t{wg}add.u32 \t%xb, %xwg, {TURN_BARRIER + 1};\n"
                   f"\tsetp.eq.u32 \t%xp, %xb, {TURN_BARRIER + count};\n"
                   f"\t@%xp mov.u32 \t%xb, {TURN_BARRIER};\n\tbar.arrive \t%xb, {pair};"]
        pos = group.end()
    ptx = "".join(pieces + [ptx[pos:]])
    # The last program opens the first turn; the first takes the last pass
    # before it exits (no arrival is left pending).
    first = ptx.rindex(f"\t{wg}", 0, ptx.index("\tbar.sync \t%xb, "))
    ptx = (ptx[:first] + f"\t{wg}setp.eq.u32 \t%xp, %xwg, {count - 1};\n"
           f"\t@%xp bar.arrive \t{TURN_BARRIER}, {pair};\n" + ptx[first:])
    return ptx.replace("\tret;", f"\t{wg}setp.eq.u32 \t%xp, %xwg, 0;\n"
                                 f"\t@%xp bar.sync \t{TURN_BARRIER}, {pair};\n\tret;")


def _statements(text: str) -> list[str]:
    """PTX lines, an inline-asm block ``{ ... }`` kept whole."""
    out, cur, depth = [], [], 0
    for line in text.split("\n"):
        cur.append(line)
        depth += line.count("{") - line.count("}")
        if depth == 0:
            out.append("\n".join(cur))
            cur = []
    return out + (["\n".join(cur)] if cur else [])


def _hoist_independent(segment: str, late: set[str]) -> tuple[str, str]:
    """Splits ``segment`` into the statements that do not read ``late``
    registers (transitively, predicates included) and those that do, each in
    its order."""
    reg = re.compile(r"%[a-z]+\d+")
    early, after = [], []
    tainted = set(late)
    for statement in _statements(segment):
        code = statement.split("//")[0].strip()
        guard: list[str] = []
        if code.startswith("@"):
            predicate, code = code.split(None, 1)
            guard = reg.findall(predicate)
        names = reg.findall(code)
        opcode = code.split()[0] if code else ""
        writes = bool(names) and not code.startswith("{") and not opcode.startswith(
            ("st.", "bar", "mbarrier", "cp.", "wgmma", "fence"))
        dest = names[0] if writes else None
        uses = guard + (names[1:] if writes else names)
        if any(u in tainted for u in uses):
            if dest:
                tainted.add(dest)
            after.append(statement)
        else:
            early.append(statement)
    return "\n".join(early), "\n".join(after)


def split_scores(ptx: str) -> str:
    """The loop's S in two 64-key wgmma groups (see the module docstring)."""
    group = _score_groups(ptx)[0]  # the main loop's (the masked loop comes later)
    body = group.group(1)
    mmas = list(re.finditer(r"wgmma\.mma_async\.sync\.aligned\.m64n128k32\.s32\.s8\.s8 "
                            r"\{([^}]*)\}, (%rd\d+), (%rd\d+), p;", body))
    if len(mmas) != 4:
        raise ValueError(f"split-scores needs D=128 (4 k-steps of m64n128k32), "
                         f"found {len(mmas)}")
    regs = [r.strip() for r in mmas[0].group(1).split(",")]
    low, high = regs[:32], regs[32:]
    for m in mmas:
        body = body.replace(m.group(0), f"wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 "
                                        f"{{{', '.join(low)}}}, {m.group(2)}, {m.group(3)}, p;")
    # The second half reads K's rows 64..127: 64 rows of 128 bytes further,
    # 8192 >> 4 in the descriptor's address field.
    high_group = "\twgmma.commit_group.sync.aligned;\n\t{\n\t.reg .b64 bd;\n\t.reg .pred p;\n"
    for k, m in enumerate(mmas):
        high_group += (f"\tadd.s64 bd, {m.group(3)}, 512;\n\tsetp.ne.b32 p, {int(k > 0)}, 0;\n"
                       f"\twgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 "
                       f"{{{', '.join(high)}}}, {m.group(2)}, bd, p;\n")
    rewritten = ("\twgmma.fence.sync.aligned;\n" + body + high_group + "\t}\n"
                 "\twgmma.commit_group.sync.aligned;")
    ptx = ptx[:group.start()] + rewritten + ptx[group.end():]
    wait = ptx.index("wgmma.wait_group.sync.aligned 0;", group.start() + len(rewritten))
    ptx = ptx[:wait] + "wgmma.wait_group.sync.aligned 1;" + ptx[wait + 32:]
    start = ptx.index("\n", wait) + 1
    end = ptx.index("\twgmma.fence.sync.aligned;", start)
    early, late = _hoist_independent(ptx[start:end], set(high))
    return (ptx[:start] + early + "\n\tfence.acq_rel.cta;\n\twgmma.wait_group.sync.aligned 0;\n"
            + late + "\n" + ptx[end:])


#: 2^f on [-0.5, 0.5], degree 3 (highest first): relative error 7.7e-5, a
#: fortieth of P^'s rounding step at its largest (255).
EXP2_POLY = (0.05508876703270356, 0.24260465590806618, 0.6932762833317949,
             0.9999289048197659)


def _f32(value: float) -> str:
    """A PTX f32 literal."""
    import struct  # noqa: PLC0415

    return "0f" + struct.pack(">f", value).hex().upper()


def _main_loop(ptx: str) -> tuple[int, int]:
    """The text span of the main loop's work: from its first S group to the
    P V group that follows (what the loop rewrites change)."""
    group = _score_groups(ptx)[0]
    return group.start(), ptx.index("\twgmma.fence.sync.aligned;", group.end())


def ex2_emulation(ptx: str, every: int) -> str:
    """Every ``every``-th exponential of the main loop (between its first S
    group and the P V group that follows) computed on the FMA pipe: x clamped
    to -126 (below, j's exponent bits would carry the polynomial into the
    sign), rounded to an integer j with the 1.5 * 2^23 trick, 2^(x - j) by
    the polynomial, j added to the exponent bits (FlashAttention-4's partial
    ex2 emulation). P^ may then round differently where 255 * 2^x is within
    ~0.02 of a half."""
    start, end = _main_loop(ptx)
    magic = _f32(12582912.0)
    c3, c2, c1, c0 = (_f32(c) for c in EXP2_POLY)
    count = 0

    def emulate(m: re.Match[str]) -> str:
        nonlocal count
        count += 1
        if count % every:
            return m.group(0)
        dst, src = m.group(1), m.group(2)
        return (f"{{\n\t.reg .b32 x, t, j, f, p;\n\tmax.f32 x, {src}, {_f32(-126.0)};\n"
                f"\tadd.rn.f32 t, x, {magic};\n\tsub.rn.f32 j, t, {magic};\n"
                f"\tsub.rn.f32 f, x, j;\n\tfma.rn.f32 p, f, {c3}, {c2};\n"
                f"\tfma.rn.f32 p, p, f, {c1};\n\tfma.rn.f32 p, p, f, {c0};\n"
                f"\tmad.lo.s32 {dst}, t, 8388608, p;\n\t}}")

    body = re.sub(r"ex2\.approx\.ftz\.f32 \t(%r\d+), (%r\d+);", emulate, ptx[start:end])
    if count == 0:
        raise ValueError("no ex2.approx.ftz.f32 in the main loop")
    return ptx[:start] + body + ptx[end:]


def _value_groups(ptx: str) -> list[re.Match[str]]:
    """The wgmma groups (fence .. commit) that compute P^ V^ (u8 x s8)."""
    return [g for g in re.finditer(r"\twgmma\.fence\.sync\.aligned;\n(.*?)"
                                   r"wgmma\.commit_group\.sync\.aligned;", ptx, re.S)
            if "s32.u8.s8" in g.group(1)]


def _o_update(lines: list[str], product: list[str]
              ) -> tuple[dict[str, str], list[tuple[str, str, str]], list[str], int]:
    """The O update that follows a P^ V^ wait (its first ``lines``): each
    element of the int32 ``product`` converted to f32 and added to O by one
    FMA with the row's shift. Returns the conversions (float register ->
    product register), the updates (O, shift, float register), the lines
    between them that are not code, and the index of the first line after.

    Raises:
        ValueError: when not every element of the product is added to O.
    """
    convert: dict[str, str] = {}
    update: list[tuple[str, str, str]] = []
    keep: list[str] = []
    end = 0
    for end, line in enumerate(lines):
        c = re.fullmatch(r"\tcvt\.rn\.f32\.s32 \t(%r\d+), (%r\d+);", line)
        f = re.fullmatch(r"\tfma\.rn\.f32 \t(%r\d+), (%r\d+), (%r\d+), (%r\d+);", line)
        if c and c[2] in product:
            convert[c[1]] = c[2]
        elif f and f[4] in convert and f[1] == f[2]:
            update.append((f[1], f[3], f[4]))
        elif "// end inline asm" in line or not line.strip():
            keep.append(line)
        else:
            break
    if len(update) != len(product):
        raise ValueError(f"expected {len(product)} O updates after the P^ V^ wait, "
                         f"found {len(update)}")
    return convert, update, keep, end


#: The shift factor above which the ``integer-o:check`` slow path would run:
#: never (shift = 2^(u - u') <= 2^64), but ptxas cannot know.
NEVER = 1.0e38


def integer_o(ptx: str, check: bool = False) -> str:
    """The main loop's P^ V^ accumulated by the tensor cores in its int32
    registers across the key blocks (scale-d 1 from the first k-step), its
    per-element conversion and FMA gone from the loop, O converted once
    after it: the loop of an "integer O" forward without its rescaling (the
    units' shifts are dropped, so O differs: a bound on that formulation's
    speed). The trip still waits for its P^ V^: left in flight into the
    next trip, it holds P^'s registers too, and at 168 registers ptxas then
    serializes every wgmma. ``check``: each trip also tests its two rows'
    shifts, votes across the warp and branches to an out-of-line rescale of
    the accumulator (an arithmetic shift per element) that never runs: the
    cost of the test that the real formulation needs."""
    group = _value_groups(ptx)[0]  # the main loop's (the masked loop comes later)
    body = group.group(1)
    first = re.search(r"setp\.ne\.b32 p, (%r\d+), 0;", body)
    if first is None:
        raise ValueError("no scale-d predicate in the P^ V^ group")
    # Its register holds 0 (possibly shared with other zeros): the first
    # k-step's predicate is made true instead.
    body = body[:first.start()] + f"setp.eq.b32 p, {first[1]}, {first[1]};" + \
        body[first.end():]
    accumulator = [r.strip() for r in re.search(
        r"s32\.u8\.s8 \{([^}]*)\}", body)[1].split(",")]
    ptx = ptx[:group.start(1)] + body + ptx[group.end(1):]
    wait = "\twgmma.wait_group.sync.aligned 0;\n"
    at = ptx.index(wait, group.start())
    tail = ptx[at + len(wait):]
    lines = tail.split("\n")
    convert, update, keep, i = _o_update(lines, accumulator)
    shifts = sorted({s for _, s, _ in update})
    test = ""
    if check:
        test = f"\tsetp.gt.f32 \t%xq, {shifts[0]}, {_f32(NEVER)};\n" + "".join(
            f"\tsetp.gt.or.f32 \t%xq, {s}, {_f32(NEVER)}, %xq;\n" for s in shifts[1:])
        test += "\tvote.sync.any.pred \t%xq, %xq, -1;\n\t@%xq bra \t$XRESCALE;\n$XBACK:\n"
    ptx = ptx[:at] + wait + "\n".join(keep) + "\n" + test + "\n".join(lines[i:])
    exit_label = re.search(r"@%p\d+ bra \t\$L__BB0_\d+;\n\tbra\.uni \t(\$L__BB0_\d+);",
                           ptx[at:])
    if exit_label is None:
        raise ValueError("no loop exit after the P^ V^ group")
    label = f"{exit_label[1]}:\n"
    after = ptx.index(label, at) + len(label)
    ptx = (ptx[:after] + wait + "".join(f"\tcvt.rn.f32.s32 \t{o}, {convert[fr]};\n"
                                        for o, _, fr in update) + ptx[after:])
    # The accumulator starts at 0 (ptxas serializes every wgmma when one
    # may read registers that no instruction defined).
    tid = re.search(r"\tmov\.u32 \t%r\d+, %tid\.x;\n", ptx)
    ptx = (ptx[:tid.end()] + "".join(f"\tmov.b32 \t{a}, 0;\n" for a in accumulator)
           + ptx[tid.end():])
    decl = ptx.index("\t.reg .b32 \t%r<")
    ptx = ptx[:decl] + "\t.reg .pred \t%xq;\n" + ptx[decl:]
    if check:
        rescale = ("$XRESCALE:\n" + wait
                   + "".join(f"\tshr.s32 \t{a}, {a}, 1;\n" for a in accumulator)
                   + "\tbra.uni \t$XBACK;\n")
        end = ptx.rindex("\tret;\n") + len("\tret;\n")
        ptx = ptx[:end] + rescale + ptx[end:]
    return ptx


# A copy, predicated on the lane its leader region elected (CopyLeaders.h).
_TENSOR_LOAD = re.compile(
    r"@(sage_leader) cp\.async\.bulk\.tensor\.4d\.shared::cluster\.global\.tile"
    r"\.mbarrier::complete_tx::bytes (\[[^\]]+\]), \[(%rd\d+), (\{[^}]+\})\], (\[[^\]]+\]);")
_CTA_BARRIER = "bar.sync \t0;"
_CLUSTER_BARRIER = "barrier.cluster.arrive.aligned;\n\tbarrier.cluster.wait.aligned;"
_END_ASM = "// end inline asm"


def multicast(ptx: str) -> str:
    """Clusters of two CTAs (query blocks 2c and 2c + 1 of one head) that
    share the mask-free loop's K^ and V^T tiles (see the module docstring)."""
    header = _one(r"^(// sage\.kernel name=\S+ threads=\d+ shared_memory=\d+"
                  r"(?: global_scratch=\d+)?)((?: early_launch=1)?)$", ptx.split("\n", 1)[0],
                  "kernel header")
    # The header's fields in their order: the cluster before the early launch.
    ptx = ptx.replace(header[0], header[1] + " cluster=2" + header[2], 1)
    maxntid = _one(r"\.maxntid \d+, 1, 1", ptx, "maxntid")
    ptx = ptx.replace(maxntid[0], f"{maxntid[0]}\n.explicitcluster\n.reqnctapercluster 2, 1, 1",
                      1)
    decl = ptx.index("\t.reg .b32 \t%r<")
    ptx = (ptx[:decl] + "\t.reg .b32 \t%xrk;\n\t.reg .b16 \t%xmask;\n"
           "\t.reg .pred \t%xk, %xv, %xq;\n" + ptx[decl:])
    tid = _one(r"mov\.u32 \t%r\d+, %tid\.x;", ptx, "tid.x read")
    ptx = ptx.replace(tid[0], "mov.u32 \t%xrk, %cluster_ctarank;\n\tsetp.eq.u32 \t%xk, %xrk, 0;\n"
                              "\tsetp.eq.u32 \t%xv, %xrk, 1;\n\tmov.b16 \t%xmask, 3;\n\t"
                              + tid[0], 1)
    # The mask-free loop: its barriers are initialised first and invalidated
    # before the masked loop's are; its copies are the tensor copies before.
    end = ptx.index("mbarrier.inval")
    loads = list(_TENSOR_LOAD.finditer(ptx, 0, end))
    maps = list(dict.fromkeys(load[3] for load in loads))
    if len(maps) != 2:
        raise ValueError(f"expected the K^ and V^T maps in the loop's copies, found {maps}")
    # Each refill's CTA barrier (the last before its copies), and the one
    # before the barriers are invalidated, become cluster barriers: a slot is
    # refilled, and a CTA leaves the loop, only once both CTAs have read it.
    # The first copies follow the mbarriers' set-up with no CTA barrier
    # between (one thread does both): a cluster barrier goes after the last
    # set-up, so that the other CTA's mbarriers exist before a copy
    # completes on them.
    barriers, after_setup = set(), set()
    for load in loads:
        setup = ptx.rindex("mbarrier.init", 0, load.start())
        at = ptx.rfind(_CTA_BARRIER, setup, load.start())
        if at >= 0:
            barriers.add(at)
        else:
            after_setup.add(ptx.index(_END_ASM, setup) + len(_END_ASM))
    barriers.add(ptx.rindex(_CTA_BARRIER, 0, end))
    pieces, pos = [], 0
    for at in sorted(barriers | after_setup | {load.start() for load in loads}):
        pieces.append(ptx[pos:at])
        pos = at
        if at in after_setup:
            pieces.append("\n\t" + _CLUSTER_BARRIER)
            continue
        if ptx.startswith(_CTA_BARRIER, at):
            pieces.append(_CLUSTER_BARRIER)
            pos = at + len(_CTA_BARRIER)
            continue
        load = _TENSOR_LOAD.match(ptx, at)
        issuer = "%xk" if load[3] == maps[0] else "%xv"
        pieces.append(f"and.pred \t%xq, {load[1]}, {issuer};\n\t@%xq cp.async.bulk.tensor.4d"
                      f".shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                      f".multicast::cluster {load[2]}, [{load[3]}, {load[4]}], {load[5]}, "
                      f"%xmask;")
        pos = load.end()
    return "".join(pieces + [ptx[pos:]])


def no_refill_barrier(ptx: str) -> str:
    """The loops' refills without the CTA barrier before them (see the
    module docstring): the last barrier before each tensor copy issued
    after the first S group, where no wgmma lies between and no mbarrier is
    set up or invalidated since the last wgmma (the masked loop's first
    copies follow its barriers' set-up, which the barrier publishes)."""
    first = _score_groups(ptx)[0].start()
    barriers = set()
    for load in _TENSOR_LOAD.finditer(ptx, first):
        at = ptx.rindex(_CTA_BARRIER, 0, load.start())
        since = ptx[ptx.rindex("wgmma", 0, at):load.start()]
        if at > first and "wgmma" not in ptx[at:load.start()] \
                and "mbarrier.init" not in since and "mbarrier.inval" not in since:
            barriers.add(at)
    if not barriers:
        raise ValueError("no refill barrier found after the first S group")
    pieces, pos = [], 0
    for at in sorted(barriers):
        pieces.append(ptx[pos:at])
        pos = at + len(_CTA_BARRIER)
    return "".join(pieces + [ptx[pos:]])


def rotated(ptx: str) -> str:
    """The main loop rotated so that each trip's O update runs while the
    next trip's S is on the tensor cores: a trip runs its softmax, issues
    its P^ V^ and the next trip's S, waits for its P^ V^ alone
    (``wait_group 1``), adds it to O, refills the slots that P^ V^ read
    (moved here from the loop's top) and waits for S. The first S is
    issued before the loop; the last trip is peeled after it (its softmax
    and P^ V^ a second time in the code), so that everything a trip issues
    is waited for in that trip and no branch lies between a P^ V^ and its
    wait (ptxas serializes every wgmma otherwise: "non wgmma instructions
    reading accumulator registers of a wgmma between start and end of the
    pipeline stage"). O is unchanged."""
    wait0 = "\t// begin inline asm\n\twgmma.wait_group.sync.aligned 0;\n\t// end inline asm\n"
    wait1 = wait0.replace("aligned 0;", "aligned 1;")
    group = _value_groups(ptx)[0]
    product = [r.strip() for r in re.search(r"s32\.u8\.s8 \{([^}]*)\}",
                                            group.group(1))[1].split(",")]
    at = ptx.index(wait0, group.end())
    if ptx[group.end():at].strip():
        raise ValueError("work between the P^ V^ group and its wait")
    lines = ptx[at + len(wait0):].split("\n")
    end = _o_update(lines, product)[3]
    o_update = "\n".join(lines[:end]) + "\n"
    rest = "\n".join(lines[end:])
    latch = re.match(r"(.*?)\t@(%p\d+) bra \t(\$L__BB0_\d+);\n\tbra\.uni \t(\$L__BB0_\d+);\n",
                     rest, re.S)
    if latch is None:
        raise ValueError("no loop latch after the O update")
    more, top, exit_label = latch[2], latch[3], latch[4]
    # The loop's top block: what it computes for the trip, then its refill
    # between the skip branch and the jump into the body.
    head = re.match(re.escape(top) + r":\n(.*?)\t@(%p\d+) bra \t(\$L__BB0_\d+);\n(.*?)"
                    r"\tbra\.uni \t\3;\n", rest[latch.end():], re.S)
    if head is None:
        raise ValueError("no refill block at the loop's top")
    compute, skip, body_label, refill = head[1], head[2], head[3], head[4]
    after = rest[latch.end() + head.end():]
    if not after.startswith(exit_label + ":\n"):
        raise ValueError("the loop's exit does not follow its top block")
    # The body, from its label to the P^ V^ group's end: the S part (to the
    # S group's commit), the S wait, then the rest.
    start = ptx.rindex(body_label + ":\n", 0, group.start())
    body = ptx[start + len(body_label) + 2:at]
    scores = _score_groups(body)[0]
    s_end = body.index("wgmma.commit_group.sync.aligned;\n", scores.start()) + len(
        "wgmma.commit_group.sync.aligned;\n")
    if not body[s_end:].startswith(wait0):
        raise ValueError("the S group is not waited for right after its commit")
    s_part, softmax = body[:s_end], body[s_end + len(wait0):]
    enter = ptx.rindex(f"\tbra.uni \t{top};\n", 0, start)
    preheader = ptx[:enter]

    # Whether the trip after the next exists: the latch's test, evaluated
    # again once the latch has stepped the counters and `compute` has run.
    tests = re.findall(r"\tsetp\.[a-z0-9.]+ \t" + re.escape(more) + r", [^;]*;\n",
                       s_part + softmax + latch[1])
    if len(tests) != 1:
        raise ValueError(f"expected one test of the loop's latch, found {len(tests)}")
    again = tests[0].replace(more, "%xagain")

    def refilled(tag: str) -> str:
        return f"\t@{skip} bra \t$XREFILLED{tag};\n{refill}$XREFILLED{tag}:\n"
    loop = (compute + refilled("0") + s_part + wait0 + again
            + f"\t@!%xagain bra \t$XLAST;\n"
            + f"{body_label}:\n" + softmax + latch[1] + compute + s_part + wait1 + o_update
            + refilled("1") + wait0 + again + f"\t@%xagain bra \t{body_label};\n"
            + "$XLAST:\n" + softmax + latch[1] + wait0 + o_update
            + f"\tbra.uni \t{exit_label};\n")
    decl = preheader.index("\t.reg .b32 \t%r<")
    preheader = preheader[:decl] + "\t.reg .pred \t%xagain;\n" + preheader[decl:]
    return preheader + loop + after


def no_row_sum(ptx: str) -> str:
    """A bound (O is inf): the main loop's byte row sums (``dp4a``) replaced
    by moves of their accumulators, so l stays 0: what the row sum costs a
    trip, ptxas's schedule of the rest included."""
    start, end = _main_loop(ptx)
    body, n = re.subn(r"dp4a\.u32\.u32 \t(%r\d+), (%r\d+), (%r\d+), (%r\d+);",
                      r"mov.b32 \t\1, \4;", ptx[start:end])
    if not n:
        raise ValueError("no dp4a in the main loop")
    return ptx[:start] + body + ptx[end:]


def no_factor_mask(ptx: str) -> str:
    """A bound (O may differ by a rounding): the main loop's factor
    truncations (``and -8``, from the loop's top block on) become moves: what
    pre-rounded scales, whose products need no truncation, would save a
    trip."""
    start, end = _main_loop(ptx)
    head = ptx[:start].rfind("$L__BB")
    body, n = re.subn(r"\tand\.b32 \t(%r\d+), (%r\d+), -8;", r"\tmov.b32 \t\1, \2;",
                      ptx[head:end])
    if not n:
        raise ValueError("no factor truncation in the main loop")
    return ptx[:head] + body + ptx[end:]


#: The variants without options, by name: their rewrite of the PTX.
PLAIN_REWRITES = {"split-scores": split_scores, "multicast": multicast,
                  "no-refill-barrier": no_refill_barrier, "rotated": rotated,
                  "no-row-sum": no_row_sum, "no-factor-mask": no_factor_mask}


def parse_variant(name: str) -> dict[str, Any]:
    """``default``, ``split-scores``, ``multicast``, ``no-refill-barrier``,
    ``rotated``, ``no-row-sum``, ``no-factor-mask``, ``ex2-emulation:K``,
    ``integer-o[:check]`` or ``replicas:R[:turns][:stagger=C]``.

    Raises:
        ValueError: an unknown variant.
    """
    if name == "default" or name in PLAIN_REWRITES:
        return {"kind": name, "programs": 1}
    if name in ("integer-o", "integer-o:check"):
        return {"kind": "integer-o", "programs": 1, "check": name.endswith(":check")}
    parts = name.split(":")
    if parts[0] == "ex2-emulation" and len(parts) == 2 and parts[1].isdigit() \
            and int(parts[1]) > 0:
        return {"kind": "ex2-emulation", "programs": 1, "every": int(parts[1])}
    if parts[0] == "replicas" and len(parts) >= 2 and parts[1].isdigit() and int(parts[1]) > 1:
        spec = {"kind": "replicas", "programs": int(parts[1]), "turns": False, "stagger": 0}
        for part in parts[2:]:
            if part == "turns":
                spec["turns"] = True
            elif part.startswith("stagger=") and part[8:].isdigit():
                spec["stagger"] = int(part[8:])
            else:
                raise ValueError(f"unknown replicas option {part!r} in {name!r}")
        return spec
    raise ValueError(f"unknown variant {name!r} (default, {', '.join(PLAIN_REWRITES)}, "
                     "ex2-emulation:K, integer-o[:check], replicas:R[:turns][:stagger=C])")


def rewrite(ptx: str, spec: dict[str, Any]) -> str:
    """The variant's PTX."""
    if spec["kind"] in PLAIN_REWRITES:
        return PLAIN_REWRITES[spec["kind"]](ptx)
    if spec["kind"] == "ex2-emulation":
        return ex2_emulation(ptx, spec["every"])
    if spec["kind"] == "integer-o":
        return integer_o(ptx, spec["check"])
    if spec["kind"] == "replicas":
        return replicas(ptx, spec["programs"], spec["turns"], spec["stagger"])
    return ptx


def run_one(d: int, n: int, name: str, reference: Path) -> dict[str, Any]:
    """Times one variant in this process (set up before sage is imported)."""
    spec = parse_variant(name)
    # The plan tuner would time every candidate plan with the one rewritten
    # kernel and could launch it on another plan's grid: the default plan only.
    os.environ["SAGE_TUNE_ATTENTION"] = "0"
    if spec["kind"] != "default":
        from sass_census import Variant, variant_ptx  # noqa: PLC0415
        from sage.compiler.library import CompilerLibrary  # noqa: PLC0415

        ptx, _ = variant_ptx(Variant("sagebwd_forward", d), CompilerLibrary())
        folder = Path(tempfile.mkdtemp(prefix="sage-forward-variant-"))
        (folder / "sagebwd_forward.ptx").write_text(rewrite(ptx, spec))
        os.environ["SAGE_OVERRIDE_DIR"] = str(folder)
    import torch  # noqa: PLC0415

    import sage.kernels.sagebwd.torch_ops as ops  # noqa: PLC0415
    from forward_tiles import kernel_ms, median_ms  # noqa: PLC0415
    from sage.kernels.sagebwd.launch import default_tiles  # noqa: PLC0415

    programs = spec["programs"]
    if programs > 1:
        grids = ops.grids

        def replica_grids(*args: Any, **kwargs: Any) -> dict[str, tuple[int, ...]]:
            out = dict(grids(*args, **kwargs))
            first, *rest = out["sagebwd_forward"]
            if first % programs:
                raise ValueError(f"{first} query blocks are not a multiple of {programs} "
                                 "programs a CTA: choose --n accordingly")
            out["sagebwd_forward"] = (first // programs, *rest)
            return out

        ops.grids = replica_grids
    gen = torch.Generator(device="cuda").manual_seed(d)
    q, k, v = (torch.randn(4, 32, n, d, device="cuda", dtype=torch.bfloat16, generator=gen)
               for _ in range(3))

    tiles = default_tiles(d)

    def call() -> Any:
        return ops.forward(q, k, v, causal=False, tiles=tiles)

    # The clock and power of the timed calls (the sampler started first, so
    # that it samples by then; half a second of calls: the board heats up).
    with gpu_clocks.current_device_sampler(torch) as clocks:
        o = call()[0]
        if spec["kind"] == "default":
            torch.save(o, reference)
        expected = torch.load(reference).float()
        kernels = kernel_ms(call, calls=10)
        call_ms, call_clocks = median_ms(call, clocks, rep_ms=500)
    # O of the first call and of one after the timing, against the default's.
    diff = max(float((o.float() - expected).abs().max()),
               float((call()[0].float() - expected).abs().max()))
    return {"d": d, "n": n, "variant": name, "max_abs_diff_vs_default": diff,
            "call_ms": call_ms, "clocks": call_clocks, "forward_kernel_ms": next(
                t for key, t in kernels.items() if "sagebwd_forward" in key)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", type=Path, nargs="?", help="where the JSON results go")
    parser.add_argument("markdown", type=Path, nargs="?", help="where the markdown table goes")
    parser.add_argument("--d", type=int, default=128, choices=(64, 128))
    parser.add_argument("--n", type=int, default=6144,
                        help="tokens (B4 H32); replicas need the query blocks (N / 64) "
                             "to be a multiple of R")
    parser.add_argument("--variants", nargs="+", default=["default", "replicas:3"])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--reference", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for name in args.variants:
        parse_variant(name)
    if args.one:
        print(json.dumps(run_one(args.d, args.n, args.variants[0], args.reference)), flush=True)
        return 0
    if args.variants[0] != "default":
        parser.error("the first variant must be default (its O is the reference)")
    reference = Path(tempfile.mkdtemp(prefix="sage-forward-reference-")) / "o.pt"
    rows = []
    for repeat in range(args.repeats):
        for name in args.variants:
            out = subprocess.run([sys.executable, __file__, "--one", "--d", str(args.d),
                                  "--n", str(args.n), "--variants", name,
                                  "--reference", str(reference)],
                                 capture_output=True, text=True, timeout=300)
            line = next((x for x in out.stdout.splitlines() if x.startswith("{")), None)
            row = json.loads(line) if line else {"d": args.d, "n": args.n, "variant": name,
                                                 "error": out.stderr[-2000:]}
            row["repeat"] = repeat + 1
            rows.append(row)
            print(row, flush=True)
    headers = ["repeat", "variant", "forward kernel ms", "call ms", "SM MHz", "board W",
               "max abs(O - O_default)", "error"]
    table = [[r["repeat"], r["variant"], r.get("forward_kernel_ms"), r.get("call_ms"),
              gpu_clocks.cell(r.get("clocks")),
              None if not r.get("clocks") else f"{r['clocks']['power_w']:.0f}",
              r.get("max_abs_diff_vs_default"), (r.get("error") or "")[-120:]] for r in rows]
    results = {"environment": common.environment(), "rows": rows,
               "markdown": common.markdown_table(headers, table)}
    common.write_outputs(args.json, args.markdown, results,
                         f"Forward PTX experiments, B4 H32 N{args.n} D{args.d} bf16, non-causal"
                         f"\n\n{results['markdown']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
