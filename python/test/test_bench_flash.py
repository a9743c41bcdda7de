"""CPU tests of the torch-free parts of bench/flash_speed.py: cases and FLOPs, tile plans,
arguments, the speed ratios against issue #11's bar, and the markdown report; and its
float64 reference on CPU tensors."""

from __future__ import annotations

import argparse
import json

import pytest
from repo_files import load_bench

flash = load_bench("flash_speed")
common = load_bench("common")
timing = load_bench("timing")

HEAD, HEAD_CAUSAL, D64 = "d128-n8192-full", "d128-n8192-causal", "d64-n8192-full"
OTHER_PLAN = "sage@128x128:2:8:v"


def _row(case, ms, checks=None):
    """A result row of ``case`` (a FlashCase) with these provider times."""
    checks = checks or {}
    return {"case": case.name, **{f: getattr(case, f) for f in ("n", "d", "causal", "batch",
                                                               "heads")},
            "providers": {name: {"ms": t, "tflops": flash.tflops(case, t), "tiles": "t",
                                 **({"check": checks[name]} if name in checks else {})}
                          for name, t in ms.items()}}


def test_cases_and_flops():
    cases = flash.flash_cases()
    assert [c.name for c in cases] == [HEAD, HEAD_CAUSAL, D64, "d64-n8192-causal",
                                       "d128-n4096-full", "d128-n4096-causal",
                                       "d64-n4096-full", "d64-n4096-causal"]
    assert [c.headline for c in cases] == [True, True] + [False] * 6
    assert [c.name for c in flash.flash_cases(quick=True)] == ["d128-n4096-full",
                                                               "d128-n4096-causal"]
    full, causal = cases[:2]
    assert full.flops == 4 * 4 * 32 * 8192 ** 2 * 128 and causal.flops == full.flops / 2
    assert flash.tflops(full, 1.0) == pytest.approx(full.flops / 1e-3 / 1e12)
    assert flash.tflops(full, None) is None
    assert not flash.FlashCase(8192, 128, False, batch=1).headline
    pick = [c.name for c in cases if common.matches(c.name, ["d128-n8192", "*4096-causal"])]
    assert pick == [HEAD, HEAD_CAUSAL, "d128-n4096-causal", "d64-n4096-causal"]


def test_tile_plans():
    plan = flash.parse_tiles(" 128x64:3:8:r200")
    assert plan == {"block_m": 128, "block_n": 64, "stages": 3, "num_warps": 8,
                    "maxnreg": 200, "warp_specialize": False, "ping_pong": False,
                    "persistent": False, "tma_store": False}
    assert flash.tiles_spec(plan) == "128x64:3:8:r200"
    assert flash.parse_tiles("128x128:2:8:ws")["warp_specialize"]
    assert flash.tiles_spec(flash.parse_tiles("128x128:2:8:ws")) == "128x128:2:8:ws"
    assert flash.tiles_spec(flash.parse_tiles("128x128:2:8:ws:pp")) == "128x128:2:8:ws:pp"
    assert flash.parse_tiles("128x128:2:8:ws:ps")["persistent"]
    assert flash.tiles_spec(flash.parse_tiles("128x128:2:8:ws:pp:ps")) == \
        "128x128:2:8:ws:pp:ps"
    assert flash.tiles_spec(flash.parse_tiles("128x128:2:8")) == "128x128:2:8"
    assert flash.parse_tiles("128x128:2:8:ws:ts")["tma_store"]
    assert flash.tiles_spec(flash.parse_tiles("128x128:2:8:ws:ps:ts")) == "128x128:2:8:ws:ps:ts"
    for bad in ("128x128:2", "128x128x64:2:8", "128x128:2:8:t", "128x128:2:8:r", "axb:1:2",
                "128x128:2:8:vt"):
        with pytest.raises(ValueError, match="is not BMxBN:STAGES:WARPS"):
            flash.parse_tiles(bad)
    assert flash.sage_tiles_arg("128x64:2:8") == "128x64:2:8"
    assert flash.sage_tiles_arg(" none") == "none"
    with pytest.raises(argparse.ArgumentTypeError):
        flash.sage_tiles_arg("big")


def test_default_plans_are_the_librarys():
    pytest.importorskip("torch")
    from sage.kernels.flash.ops import TILES, FlashTiles
    for tiles in TILES.values():
        assert FlashTiles(**flash.parse_tiles(flash.tiles_spec(tiles.as_dict()))) == tiles
    for extra in flash.EXTRA_TILES:
        FlashTiles(**flash.parse_tiles(extra))  # a valid plan


def test_arguments():
    options = flash.parse_args(["o.json", "o.md"])
    assert options.providers == list(flash.PROVIDERS) and options.check
    assert options.sage_tiles == list(flash.EXTRA_TILES) and options.rounds == 3
    assert (options.budget_s, options.rep_ms, options.min_reps, options.max_reps) == \
        (300.0, 150.0, 5, 100)
    options = flash.parse_args(["o.json", "o.md", "--cases", "d128", "--no-check",
                                "--providers", "sage,cudnn", "--sage-tiles", "128x64:2:8",
                                "--sage-tiles", "128x64:2:8", "--rounds", "1"])
    assert options.cases == ["d128"] and not options.check and options.rounds == 1
    assert options.providers == ["sage", "cudnn"] and options.sage_tiles == ["128x64:2:8"]
    assert flash.parse_args(["o.json", "o.md", "--sage-tiles", "none"]).sage_tiles == []
    # :dm: the same plan with tensor maps built on the device.
    assert flash.parse_args(["o.json", "o.md", "--sage-tiles", "128x128:2:8:ws:dm"]
                            ).sage_tiles == ["128x128:2:8:ws:dm"]
    for argv in (["--providers", "sage,triton"], ["--rounds", "0"], ["--sage-tiles", "big"]):
        with pytest.raises(SystemExit):
            flash.parse_args(["o.json", "o.md", *argv])


def test_variants():
    names = [v.name for v in flash.variants(list(flash.PROVIDERS), ["128x128:2:8:v"])]
    assert names == ["sage", "cudnn", "flash", OTHER_PLAN]
    assert [v.name for v in flash.variants(["cudnn"], ["128x128:2:8:v"])] == ["cudnn"]


def test_summarize_takes_the_median_round():
    case = flash.flash_cases()[0]
    rounds = [{"ms": ms, "min_ms": ms - 0.1, "max_ms": ms + 0.5, "reps": 20,
               "first_call_s": s} for ms, s in ((7.4, 3.0), (7.2, 0.01), (7.3, 0.01))]
    out = flash.summarize(rounds, case)
    assert out["ms"] == 7.3 and out["rounds_ms"] == [7.4, 7.2, 7.3]
    assert out["min_ms"] == pytest.approx(7.1) and out["max_ms"] == pytest.approx(7.9)
    assert out["reps"] == 60 and out["first_call_s"] == 3.0
    assert out["tflops"] == pytest.approx(case.flops / 7.3e-3 / 1e12)


def test_ratios_and_bar():
    head, head_causal, d64 = flash.flash_cases()[:3]
    run = flash.variants(list(flash.PROVIDERS), ["128x128:2:8:v"])
    ms = {"sage": 8.0, "cudnn": 7.8, "flash": 10.0, OTHER_PLAN: 9.0}
    rows = [_row(head, ms), _row(head_causal, {**ms, "cudnn": 7.0}),
            _row(d64, {**ms, "cudnn": 4.0}, checks={"sage": {"ok": False}})]
    ratios = {(r["case"], r["sage"], r["other"]): r
              for row in rows for r in flash.comparisons(row, run)}
    assert len(ratios) == 3 * 4  # two sage variants vs cuDNN and flash
    first = ratios[(HEAD, "sage", "cudnn")]
    assert first["ratio"] == pytest.approx(7.8 / 8.0) and first["verdict"] == "PASS"
    assert first["at_least"] == 0.95 and first["headline"]
    assert ratios[(HEAD_CAUSAL, "sage", "cudnn")]["verdict"] == "MISS"
    # vs flash, at other plans and off the headline shape: ratios only
    assert "verdict" not in ratios[(HEAD, "sage", "flash")]
    assert ratios[(HEAD, "sage", "flash")]["ratio"] == pytest.approx(1.25)
    other = ratios[(HEAD, OTHER_PLAN, "cudnn")]
    assert "verdict" not in other and not other["headline"]
    assert "verdict" not in ratios[(D64, "sage", "cudnn")]
    summary = timing.bars_summary(list(ratios.values()))
    assert summary == {"met": False, "judged": 2,
                       "misses": [f"{HEAD_CAUSAL} sage/cudnn: MISS"]}
    assert timing.bars_summary([ratios[(HEAD, "sage", "cudnn")]])["met"]
    assert not timing.bars_summary([])["met"]
    wrong = _row(head, ms, checks={"cudnn": {"ok": False}})
    assert flash.comparisons(wrong, run)[0]["verdict"] == "WRONG"


def test_unmeasured_provider():
    head = flash.flash_cases()[0]
    row = _row(head, {"sage": 8.0, "flash": 10.0})
    row["providers"]["cudnn"] = {"error": "RuntimeError: no cuDNN"}
    ratios = flash.comparisons(row, flash.variants(list(flash.PROVIDERS), []))
    assert [(r["other"], r.get("verdict")) for r in ratios] == [("cudnn", "-"),
                                                               ("flash", None)]
    assert not timing.bars_summary(ratios)["met"]


def test_render():
    head = flash.flash_cases()[0]
    row = _row(head, {"sage": 8.0, "cudnn": 7.8},
               checks={"sage": {"ok": True, "rel_l2": 3e-3, "tol": 1e-2}})
    row["providers"]["flash"] = {"tiles": None, "error": "Boom: x"}
    row["providers"][OTHER_PLAN] = {"tiles": "128x128:2:8:v", "skipped": "projected 9 s"}
    run = flash.variants(list(flash.PROVIDERS), ["128x128:2:8:v"])
    ratios = flash.comparisons(row, run)
    text = flash.render([row], ratios, timing.bars_summary(ratios), checked=True)
    assert f"| {HEAD} | sage | t | 8.0000 | 549.8 | rel-L2 3.0e-03 (tol 0.01) |" in text
    assert f"| {HEAD} | flash | - | error | - | not checked |" in text
    assert f"| {HEAD} | {OTHER_PLAN} | 128x128:2:8:v | skipped | - | not checked |" in text
    assert f"| {HEAD} | sage | cudnn | 0.975x | >= 0.95x | PASS |" in text
    assert f"| {HEAD} | sage | flash | - | - | - |" in text
    assert "**Issue #11 bar: met** (1 judged)" in text
    assert f"- {HEAD} flash: Boom: x" in text and f"- {HEAD} {OTHER_PLAN}: projected 9 s" in text
    assert "not checked (`--no-check`)" not in text
    unchecked = flash.render([{"case": HEAD, "error": "OOM", "providers": {}}], [],
                             timing.bars_summary([]), checked=False)
    assert "**Outputs were not checked (`--no-check`).**" in unchecked
    assert "**Issue #11 bar: not met** (0 judged)" in unchecked and f"- {HEAD}: OOM" in unchecked


def test_reference_is_attention():
    """The float64 reference (run on CPU tensors here) against a direct softmax, in
    chunks of REF_HEADS slices (6 slices: a partial last chunk)."""
    torch = pytest.importorskip("torch")
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 40, 64, generator=gen).bfloat16() for _ in range(3))
    for causal in (False, True):
        s = q.double() @ k.double().transpose(-1, -2) / 8.0
        if causal:
            s = s.masked_fill(~torch.ones(40, 40, dtype=torch.bool).tril(), float("-inf"))
        want = torch.softmax(s, dim=-1) @ v.double()
        got = flash.reference((q, k, v), causal)
        assert got.shape == q.shape and got.dtype == torch.float64
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_without_gpu_the_run_fails_cleanly(tmp_path):
    torch = flash.torch
    if torch is not None and torch.cuda.is_available():
        pytest.skip("a GPU is present")
    out_json, out_md = tmp_path / "f.json", tmp_path / "f.md"
    assert flash.main([str(out_json), str(out_md), "--quick"]) == 1
    assert "Run failed" in out_md.read_text()
    results = json.loads(out_json.read_text())
    assert results["rows"] == [] and results["bars"]["met"] is False
    assert "commit" in results["environment"]
