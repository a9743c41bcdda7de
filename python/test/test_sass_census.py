"""bench/sass_census.py: the SASS parser, the loop detection and the counts on
hand-written listings (python/test/data/sass_census_*.sass), the ptxas -v
parser, and one end-to-end census of a real SageBwd kernel (ptxas and a
disassembler: cuobjdump, or nvdisasm from the nvidia-cuda-nvdisasm pip
package of python/requirements-dev.txt)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from repo_files import load_bench

from sage.kernels.sagebwd.launch import default_tiles
from sage.kernels.sagebwd.prepass import STATS_TILES

census = load_bench("sass_census")

DATA = Path(__file__).resolve().parent / "data"


def _function(name: str):
    (function,) = census.parse_sass((DATA / name).read_text())
    return function


def test_split_instruction():
    assert census.split_instruction("@!P0 MUFU.EX2 R1, R2") == ("@!P0", "MUFU.EX2", "R1, R2")
    assert census.split_instruction("@UPT BRA `(.L_x_1)") == ("@UPT", "BRA", "`(.L_x_1)")
    assert census.split_instruction("EXIT") == ("", "EXIT", "")


def test_parse_nvdisasm_listing():
    function = _function("sass_census_nvdisasm.sass")
    assert function.name == "sagebwd_forward"
    assert len(function.instructions) == 38
    assert [i.address for i in function.instructions] == list(range(0, 0x260, 0x10))
    by_address = {i.address: i for i in function.instructions}
    # Labels resolved to addresses, predicates split off.
    assert by_address[0x140].target == 0x50 and by_address[0x140].predicate == "@!P0"
    assert by_address[0x60].target == 0x1E0
    assert by_address[0x240].target == 0x240
    assert by_address[0x0B0].opcode == "F2I.S32.TRUNC.NTZ" and by_address[0x0B0].base == "F2I"
    assert by_address[0x150].target is None


def test_parse_cuobjdump_listing():
    function = _function("sass_census_cuobjdump.sass")
    assert function.name == "k_mean_kernel"
    assert len(function.instructions) == 10
    by_address = {i.address: i for i in function.instructions}
    assert by_address[0x60].target == 0x20 and by_address[0x60].operands == "0x20"
    assert by_address[0x50].target is None  # not a branch: its 0x10 is not a target
    (loop,) = census.find_loops(function)
    assert loop.header == 0x20 and loop.back_edges == (0x60,)
    assert sorted(loop.addresses) == [0x20, 0x30, 0x40, 0x50, 0x60]
    body = census.categorize(census.count_opcodes(
        i for i in function.instructions if i.address in loop.addresses))
    assert (body["FADD"], body["MUFU"], body["total"]) == (1, 0, 5)


def test_loops_are_natural_loops_of_back_edges():
    function = _function("sass_census_nvdisasm.sass")
    loops = census.find_loops(function)
    # Outermost first; the trap (BRA self after EXIT, unreachable) and the jumps
    # back from out-of-line blocks (0x200 -> 0x70, 0x230 -> 0x120) are not loops.
    assert [(loop.header, loop.back_edges, loop.size, loop.wait_loop) for loop in loops] == [
        (0x30, (0x190,), 29, False), (0x50, (0x140,), 22, False), (0x1E0, (0x1F0,), 2, True)]
    inner = loops[1]
    # The inner loop owns its out-of-line wait loop and slow path.
    assert {0x1E0, 0x1F0, 0x200, 0x210, 0x220, 0x230} <= inner.addresses
    assert not {0x30, 0x40, 0x150, 0x1A0, 0x240} & inner.addresses
    assert census.work_loops(loops) == [inner]


def test_counts_whole_and_loop_body():
    function = _function("sass_census_nvdisasm.sass")
    whole = census.categorize(census.count_opcodes(function.instructions))
    assert whole["total"] == 38
    assert (whole["MUFU"], whole["MUFU.EX2"], whole["MUFU.RCP"], whole["MUFU.LG2"]) == (3, 1, 1, 1)
    expected = dict(F2I=1, I2F=1, PRMT=1, FFMA=1, FMUL=1, FADD=0, STS=1, LDS=1, LDL=1, STL=1,
                    BAR=1, SHFL=1, HGMMA=1, IGMMA=0, HMMA=0, LDG=1, STG=1)
    assert {k: whole[k] for k in expected} == expected
    record = census.census_function(function, threads=256, dynamic_smem=1024,
                                    resources={"registers": 90},
                                    constexprs={"D": 128, "BLOCK_M": 64, "BLOCK_N": 32})
    body = record["loop_body"]
    assert body["total"] == 22
    assert (body["MUFU"], body["MUFU.EX2"], body["MUFU.LG2"], body.get("MUFU.RCP", 0)) == \
        (2, 1, 1, 0)
    loop_expected = dict(F2I=1, I2F=1, PRMT=1, FFMA=1, STS=1, LDS=1, LDL=0, STL=0, BAR=1,
                         SHFL=0, HGMMA=1)
    assert {k: body[k] for k in loop_expected} == loop_expected
    # Per score element: count x 256 threads / (64 x 32).
    assert record["per_element"]["MUFU"] == pytest.approx(2 * 256 / 2048)
    assert record["per_element"]["total"] == pytest.approx(22 / 8)
    assert "BLOCK_M * BLOCK_N = 2048" in record["per_element_formula"]
    assert record["registers"] == 90 and record["instructions"] == 38
    assert [loop["in_body"] for loop in record["loops"]] == [False, True, False]


def test_lane_loops_are_set_aside():
    """ptxas's per-lane TMA issue loop (ELECT, UTMALDG, BRA.U.ANY) inside the
    forward's key-block loop is no work loop: the key-block loop is the body (the
    2026-11-23 census picked the issue loops, 5 instructions each, with no MMA)."""
    function = _function("sass_census_lane_loop.sass")
    loops = census.find_loops(function)
    assert [(loop.header, loop.back_edges, loop.size, loop.wait_loop, loop.lane_loop)
            for loop in loops] == [
        (0x30, (0x1E0,), 31, False, False),  # key blocks, with the wait loop out of line
        (0x60, (0xA0,), 5, False, True),     # ELECT ... BRA.U.ANY
        (0x210, (0x220,), 2, True, False)]   # SYNCS.PHASECHK.TRANS64.TRYWAIT
    work = loops[0]
    assert {0x60, 0xA0, 0x210, 0x220, 0x230} <= work.addresses
    assert census.work_loops(loops) == [work]
    record = census.census_function(function, threads=128, dynamic_smem=0, resources={},
                                    constexprs={"D": 64, "BLOCK_M": 64, "BLOCK_N": 64})
    body = record["loop_body"]
    assert body["total"] == 31
    assert (body["IGMMA"], body["HGMMA"], body["MUFU.EX2"], body["FMUL"]) == (1, 1, 1, 1)
    assert [(loop["in_body"], loop["lane_loop"]) for loop in record["loops"]] == \
        [(True, False), (False, True), (False, False)]


def test_body_is_the_smallest_work_loop():
    """Two key loops one after the other (the SageBwd forward's mask-free loop
    and its masked loop, which runs once or twice a program): the census body
    is the smaller, the steady state, not their union; both are listed."""
    function = _function("sass_census_two_loops.sass")
    loops = census.find_loops(function)
    assert sorted((loop.header, loop.size) for loop in census.work_loops(loops)) == \
        [(0x30, 5), (0x80, 8)]
    record = census.census_function(function, threads=128, dynamic_smem=0, resources={},
                                    constexprs={"D": 64, "BLOCK_M": 64, "BLOCK_N": 64})
    assert (record["loop_body"]["total"], record["loop_body"]["FADD"]) == (5, 0)
    assert sorted((loop["header"], loop["work_loop"], loop["in_body"])
                  for loop in record["loops"]) == [("0x30", True, True), ("0x80", True, False)]


def _instructions(*lines: str):
    """SASS lines (``"@P1 BRA.U.ANY `(.L_x_1)"``) -> Instructions (no addresses or targets
    needed: :func:`is_lane_loop` looks at opcodes)."""
    out = []
    for text in lines:
        predicate, opcode, operands = census.split_instruction(text)
        out.append(census.Instruction(0, opcode, operands, predicate))
    return out


def test_lane_loop_needs_elect_any_back_edge_and_no_work():
    body = _instructions("@P1 ELECT P0, URZ, PT", "@!UP1 UTMALDG.3D [UR8], [UR34]",
                         "@P0 PLOP3.LUT P1, PT, P0, PT, PT, 0x8, 0x0",
                         "@P1 BRA.U.ANY `(.L_x_1)")
    assert census.is_lane_loop(body, body[-1:])
    # A plain (non-.ANY) back edge: a counted loop, e.g. a producer's, not a lane loop.
    plain = body[:-1] + _instructions("@!P3 BRA `(.L_x_1)")
    assert not census.is_lane_loop(plain, plain[-1:])
    # No ELECT, or work in the body: not a lane loop.
    assert not census.is_lane_loop(body[1:], body[-1:])
    work = body[:-1] + _instructions("FFMA R5, R24, R3, -R4", "@P1 BRA.U.ANY `(.L_x_1)")
    assert not census.is_lane_loop(work, work[-1:])
    assert not census.is_wait_loop(body)


def test_wait_loop_with_the_phase_moved_by_imad():
    """ptxas may move an mbarrier's phase into a register with IMAD.U32
    instead of MOV: the poll is still a wait loop, not the census's body (the
    2026-11-26 census of the D=64 forward took it for one)."""
    body = _instructions("IMAD.U32 R0, RZ, RZ, UR4",
                         "SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [UR14], R0", "@!P1 BRA `(.L_x_3)")
    assert census.is_wait_loop(body)
    work = body + _instructions("FFMA R5, R24, R3, -R4")
    assert not census.is_wait_loop(work)


def test_exponential_schedule():
    def body(*lines):
        out = []
        for k, text in enumerate(lines):
            predicate, opcode, operands = census.split_instruction(text)
            out.append(census.Instruction(0x10 * k, opcode, operands, predicate))
        return out
    loop = body("MUFU.EX2 R1, R2", "MUFU.EX2 R3, R4", "FADD R5, R6, R7",
                "STS [R10], R3", "F2FP.F16.F32.PACK_AB R8, R11, R1", "MUFU.EX2 R12, R13",
                "FADD R12, R14, R15")
    # R1 first read 4 instructions later (F2FP), R3 2 later (the store reads
    # it), R12 never: overwritten, not read.
    assert census.exponential_schedule(loop) == {
        "count": 3, "back_to_back": 1, "first_read_mean": 3.0, "first_read_min": 2}
    # A destination is not a read, nor a register whose name extends it.
    assert census.exponential_schedule(body("MUFU.EX2 R1, R2", "FADD R1, R10, R11")) == {
        "count": 1, "back_to_back": 0, "first_read_mean": None, "first_read_min": None}
    assert census.exponential_schedule(body("FADD R1, R2, R3")) is None


def test_parse_ptxas_log():
    log = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'sagebwd_backward' for 'sm_90a'
ptxas info    : Function properties for sagebwd_backward
    0 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 512 bytes smem, 720 bytes cmem[0]
ptxas info    : Compiling entry function 'k_mean_kernel' for 'sm_90a'
ptxas info    : Function properties for k_mean_kernel
    16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 40 registers, 400 bytes cmem[0]
"""
    assert census.parse_ptxas_log(log) == {
        "sagebwd_backward": dict(stack=0, spill_stores=8, spill_loads=12, registers=255,
                                 barriers=1, smem=512),
        "k_mean_kernel": dict(stack=16, spill_stores=0, spill_loads=0, registers=40,
                              barriers=0, smem=0)}


def test_variants_are_what_the_speed_benchmark_runs():
    variants = census.sagebwd_variants()
    assert len(variants) == 12
    names = [v.name for v in variants]
    assert names[:6] == ["quantize_kv_kernel-d64",
                         "sagebwd_forward-d64", "sagebwd_forward-d64-causal",
                         "sagebwd_backward_prepass-d64", "sagebwd_backward-d64",
                         "sagebwd_backward-d64-causal"]
    assert census.ELEMENTS["sagebwd_backward"].value({"BLOCK_M": 64, "BLOCK_N": 32}) == 2048


DISASSEMBLER = census.find_disassembler()


def _has_ptxas() -> bool:
    try:
        census.find_ptxas()
    except FileNotFoundError:
        return False
    return True


@pytest.mark.skipif(DISASSEMBLER is None or not _has_ptxas(),
                    reason="no ptxas (CUDA toolkit), or no cuobjdump or nvdisasm "
                    "(pip install -r python/requirements-dev.txt)")
def test_end_to_end_quantize_kv(library, tmp_path):
    """Compiles the K and V pre-pass kernel (D=64: a statistics loop, then the
    quantization loop over the program's key blocks) and runs the CLI."""
    out_json, out_md = tmp_path / "census.json", tmp_path / "census.md"
    status = census.main([str(out_json), str(out_md), "--d", "64", "--kernels", "quantize_kv",
                          "--sass-dir", str(tmp_path / "sass")])
    assert status == 0
    results = json.loads(out_json.read_text())
    assert results["errors"] == []
    (row,) = results["rows"]
    warps = default_tiles(64).warps("quantize_kv_kernel", fine_scales=True, smooth_q=False)
    assert row["variant"] == "quantize_kv_kernel-d64" and row["threads"] == 32 * warps
    assert row["registers"] > 0 and row["spill_stores"] == 0
    body = row["loop_body"]
    work = [loop for loop in row["loops"] if loop["work_loop"]]
    assert len(work) == 2 and sum(loop["in_body"] for loop in work) == 1
    # The body is the smaller, the statistics': K's sums (FADD) and V's
    # absolute maxima (FMNMX) of STATS_TILES tiles of each, nothing packed
    # (PRMT: the quantization's), no reciprocals, no exponentials.
    assert body["FADD"] > 0 and body["FMNMX"] > 0 and body.get("PRMT", 0) == 0
    assert body.get("MUFU", 0) == 0
    assert 0 < body["total"] < row["whole"]["total"]
    assert row["per_element"]["FADD"] == pytest.approx(body["FADD"] * 32 * warps
                                                       / (2 * STATS_TILES * 64 * 64))
    assert (tmp_path / "sass" / "quantize_kv_kernel-d64.sass").stat().st_size > 0
    assert results["disassembler"]["kind"] == DISASSEMBLER.kind
    assert "quantize_kv_kernel-d64" in out_md.read_text()


@pytest.mark.skipif(DISASSEMBLER is None or not _has_ptxas(),
                    reason="no ptxas (CUDA toolkit), or no cuobjdump or nvdisasm "
                    "(pip install -r python/requirements-dev.txt)")
def test_end_to_end_forward_copies_need_no_lane_loops(library, tmp_path):
    """The forward's copies are issued by an elected lane (CopyLeaders.h), so
    ptxas issues each once: no loop over the lanes that might issue it, in
    the kernel's main loop or anywhere (with a ``tid == 0`` predicate there
    were ten at D=128), and the default plan still fits its register cap
    with no spill inside a loop (Q^, stored for the backward after the key
    loop, is spilled once before it and reloaded once after it)."""
    out_json, out_md = tmp_path / "census.json", tmp_path / "census.md"
    sass_dir = tmp_path / "sass"
    status = census.main([str(out_json), str(out_md), "--d", "128", "--kernels",
                          "sagebwd_forward", "--sass-dir", str(sass_dir)])
    assert status == 0
    results = json.loads(out_json.read_text())
    assert results["errors"] == [] and len(results["rows"]) == 2
    for row in results["rows"]:
        assert row["loops"] and not [loop for loop in row["loops"] if loop["lane_loop"]]
        assert row["registers"] <= 168
        sass = (sass_dir / f"{row['variant']}.sass").read_text()
        assert census.local_memory_in_loops(sass) == 0, row["variant"]
        assert row["whole"]["IGMMA"] > 0
