"""bench/stall_profile.py on a small hand-written Nsight Compute source-page
export: the kernel blocks, the hot loop found from execution counts, the
segments at wgmma waits, the opcode and hottest-instruction tables, the
command line."""

from __future__ import annotations

import json

import pytest
from repo_files import load_bench

stalls = load_bench("stall_profile")

HEADER = ('"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed",'
          '"stall_barrier","stall_selected","stall_wait","stall_barrier (Not Issued)"')


def _row(address, source, executed, barrier=0, selected=0, wait=0):
    samples = barrier + selected + wait
    return (f'"{address}","{source}","{samples:,}","{executed:,}","{barrier}","{selected}",'
            f'"{wait}","{barrier}"')


# A prologue run once, a loop of five instructions run 1000 times (an
# instruction inside it, a slow path, runs 3 times), an epilogue.
ROWS = [
    _row("0x00", "S2R R0, SR_TID.X", 1, selected=1),
    _row("0x10", "IGMMA.64x128x32.S8.S8 R24, gdesc[UR16], RZ", 1000, selected=10, wait=4),
    _row("0x20", "WARPGROUP.DEPBAR.LE gsb0, 0x0", 1000, barrier=50, selected=2),
    _row("0x30", "@P0 BRA 0x80", 3, selected=1),
    _row("0x40", "MUFU.EX2 R1, R2", 1000, selected=5, wait=20),
    _row("0x50", "FADD R3, R1, R4", 1000, selected=8),
    _row("0x60", "WARPGROUP.DEPBAR.LE gsb0, 0x0", 1000, barrier=30),
    _row("0x70", "STG.E [R6], R3", 1, selected=1),
]
EXPORT = "\n".join(['"Kernel Name","sagebwd_forward",', HEADER, *ROWS,
                    '"Kernel Name","other_kernel",', HEADER, _row("0x00", "EXIT", 1, selected=3)])


def test_kernel_blocks_and_numbers():
    kernels = stalls.split_kernels(EXPORT)
    assert [name for name, _ in kernels] == ["sagebwd_forward", "other_kernel"]
    rows = kernels[0][1]
    assert len(rows) == 8 and stalls.number(rows[2], stalls.SAMPLES) == 52
    assert stalls.number(rows[0], "absent column") == 0
    assert stalls.opcode("@P0 BRA 0x80") == "BRA"
    assert stalls.opcode("WARPGROUP.DEPBAR.LE gsb0, 0x0") == "WARPGROUP.DEPBAR"
    assert stalls.opcode("IGMMA.64x128x32.S8.S8 R24") == "IGMMA"
    # The (Not Issued) copy of a reason is not counted twice.
    assert stalls.reasons(rows[2]) == {"barrier": 50, "selected": 2}


def test_summary():
    s = stalls.summarize("sagebwd_forward", stalls.split_kernels(EXPORT)[0][1], top=3)
    total = 1 + 14 + 52 + 1 + 25 + 8 + 30 + 1
    assert s["samples"] == total
    assert s["loop"] == {"rows": "1-6", "instructions": 6, "executions": 1000,
                         "samples_pct": round(100 * (total - 2) / total, 1)}
    # Segments: the IGMMA, its wait, the work (the slow path inside), the
    # second wait.
    assert [(g["instructions"], g["wgmma_wait"]) for g in s["segments"]] == [
        ("0-0", False), ("1-1", True), ("2-4", False), ("5-5", True)]
    assert s["segments"][1]["samples_pct"] == round(100 * 52 / total, 1)
    assert s["segments"][2]["issuing_pct"] == round(100 * (1 + 5 + 8) / total, 1)
    assert [o["opcode"] for o in s["opcodes"]] == ["WARPGROUP.DEPBAR", "MUFU", "IGMMA"]
    assert s["opcodes"][0]["count"] == 2
    assert s["hottest"][0]["source"].startswith("WARPGROUP.DEPBAR") and \
        s["hottest"][0]["index"] == 1
    assert s["loop_reasons_pct"]["barrier"] == round(100 * 80 / (total - 2), 1)


def test_no_executed_rows():
    rows = stalls.split_kernels('"Kernel Name","k",\n' + HEADER + "\n"
                                + _row("0x0", "NOP", 0))[0][1]
    s = stalls.summarize("k", rows)
    assert s["loop"]["instructions"] == 0 and s["segments"] == []


def test_command_line(tmp_path, capsys):
    export = tmp_path / "sass.csv"
    export.write_text(EXPORT)
    out_json, out_md = tmp_path / "s.json", tmp_path / "s.md"
    assert stalls.main([str(out_json), str(out_md), "--csv", str(export),
                        "--kernel", "sagebwd"]) == 0
    assert [k["kernel"] for k in json.loads(out_json.read_text())["kernels"]] == \
        ["sagebwd_forward"]
    text = out_md.read_text()
    assert text.startswith("## sagebwd_forward") and "**wait** WARPGROUP.DEPBAR" in text
    assert stalls.main(["-", "-", "--csv", str(export)]) == 0
    assert capsys.readouterr().out.count("## ") == 2
    with pytest.raises(SystemExit):
        stalls.main(["-", "-", "--csv", str(export), "--kernel", "nothing"])
