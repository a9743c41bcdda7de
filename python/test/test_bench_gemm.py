"""CPU tests of the torch-free parts of bench/gemm_speed.py: arguments, cases, tile plans,
the speed ratios against issue #11's bars, and the markdown report."""

from __future__ import annotations

import argparse
import json
import os

import pytest
from repo_files import load_bench

gemm = load_bench("gemm_speed")
common = load_bench("common")
timing = load_bench("timing")

SQUARE, SKINNY, BIG = "m4096-n4096-k4096", "m16384-n1024-k4096", "m8192-n8192-k8192"


def _row(case, ms, checks=None):
    """A result row of ``case`` (a GemmCase) with these provider times."""
    checks = checks or {}
    return {"case": case.name, "m": case.m, "n": case.n, "k": case.k,
            "providers": {name: {"ms": t, "tops": gemm.tops(case, t), "tiles": "t",
                                 **({"check": checks[name]} if name in checks else {})}
                          for name, t in ms.items()}}


def test_cases_and_selection():
    cases = gemm.gemm_cases()
    assert [c.name for c in cases] == [SQUARE, SKINNY, BIG]
    assert [c.square for c in cases] == [True, False, True]
    assert [c.name for c in gemm.gemm_cases(quick=True)] == [SQUARE]
    assert cases[1].ops == 2 * 16384 * 1024 * 4096
    pick = [c.name for c in cases if common.matches(c.name, ["m8192", "*-n1024-*"])]
    assert pick == [SKINNY, BIG]


def test_tile_plans():
    plan = gemm.parse_tiles(" 128x256x64:4:8")
    assert plan == {"block_m": 128, "block_n": 256, "block_k": 64, "stages": 4,
                    "num_warps": 8, "warp_specialize": False, "persistent": False,
                    "tma_store": False}
    assert gemm.tiles_spec(plan) == "128x256x64:4:8"
    specialised = gemm.parse_tiles("128x256x64:4:8:ws")
    assert specialised == {**plan, "warp_specialize": True}
    assert gemm.tiles_spec(specialised) == "128x256x64:4:8:ws"
    both = gemm.parse_tiles("128x256x64:4:8:ws:p")
    assert both == {**plan, "warp_specialize": True, "persistent": True}
    assert gemm.tiles_spec(both) == "128x256x64:4:8:ws:p"
    assert gemm.tiles_spec(gemm.parse_tiles("128x256x64:4:8:p")) == "128x256x64:4:8:p"
    assert gemm.parse_tiles("128x256x64:3:8:ws:p:ts")["tma_store"]
    assert gemm.tiles_spec(gemm.parse_tiles("128x256x64:3:8:ts")) == "128x256x64:3:8:ts"
    for bad in ("128x256:3:8", "128x256x128:3", "axbxc:1:2", "128x256x128:3:8:1",
                "128x256x128:3:8:wx", "128x256x128:3:8:p:ws"):
        with pytest.raises(ValueError):
            gemm.parse_tiles(bad)
    assert gemm.sage_tiles_arg("64x256x128:4:4") == ("int8", "64x256x128:4:4")
    assert gemm.sage_tiles_arg("bf16=128x128x64:5:8") == ("bf16", "128x128x64:5:8")
    assert gemm.sage_tiles_arg("bf16=128x256x64:4:8:ws") == ("bf16", "128x256x64:4:8:ws")
    for spec in ("128x256x128:3:8:ws", "128x256x128:3:8:p", "128x256x128:3:8:ts"):
        with pytest.raises(argparse.ArgumentTypeError, match="sage kernels"):
            gemm.triton_tiles_arg(spec)
    for bad in ("fp8=128x128x64:5:8", "bf16=128x128"):
        with pytest.raises(argparse.ArgumentTypeError):
            gemm.sage_tiles_arg(bad)
    assert gemm.parse_tiles(gemm.TRITON_TILES) == {"block_m": 128, "block_n": 256,
                                                   "block_k": 128, "stages": 3,
                                                   "num_warps": 8,
                                                   "warp_specialize": False,
                                                   "persistent": False,
                                                   "tma_store": False}


def test_arguments():
    options = gemm.parse_args(["o.json", "o.md"])
    assert options.providers == list(gemm.PROVIDERS) and options.check
    assert options.triton_tiles == gemm.TRITON_TILES and options.sage_tiles == []
    assert options.cases is None and options.rounds == 3 and options.group_m == gemm.GROUP_M
    options = gemm.parse_args(["o.json", "o.md", "--cases", "m4096, m8192", "--no-check",
                               "--providers", "sage-int8,torch-int8", "--sage-tiles",
                               "128x128x128:4:8", "--sage-tiles", "bf16=64x256x64:4:4",
                               "--triton-tiles", "128x128x128:4:4", "--rounds", "1"])
    assert options.cases == ["m4096", "m8192"] and not options.check
    assert options.sage_tiles == [("int8", "128x128x128:4:8"), ("bf16", "64x256x64:4:4")]
    assert options.triton_tiles == "128x128x128:4:4" and options.rounds == 1
    assert gemm.parse_args(["o.json", "o.md", "--sage-tiles", "bf16=64x256x64:4:4:ws:dm"]
                           ).sage_tiles == [("bf16", "64x256x64:4:4:ws:dm")]
    for argv in (["--providers", "sage-int8,cublas"], ["--rounds", "0"],
                 ["--sage-tiles", "big"], ["--triton-tiles", "128x256x128"]):
        with pytest.raises(SystemExit):
            gemm.parse_args(["o.json", "o.md", *argv])


def test_variants_and_tiles_used():
    names = [v.name for v in gemm.variants(
        ["sage-int8", "torch-int8", "sage-bf16", "torch-bf16"],
        [("int8", "64x256x128:4:4"), ("bf16", "128x128x64:4:8"), ("int8", "64x256x128:4:4")])]
    assert names == ["sage-int8", "torch-int8", "sage-bf16", "torch-bf16",
                     "sage-int8@64x256x128:4:4", "sage-bf16@128x128x64:4:8"]
    both = gemm.variants(["sage-int8", "sage-int8-f32"], [("int8", "64x256x128:4:4")])
    assert [v.name for v in both][2:] == ["sage-int8@64x256x128:4:4",
                                          "sage-int8-f32@64x256x128:4:4"]
    assert gemm.variants(["torch-int8"], [("int8", "64x256x128:4:4")]) == [
        gemm.Variant("torch-int8")]
    defaults = {"sage-int8": "128x256x128:3:8", "triton-int8": gemm.TRITON_TILES}
    assert gemm.tiles_used(gemm.Variant("sage-int8"), defaults) == "128x256x128:3:8"
    assert gemm.tiles_used(gemm.Variant("sage-int8", "1x2x3:4:5"), defaults) == "1x2x3:4:5"
    assert gemm.tiles_used(gemm.Variant("torch-int8"), defaults) is None


def test_summarize_takes_the_median_round():
    case = gemm.GemmCase(4096, 4096, 4096)
    rounds = [{"ms": ms, "min_ms": ms - 0.01, "max_ms": ms + 0.05, "reps": 100,
               "first_call_s": s} for ms, s in ((0.14, 2.5), (0.12, 0.001), (0.13, 0.001))]
    out = gemm.summarize(rounds, case)
    assert out["ms"] == 0.13 and out["rounds_ms"] == [0.14, 0.12, 0.13]
    assert out["min_ms"] == pytest.approx(0.11) and out["max_ms"] == pytest.approx(0.19)
    assert out["reps"] == 300 and out["first_call_s"] == 2.5
    assert out["tops"] == pytest.approx(2 * 4096 ** 3 / 0.13e-3 / 1e12)
    assert gemm.tops(case, 1.0) == pytest.approx(137.438953472)
    assert gemm.tops(case, None) is None


def test_ratios_and_bars():
    square, skinny, big = gemm.gemm_cases()
    over = gemm.Variant("sage-int8", "64x256x128:4:4")
    run = [gemm.Variant(p) for p in gemm.PROVIDERS] + [over]
    ms = {"sage-int8": 1.0, "sage-int8-f32": 1.05, "torch-int8": 1.2, "triton-int8": 1.0,
          "sage-bf16": 2.0, "torch-bf16": 1.9, over.name: 0.8}
    rows = [_row(square, ms), _row(skinny, {**ms, "torch-int8": 0.9}),
            _row(big, {**ms, "triton-int8": 0.95, "torch-bf16": 1.8},
                 checks={"sage-int8": {"ok": True}, "sage-bf16": {"ok": False}})]
    ratios = {(r["case"], r["sage"], r["other"]): r
              for row in rows for r in gemm.comparisons(row, run)}
    assert len(ratios) == 3 * 7  # sage-int8, -f32, the other plan: 2 each; bf16: 1
    first = ratios[(SQUARE, "sage-int8", "torch-int8")]
    assert first["ratio"] == pytest.approx(1.2) and first["verdict"] == "PASS"
    assert first["at_least"] == 1.1 and first["headline"]
    assert ratios[(SQUARE, "sage-int8", "triton-int8")]["verdict"] == "PASS"   # 1.0 >= 1.0
    bf16 = ratios[(SQUARE, "sage-bf16", "torch-bf16")]
    assert bf16["ratio"] == pytest.approx(0.95) and bf16["verdict"] == "PASS"
    # the INT8 bars are judged at the square shapes only, the bf16 one everywhere
    assert "verdict" not in ratios[(SKINNY, "sage-int8", "torch-int8")]
    assert ratios[(SKINNY, "sage-bf16", "torch-bf16")]["verdict"] == "PASS"
    assert ratios[(BIG, "sage-int8", "triton-int8")]["verdict"] == "MISS"
    assert ratios[(BIG, "sage-bf16", "torch-bf16")]["verdict"] == "WRONG"
    assert "verdict" not in ratios[(SQUARE, "sage-int8-f32", "torch-int8")]
    other_plan = ratios[(SQUARE, over.name, "torch-int8")]
    assert other_plan["ratio"] == pytest.approx(1.5) and not other_plan["headline"]
    summary = timing.bars_summary(list(ratios.values()))
    assert summary["judged"] == 7 and not summary["met"]
    assert summary["misses"] == [f"{BIG} sage-int8/triton-int8: MISS",
                                 f"{BIG} sage-bf16/torch-bf16: WRONG"]
    passing = [r for r in ratios.values() if r["case"] == SQUARE]
    assert timing.bars_summary(passing) == {"met": True, "judged": 3, "misses": []}
    assert not timing.bars_summary([])["met"]


def test_unmeasured_comparator_misses_the_bar():
    square = gemm.gemm_cases()[0]
    row = _row(square, {"sage-int8": 1.0, "torch-int8": 1.2})
    row["providers"]["triton-int8"] = {"skipped": "triton is not importable"}
    run = [gemm.Variant(p) for p in ("sage-int8", "torch-int8", "triton-int8")]
    ratios = gemm.comparisons(row, run)
    assert [(r["other"], r["verdict"]) for r in ratios] == [("torch-int8", "PASS"),
                                                          ("triton-int8", "-")]
    assert not timing.bars_summary(ratios)["met"]


def test_render():
    square = gemm.gemm_cases()[0]
    row = _row(square, {"sage-int8": 0.125, "torch-int8": 0.15},
               checks={"sage-int8": {"ok": True, "mismatches": 0, "max_abs_diff": 0}})
    row["providers"]["triton-int8"] = {"tiles": gemm.TRITON_TILES, "error": "Boom: x"}
    run = [gemm.Variant(p) for p in ("sage-int8", "torch-int8", "triton-int8")]
    ratios = gemm.comparisons(row, run)
    text = gemm.render([row], ratios, timing.bars_summary(ratios), checked=True)
    assert f"| {SQUARE} | sage-int8 | t | 0.1250 | 1099.5 | exact |" in text
    assert f"| {SQUARE} | triton-int8 | {gemm.TRITON_TILES} | error | - | not checked |" in text
    assert f"| {SQUARE} | sage-int8 | torch-int8 | 1.200x | >= 1.1x | PASS |" in text
    assert f"| {SQUARE} | sage-int8 | triton-int8 | - | >= 1.0x | - |" in text
    assert "**Issue #11 bars: not met** (2 judged; " in text
    assert f"- {SQUARE} triton-int8: Boom: x" in text
    assert "not checked (`--no-check`)" not in text
    unchecked = gemm.render([], [], timing.bars_summary([]), checked=False)
    assert "**Outputs were not checked (`--no-check`).**" in unchecked
    assert "**Issue #11 bars: not met** (0 judged)" in unchecked


def test_without_gpu_the_run_fails_cleanly(tmp_path):
    torch = gemm.torch
    if torch is not None and torch.cuda.is_available():
        pytest.skip("a GPU is present")
    out_json, out_md = tmp_path / "g.json", tmp_path / "g.md"
    assert gemm.main([str(out_json), str(out_md), "--quick"]) == 1
    assert "Run failed" in out_md.read_text()
    results = json.loads(out_json.read_text())
    assert results["rows"] == [] and results["bars"]["met"] is False
    assert "commit" in results["environment"]


def test_default_plans_are_the_libraries():
    pytest.importorskip("torch")
    from sage.kernels.gemm.ops import HALF_TILES, INT8_TILES
    defaults = gemm.default_tiles("64x64x64:2:4")
    grouped = {"group_m": gemm.GROUP_M}
    assert {**gemm.parse_tiles(defaults["sage-int8"]), **grouped} == INT8_TILES.as_dict()
    assert defaults["sage-int8-f32"] == defaults["sage-int8"]
    assert {**gemm.parse_tiles(defaults["sage-bf16"]), **grouped} == HALF_TILES.as_dict()
    assert defaults["triton-int8"] == "64x64x64:2:4" and "torch-int8" not in defaults


def test_device_maps_wrapper(monkeypatch):
    """``:dm`` plans run with SAGE_TENSOR_MAPS=device, and only while they run."""
    import common  # noqa: PLC0415  (bench/common.py, on the path through the bench modules)

    monkeypatch.delenv("SAGE_TENSOR_MAPS", raising=False)
    assert common.split_device_maps("128x128x64:4:8:dm") == ("128x128x64:4:8", True)
    assert common.split_device_maps("128x128x64:4:8") == ("128x128x64:4:8", False)
    seen = common.with_tensor_maps(lambda: os.environ.get("SAGE_TENSOR_MAPS"), True)()
    assert seen == "device" and "SAGE_TENSOR_MAPS" not in os.environ
    monkeypatch.setenv("SAGE_TENSOR_MAPS", "host")
    assert common.with_tensor_maps(lambda: os.environ["SAGE_TENSOR_MAPS"], True)() == "device"
    assert os.environ["SAGE_TENSOR_MAPS"] == "host"
    assert common.with_tensor_maps(lambda: os.environ["SAGE_TENSOR_MAPS"], False)() == "host"
