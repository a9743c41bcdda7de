"""bench/forward_ptx_experiments.py: its variant names, and its rewrites of the
real SageBwd forward PTX (D=128, the default plan, compiled by the compiler
library): the launch header, the program id, shared-memory offsets, barriers
and turn protocol of the replicas, the two 64-key score groups and their
waits; each accepted by ptxas (sm_90a) where the CUDA toolkit is."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from sage.runtime import parse_kernel_header
from repo_files import load_bench

experiments = load_bench("forward_ptx_experiments")
census = load_bench("sass_census")

PTXAS = os.environ.get("SAGE_PTXAS") or shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"


@pytest.fixture(scope="module")
def forward_ptx(library) -> str:
    ptx, _ = census.variant_ptx(census.Variant("sagebwd_forward", 128), library)
    return ptx


def _assembles(ptx: str, tmp_path: Path) -> None:
    if not Path(PTXAS).exists():
        return  # only this step needs the CUDA toolkit
    path = tmp_path / "variant.ptx"
    path.write_text(ptx)
    out = subprocess.run([PTXAS, "-arch=sm_90a", str(path), "-o", str(tmp_path / "v.cubin")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr


def test_variant_names():
    assert experiments.parse_variant("default") == {"kind": "default", "programs": 1}
    assert experiments.parse_variant("multicast") == {"kind": "multicast", "programs": 1}
    assert experiments.parse_variant("ex2-emulation:4") == {"kind": "ex2-emulation",
                                                            "programs": 1, "every": 4}
    assert experiments.parse_variant("replicas:3:turns:stagger=1400") == {
        "kind": "replicas", "programs": 3, "turns": True, "stagger": 1400}
    for bad in ("replicas", "replicas:1", "replicas:3:fast", "replicas:3:stagger=x", "other",
                "ex2-emulation", "ex2-emulation:0", "magic-scores", "no-k-scale"):
        with pytest.raises(ValueError):
            experiments.parse_variant(bad)


def test_replicas(forward_ptx, tmp_path):
    threads, smem = map(int, re.search(r"threads=(\d+) shared_memory=(\d+)",
                                       forward_ptx).groups())
    ptx = experiments.replicas(forward_ptx, 3)
    stride = -(-smem // 1024) * 1024
    assert f"threads={3 * threads} shared_memory={3 * stride}" in ptx
    assert f".maxntid {3 * threads}, 1, 1" in ptx
    # Every CTA-wide barrier became the program's own (ids 1..3); no turns.
    assert "bar.sync \t0;" not in ptx and ptx.count(f"bar.sync \t%xb, {threads};") == \
        forward_ptx.count("bar.sync \t0;")
    assert "bar.arrive" not in ptx
    assert re.search(r"mad\.lo\.u32 \t%r\d+, %r\d+, 3, %xwg;", ptx)
    assert f"mul.wide.u32 \t%xo, %xwg, {stride};" in ptx
    assert "shfl.sync.idx.b32 \t%xwg, %xwg, 0, 31, -1;" in ptx
    _assembles(ptx, tmp_path)


def test_replicas_take_turns(forward_ptx, tmp_path):
    ptx = experiments.replicas(forward_ptx, 3, turns=True, stagger=700)
    threads = int(re.search(r"threads=(\d+)", forward_ptx).group(1))
    groups = len(experiments._score_groups(forward_ptx))
    assert groups >= 1
    # A turn taken and passed around every S group; the last program opens,
    # the first closes.
    assert ptx.count(f"bar.sync \t%xb, {2 * threads};") == groups
    assert ptx.count(f"bar.arrive \t%xb, {2 * threads};") == groups
    assert f"@%xp bar.arrive \t4, {2 * threads};" in ptx
    assert f"@%xp bar.sync \t4, {2 * threads};\n\tret;" in ptx
    assert "mul.wide.u32 \t%xd, %xwg, 700;" in ptx and "%clock64" in ptx
    _assembles(ptx, tmp_path)


def test_split_scores(forward_ptx, tmp_path):
    ptx = experiments.split_scores(forward_ptx)
    assert ptx.count("m64n64k32.s32.s8.s8") == 8
    assert ptx.count("m64n128k32.s32.s8.s8") == forward_ptx.count("m64n128k32.s32.s8.s8") - 4
    first = ptx.index("wgmma.wait_group.sync.aligned 1;")
    second = ptx.index("fence.acq_rel.cta;\n\twgmma.wait_group.sync.aligned 0;", first)
    # Work that needs only the first half runs between the waits: its
    # conversions, and nothing that reads the second half's registers.
    between = ptx[first:second]
    half = re.search(r"m64n64k32\.s32\.s8\.s8 \{([^}]*)\}", ptx)[1].replace(" ", "").split(",")
    sources = re.findall(r"cvt\.rn\.f32\.s32 \t%r\d+, (%r\d+);", between)
    assert sorted(source for source in sources if source in half) == sorted(half)
    _assembles(ptx, tmp_path)


@pytest.mark.parametrize("d", [64, 128])
def test_multicast(library, tmp_path, d):
    """Clusters of two: the mask-free loop's K^ copies issued by rank 0 and
    its V^T copies by rank 1, each multicast to both CTAs (its prologue's and
    its refills'); the CTA barriers before the refills and before the loop's
    barriers are invalidated become cluster barriers, and one follows the
    barriers' set-up; the masked loop's
    copies and the K scales stay each CTA's own."""
    ptx, _ = census.variant_ptx(census.Variant("sagebwd_forward", d), library)
    out = experiments.multicast(ptx)
    header = parse_kernel_header(out)["sagebwd_forward"]
    assert header.cluster == 2 and header.early_launch
    assert ".explicitcluster\n.reqnctapercluster 2, 1, 1" in out
    # The loop's copies in order, by map: K^ first (one box a tile), then V^T
    # (one box, or two for 256 keys at D=64).
    loop = ptx[:ptx.index("mbarrier.inval")]
    maps = re.findall(r"cp\.async\.bulk\.tensor[^\n]*\[(%rd\d+), \{", loop)
    expected = ["%xk" if m == maps[0] else "%xv" for m in maps]
    assert expected.count("%xk") == 2 and expected.count("%xv") in (2, 4)
    multicasts = re.findall(r"and\.pred \t%xq, sage_leader, (%x[kv]);\n\t@%xq "
                            r"cp\.async\.bulk\.tensor"
                            r"[^\n]*\.multicast::cluster [^\n]*, %xmask;", out)
    assert multicasts == expected
    # The refill's and the invalidation's CTA barriers become cluster
    # barriers, and one follows the mbarriers' set-up (the first copies
    # follow it with no CTA barrier between).
    assert out.count("barrier.cluster.arrive.aligned;") == 3
    assert out.count("bar.sync \t0;") == ptx.count("bar.sync \t0;") - 2
    setup = out.rindex("mbarrier.init", 0, out.index(".multicast::cluster"))
    assert out.index("barrier.cluster.arrive.aligned;", setup) < out.index(".multicast::cluster")
    # The masked loop's copies (after the first barrier invalidation) are
    # unchanged, and no copy of the K scales is multicast.
    rest = out.index("mbarrier.inval")
    assert "multicast" not in out[rest:]
    assert out[rest:] == ptx[ptx.index("mbarrier.inval"):]
    assert "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast" \
        not in out
    _assembles(out, tmp_path)


@pytest.mark.parametrize("d", [64, 128])
def test_no_refill_barrier(library, tmp_path, d):
    """The loops' refills (one a loop: the mask-free and the masked) lose the
    CTA barrier before them; the prologue's and the others stay."""
    ptx, _ = census.variant_ptx(census.Variant("sagebwd_forward", d), library)
    out = experiments.no_refill_barrier(ptx)
    assert out.count("bar.sync \t0;") == ptx.count("bar.sync \t0;") - 2
    first = re.search(r"wgmma\.mma_async[^\n]*\.s8\.s8", ptx).start()
    assert out[:first] == ptx[:first]
    # The masked loop's set-up (its barriers invalidated and initialised)
    # keeps its barrier.
    def before_masked(text: str) -> int:
        return text.count("bar.sync \t0;", 0, text.index("mbarrier.inval", first))
    assert before_masked(out) == before_masked(ptx) - 1
    assert experiments.parse_variant("no-refill-barrier") == {"kind": "no-refill-barrier",
                                                               "programs": 1}
    _assembles(out, tmp_path)


def test_rotated(library, tmp_path):
    """The D=64 main loop's O update moves under the next trip's S: one
    ``wait_group 1`` (in the loop), its P^ V^ and softmax twice (the loop
    and the peeled last trip), the O update twice, the refill moved from
    the loop's top into the body; ptxas keeps the wgmmas asynchronous."""
    ptx, _ = census.variant_ptx(census.Variant("sagebwd_forward", 64), library)
    out = experiments.rotated(ptx)
    assert experiments.parse_variant("rotated") == {"kind": "rotated", "programs": 1}
    assert "wait_group.sync.aligned 1;" not in ptx
    assert out.count("wait_group.sync.aligned 1;") == 1
    # The main loop's P^ V^ group once more (the peeled last trip).
    assert len(experiments._value_groups(out)) == len(experiments._value_groups(ptx)) + 1
    # Its S group once more (issued before the loop and in it).
    assert len(experiments._score_groups(out)) == len(experiments._score_groups(ptx)) + 1
    # O updates: in the loop and after it.
    fma = r"fma\.rn\.f32 \t(%r\d+), \1, "
    assert len(re.findall(fma, out)) == len(re.findall(fma, ptx)) + 32
    first = re.search(r"wgmma\.mma_async[^\n]*\.s8\.s8", ptx).start()
    assert out.index("$XLAST:") > first
    # The loop's refill follows the wait for the previous P^ V^.
    assert out.index("wait_group.sync.aligned 1;") < out.index("$XREFILLED1:")
    if Path(PTXAS).exists():
        path = tmp_path / "rotated.ptx"
        path.write_text(out)
        run = subprocess.run([PTXAS, "-arch=sm_90a", "-v", str(path), "-o",
                              str(tmp_path / "r.cubin")], capture_output=True, text=True,
                             timeout=300)
        assert run.returncode == 0, run.stderr
        assert "C7514" not in run.stderr, run.stderr  # wgmma not serialized


def test_bounds(library, tmp_path):
    """no-row-sum turns the main loop's dp4a into moves of their
    accumulators; no-factor-mask its factor truncations; nothing else."""
    ptx, _ = census.variant_ptx(census.Variant("sagebwd_forward", 64), library)
    start, end = experiments._main_loop(ptx)
    dp4a = ptx[start:end].count("dp4a.u32.u32")
    assert dp4a == 32  # 64 x 256 bytes over 128 threads, four a word
    out = experiments.no_row_sum(ptx)
    assert out.count("dp4a.u32.u32") == ptx.count("dp4a.u32.u32") - dp4a
    assert len(out) < len(ptx) and out[:start] == ptx[:start]
    masked = experiments.no_factor_mask(ptx)
    truncations = ptx.count(", -8;") - masked.count(", -8;")
    assert truncations >= 8 and masked[:ptx[:start].rfind("$L__BB")] == \
        ptx[:ptx[:start].rfind("$L__BB")]
    for name in ("no-row-sum", "no-factor-mask"):
        assert experiments.parse_variant(name) == {"kind": name, "programs": 1}
    _assembles(out, tmp_path)
    _assembles(masked, tmp_path)


def test_rewrites_name_what_they_miss(library):
    """PTX not of the shape a rewrite expects is refused, naming what is
    missing: no O update after the P^ V^ wait, no dp4a, no factor
    truncation (the D=128 forward has no biased scores)."""
    ptx, _ = census.variant_ptx(census.Variant("sagebwd_forward", 64), library)
    no_update = ptx.replace("cvt.rn.f32.s32", "cvt.rz.f32.s32")
    for rewrite in (experiments.rotated, experiments.integer_o):
        with pytest.raises(ValueError, match=r"expected 32 O updates after the P\^ V\^ "
                                             r"wait, found 0"):
            rewrite(no_update)
    with pytest.raises(ValueError, match="no dp4a in the main loop"):
        experiments.no_row_sum(ptx.replace("dp4a.u32.u32", "dp2a.lo.u32.u32"))
    d128, _ = census.variant_ptx(census.Variant("sagebwd_forward", 128), library)
    with pytest.raises(ValueError, match="no factor truncation in the main loop"):
        experiments.no_factor_mask(d128)


def test_split_scores_needs_d128(library):
    ptx, _ = census.variant_ptx(census.Variant("sagebwd_forward", 64), library)
    with pytest.raises(ValueError, match="D=128"):
        experiments.split_scores(ptx)


def test_ex2_emulation(forward_ptx, tmp_path):
    loop = experiments._score_groups(forward_ptx)[0].end()
    in_loop = forward_ptx[loop:forward_ptx.index("\twgmma.fence.sync.aligned;", loop)]
    exps = in_loop.count("ex2.approx.ftz.f32")
    ptx = experiments.ex2_emulation(forward_ptx, 4)
    assert ptx.count("ex2.approx.ftz.f32") == forward_ptx.count("ex2.approx.ftz.f32") - exps // 4
    assert ptx.count("mad.lo.s32") - forward_ptx.count("mad.lo.s32") == exps // 4
    _assembles(ptx, tmp_path)


def test_ex2_emulation_arithmetic():
    """The emitted sequence, replayed in float32: 2^x to 7.7e-5 above 2^-125,
    tiny and positive below (no sign carried in)."""
    np = pytest.importorskip("numpy")
    x = np.linspace(-300, 8, 200001).astype(np.float32)
    xc = np.maximum(x, np.float32(-126))
    t = (xc + np.float32(12582912)).astype(np.float32)
    f = (xc - (t - np.float32(12582912)).astype(np.float32)).astype(np.float32)
    c3, c2, c1, c0 = (np.float32(c) for c in experiments.EXP2_POLY)
    p = ((f * c3 + c2).astype(np.float32) * f + c1).astype(np.float32)
    p = (p * f + c0).astype(np.float32)
    out = (p.view(np.int32) + (t.view(np.int32) << 23)).view(np.float32)
    big = x > -125
    assert np.max(np.abs(out[big] / np.exp2(x[big].astype(np.float64)) - 1)) < 8e-5
    assert np.all(out[~big] >= 0) and np.all(out[~big] < 1e-37)


@pytest.mark.parametrize("check", [False, True])
def test_integer_o(forward_ptx, tmp_path, check):
    ptx = experiments.integer_o(forward_ptx, check)
    group = experiments._value_groups(ptx)[0]
    accumulator = re.search(r"s32\.u8\.s8 \{([^}]*)\}", group.group(1)).group(1).split(", ")
    # The first k-step accumulates: every k-step of the loop's P^ V^ reads
    # its registers, which start at 0 at the kernel's top.
    scale_d = re.search(r"setp\.ne\.b32 p, (%r\d+), 0;", group.group(1)).group(1)
    assert f"mov.b32 \t{scale_d}, 1;" in group.group(1)
    assert all(f"\tmov.b32 \t{a}, 0;\n" in ptx[:group.start()] for a in accumulator)
    # The trip still waits for P^ V^, but converts nothing after it: the
    # loop's conversions of the accumulator moved to the loop's exit.
    after = ptx[group.end():]
    assert after.startswith("\n\t// begin inline asm\n\twgmma.wait_group.sync.aligned 0;")
    body = after[:after.index("bra.uni")]
    assert "cvt.rn.f32.s32" not in body and "fma.rn.f32" not in body.split("@%xq")[0]
    assert sum("cvt.rn.f32.s32 \t%r" in line and line.endswith(f", {a};")
               for a in accumulator for line in after.split("\n")) == len(accumulator)
    assert ("vote.sync.any.pred" in ptx) == check
    assert ptx.count("shr.s32") - forward_ptx.count("shr.s32") == (len(accumulator) if check
                                                                     else 0)
    _assembles(ptx, tmp_path)


def test_integer_o_names():
    assert experiments.parse_variant("integer-o") == {"kind": "integer-o", "programs": 1,
                                                      "check": False}
    assert experiments.parse_variant("integer-o:check")["check"] is True
    with pytest.raises(ValueError):
        experiments.parse_variant("integer-o:fast")
