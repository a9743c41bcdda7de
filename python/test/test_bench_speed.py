"""CPU tests of the torch-free parts of bench/attention_speed.py, bench/timing.py and
bench/common.py."""

from __future__ import annotations

import pytest
from repo_files import load_bench


speed = load_bench("attention_speed")
common = load_bench("common")
timing = load_bench("timing")


def test_flops_follow_flash_attention():
    case = speed.SpeedCase(n=4096, d=128, causal=False)
    forward = 4 * 4 * 32 * 4096 ** 2 * 128
    assert speed.attention_flops(case, "fwd") == forward
    assert speed.attention_flops(case, "bwd") == 2.5 * forward
    assert speed.attention_flops(case, "fwdbwd") == 3.5 * forward
    causal = speed.SpeedCase(n=4096, d=128, causal=True)
    assert speed.attention_flops(causal, "fwd") == forward / 2
    assert speed.tflops(case, "fwd", 1.0) == pytest.approx(forward / 1e-3 / 1e12)
    assert speed.tflops(case, "fwd", None) is None


def test_cases_grid_and_filter():
    cases = speed.speed_cases()
    assert len(cases) == 12 and [c.n for c in cases] == sorted(c.n for c in cases)
    assert {c.name for c in cases} >= {"d64-n1024-full", "d128-n16384-causal"}
    pick = [c.name for c in cases if common.matches(c.name, ["d128-n4096", "*16384-causal"])]
    assert pick == ["d128-n4096-full", "d128-n4096-causal", "d64-n16384-causal",
                    "d128-n16384-causal"]
    assert all(common.matches(c.name, None) for c in cases)
    assert common.split_patterns(" a, b ,,") == ["a", "b"]


def test_projection_and_ratio():
    case = speed.SpeedCase(n=4096, d=64, causal=True)
    history = {("sage", 64, True, "bwd"): (1024, 2.0)}
    assert speed.project_ms(history, "sage", case, "bwd") == pytest.approx(32.0)
    assert speed.project_ms(history, "sage", case, "fwd") is None
    assert timing.speed_ratio(2.0, 1.0) == 0.5
    assert timing.speed_ratio(None, 1.0) is None


def test_rel_l2():
    torch = pytest.importorskip("torch")
    ref = torch.tensor([3.0, 4.0], dtype=torch.float64)
    assert timing.rel_l2(torch.tensor([3.0, 4.5], dtype=torch.bfloat16), ref) == \
        pytest.approx(0.1)
    assert timing.rel_l2(ref, ref) == 0.0


def test_command_line():
    options = speed.parse_args(["o.json", "o.md"])
    assert options.passes == list(speed.PASSES) and options.providers == list(speed.PROVIDERS)
    assert (options.budget_s, options.max_call_s, options.rep_ms, options.min_reps,
            options.max_reps) == (330.0, 5.0, 150.0, 3, 100)
    assert options.cases is None and not options.quick and options.check
    options = speed.parse_args(["o.json", "o.md", "--quick", "--cases", "d64,*-causal",
                                "--passes", "fwd", "--providers", "sage,flash", "--no-check"])
    assert options.quick and options.cases == ["d64", "*-causal"] and not options.check
    assert options.passes == ["fwd"] and options.providers == ["sage", "flash"]
    for argv in (["--passes", "fwd,back"], ["--providers", "sage,xformers"]):
        with pytest.raises(SystemExit):
            speed.parse_args(["o.json", "o.md", *argv])


def test_report_header():
    results = {"argv": ["o.json", "o.md", "--quick"], "elapsed_s": 12.4,
               "environment": {"date_utc": "DATE", "commit": "abc", "torch": "2.9",
                               "triton": "3.5"}}
    assert common.report_header(results, "Speed", "x.py", versions=("torch", "cudnn", "triton"),
                                command_note="(note)") == (
        "## Speed (DATE, -, torch 2.9, cuDNN -, Triton 3.5, commit abc, 12 s)\n\n"
        "Command: `python3 bench/x.py o.json o.md --quick` (note)")


def test_derived_backward_and_render():
    case = speed.SpeedCase(n=1024, d=64, causal=False)
    entry = {"fwd": {"ms": 1.0}, "bwd": {"error": "RuntimeError: freed"},
             "fwdbwd": {"ms": 3.5}}
    speed.derive_backward(entry, case)
    assert entry["bwd"]["ms"] == 2.5 and entry["bwd"]["derived"]
    row = {"case": case.name, "n": 1024, "d": 64, "causal": False, "batch": 4, "heads": 32,
           "providers": {"sage": entry,
                         "cudnn": {"fwd": {"ms": 0.5}, "bwd": {"ms": 1.0},
                                   "fwdbwd": {"ms": 1.5}},
                         "flash": {"fwd": {"skipped": "projected"}, "bwd": {"error": "x"},
                                   "fwdbwd": {"ms": 3.0}}}}
    text = speed.render([row], speed.PROVIDERS, speed.PASSES)
    assert "| d64-n1024-full | forward | 1.000 | 0.500 | skipped |" in text
    assert "2.500*" in text and "0.50x" in text and "0.86x" in text
    assert "flash fwd: projected" in text


def test_common_table_and_budget():
    table = common.markdown_table(["a", "b"], [["x", 0.0123456], ["y", None]])
    assert table.splitlines()[1] == "| --- | ---: |"
    assert "| x | 0.01235 |" in table and "| y | - |" in table
    with pytest.raises(ValueError):
        common.markdown_table(["a"], [[1, 2]])
    budget = common.Budget(100)
    assert budget.fits(50) and not budget.fits(1000)


def test_speed_without_gpu_reports_and_fails_cleanly(tmp_path):
    if speed.torch is not None:
        pytest.skip("torch is installed here")
    out_json, out_md = tmp_path / "s.json", tmp_path / "s.md"
    assert speed.main([str(out_json), str(out_md), "--quick"]) == 1
    assert "Run failed" in out_md.read_text()
