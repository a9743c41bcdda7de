"""CPU tests of the torch-free parts of bench/attention_speed.py, bench/timing.py and
bench/common.py."""

from __future__ import annotations

import argparse
from types import SimpleNamespace

import pytest
from repo_files import load_bench


speed = load_bench("attention_speed")
common = load_bench("common")
timing = load_bench("timing")
gpu_clocks = load_bench("gpu_clocks")


def test_flops_follow_flash_attention():
    case = speed.AttentionCase(n=4096, d=128, causal=False)
    forward = 4 * 4 * 32 * 4096 ** 2 * 128
    assert speed.attention_flops(case, "fwd") == forward
    assert speed.attention_flops(case, "bwd") == 2.5 * forward
    assert speed.attention_flops(case, "fwdbwd") == 3.5 * forward
    causal = speed.AttentionCase(n=4096, d=128, causal=True)
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
    case = speed.AttentionCase(n=4096, d=64, causal=True)
    history = {("sage", 64, True, "bwd"): (1024, 2.0)}
    assert speed.project_ms(history, "sage", case, "bwd") == pytest.approx(32.0)
    assert speed.project_ms(history, "sage", case, "fwd") is None
    assert timing.speed_ratio(2.0, 1.0) == 0.5
    assert timing.speed_ratio(None, 1.0) is None


def _rounds(*medians):
    """Timer results of rounds with these medians (first_call_s: 2.0, then 0.01)."""
    return [{"ms": ms, "min_ms": ms - 0.1, "max_ms": ms + 0.5, "reps": 10 + i,
             "first_call_s": 2.0 if i == 0 else 0.01, "estimate_ms": ms}
            for i, ms in enumerate(medians)]


def test_median_of_rounds():
    out = timing.median_of_rounds(_rounds(7.4, 7.2, 7.3))
    assert out == {"ms": 7.3, "rounds_ms": [7.4, 7.2, 7.3], "min_ms": pytest.approx(7.1),
                   "max_ms": pytest.approx(7.9), "reps": 33, "first_call_s": 2.0}
    assert list(out) == ["ms", "rounds_ms", "min_ms", "max_ms", "reps", "first_call_s"]
    assert timing.median_of_rounds(_rounds(1.0, 2.0))["ms"] == 1.5  # even: the middle two
    one = timing.median_of_rounds(_rounds(3.0))
    assert one["ms"] == 3.0 and one["rounds_ms"] == [3.0] and one["reps"] == 10


class _FakeTimer:
    """Calls the function (it returns its name), records the order and returns a
    Timer result; raises at the ``fail``-th call."""

    def __init__(self, fail=None):
        self.order, self.fail = [], fail

    def __call__(self, fn):
        self.order.append(fn())
        if len(self.order) == self.fail:
            raise RuntimeError("out of memory")
        return _rounds(1.0 + len(self.order) / 100)[0]


class _FakeBudget:
    def __init__(self, seconds):
        self.seconds = seconds

    def fits(self, needed):
        return needed <= self.seconds

    def left(self):
        return self.seconds


def test_time_in_rounds(monkeypatch):
    freed = []
    monkeypatch.setattr(timing, "torch", SimpleNamespace(
        cuda=SimpleNamespace(empty_cache=lambda: freed.append(True))))
    options = SimpleNamespace(rounds=3, min_reps=10, max_reps=300, rep_ms=100.0)
    fns = {name: (lambda name=name: name) for name in ("a", "b", "c", "slow")}
    entries = {name: {"provider": name} for name in fns}
    # seen before at half the work: "slow" at 900 ms a call now, 3 x 12 calls: 33 s
    history = {"a": (50.0, 1.0), "slow": (50.0, 450.0)}
    timer, logs = _FakeTimer(fail=5), []
    timing.time_in_rounds("case1", 100.0, fns, entries, options, timer, _FakeBudget(30.0),
                          history, lambda rounds: {**timing.median_of_rounds(rounds),
                                                   "rate": 2.0}, ("rate", "X/s"), logs.append)
    assert entries["slow"] == {"provider": "slow", "skipped": "projected 33 s, 30 s left"}
    # reversed every other round; "b" fails at the fifth call and is not timed again
    assert timer.order == ["a", "b", "c", "c", "b", "a", "a", "c"]
    assert entries["b"] == {"provider": "b", "error": "RuntimeError: out of memory"}
    assert freed == [True] and list(fns) == ["a", "c"]
    assert entries["a"]["rounds_ms"] == pytest.approx([1.01, 1.06, 1.07])
    assert entries["c"]["rounds_ms"] == pytest.approx([1.03, 1.04, 1.08])
    assert entries["c"]["reps"] == 30 and entries["c"]["rate"] == 2.0
    assert history == {"a": (100.0, entries["a"]["ms"]), "c": (100.0, entries["c"]["ms"]),
                       "slow": (50.0, 450.0)}
    assert (entries["a"]["ms"], entries["c"]["ms"]) == pytest.approx((1.06, 1.04))
    assert logs == ["  case1 a: 1.0600 ms (2.0 X/s, rounds 1.0100, 1.0600, 1.0700)",
                    "  case1 c: 1.0400 ms (2.0 X/s, rounds 1.0300, 1.0400, 1.0800)"]


def test_verdicts_and_bars():
    assert timing.verdict(1.1, 1.1, True) == "PASS"
    assert timing.verdict(0.9499, 0.95, True) == "MISS"
    assert timing.verdict(2.0, 0.95, False) == "WRONG"
    assert timing.verdict(None, 1.1, True) == "-"
    ratio = {"case": "c", "sage": "s", "other": "o", "headline": True}
    ratios = [{**ratio, "verdict": "PASS"}, {**ratio, "verdict": "MISS", "headline": False},
              {**ratio, "headline": True}]  # judged: a verdict at the default plan only
    assert timing.bars_summary(ratios) == {"met": True, "judged": 1, "misses": []}
    assert timing.bars_summary([{**ratio, "verdict": "-"}]) == {
        "met": False, "judged": 1, "misses": ["c s/o: -"]}
    assert timing.bars_summary([]) == {"met": False, "judged": 0, "misses": []}


def test_check_cells():
    assert timing.check_cell({}) == "not checked"
    assert timing.check_cell({"check": {"ok": True, "reference": True}}) == "reference"
    assert timing.check_cell({"check": {"ok": True, "mismatches": 0,
                                        "max_abs_diff": 0}}) == "exact"
    assert timing.check_cell({"check": {"ok": False, "mismatches": 3,
                                        "max_abs_diff": 7}}) == "WRONG: 3 differ, max |diff| 7"
    assert timing.check_cell({"check": {"ok": True, "rel_l2": 2.3e-3, "tol": 1e-2}}) == \
        "rel-L2 2.3e-03 (tol 0.01)"
    assert timing.check_cell({"check": {"ok": False, "rel_l2": 0.5, "tol": 1e-2}}) == \
        "WRONG: rel-L2 5.0e-01 (tol 0.01)"
    assert timing.check_cell({"check": {"ok": False, "mismatch": "torch.float32 (4, 4)"}}) == \
        "WRONG: torch.float32 (4, 4)"


def test_parse_rounds_args(capsys):
    def parse(argv):
        parser = argparse.ArgumentParser()
        parser.add_argument("--first")
        return timing.parse_rounds_args(parser, argv, check_help="skip it", budget_s=9.0,
                                        rep_ms=5.0, min_reps=2, max_reps=4), parser

    options, parser = parse([])
    assert (options.rounds, options.check, options.budget_s, options.rep_ms, options.min_reps,
            options.max_reps) == (3, True, 9.0, 5.0, 2, 4)
    assert [a.dest for a in parser._actions][1:] == ["first", "rounds", "budget_s", "rep_ms",
                                                     "min_reps", "max_reps", "check"]
    options, _ = parse(["--rounds", "1", "--no-check"])
    assert options.rounds == 1 and not options.check
    with pytest.raises(SystemExit):
        parse(["--rounds", "0"])
    assert "--rounds must be at least 1" in capsys.readouterr().err


def test_variant_names():
    assert common.Variant("sage").name == "sage"
    assert common.Variant("sage", "128x64:2:8:v").name == "sage@128x64:2:8:v"
    assert common.Variant("sage") == common.Variant("sage", None)


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
    case = speed.AttentionCase(n=1024, d=64, causal=False)
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


def test_render_shows_the_clock_each_provider_ran_at():
    case = speed.AttentionCase(n=4096, d=128, causal=False)
    capped = {"sm_mhz": 1658.4, "min_sm_mhz": 1515, "power_w": 690.0, "power_capped": 1.0,
              "samples": 7}
    free = {"sm_mhz": 1980.0, "min_sm_mhz": 1980, "power_w": 580.0, "power_capped": 0.25,
            "samples": 4}
    row = {"case": case.name, "n": 4096, "d": 128, "causal": False, "batch": 4, "heads": 32,
           "providers": {"sage": {"fwd": {"ms": 1.0, "clocks": free}},
                         "cudnn": {"fwd": {"ms": 1.1, "clocks": capped}}}}
    text = speed.render([row], ("sage", "cudnn"), ("fwd",))
    assert "| sage MHz | cuDNN MHz |" in text
    assert text.splitlines()[2].endswith("| 1.10x | 1980 | 1658 cap |")
    # Without samples (no nvidia-smi) the cells stay empty.
    del row["providers"]["cudnn"]["fwd"]["clocks"]
    assert speed.render([row], ("sage", "cudnn"), ("fwd",)).splitlines()[2].endswith(
        "| 1980 | - |")


def test_clock_samples_parse_and_summarise():
    line = "1759, 664.01, 0x0000000000000004\n"
    sample = gpu_clocks.parse_sample(line, 3.0)
    assert sample == gpu_clocks.Sample(3.0, 1759.0, 664.01, 4)
    for bad in ("clocks.current.sm [MHz], power.draw [W], x", "[N/A], 70.5, 0x0", "1, 2"):
        assert gpu_clocks.parse_sample(bad, 0.0) is None
    samples = [gpu_clocks.Sample(1.0, 1900, 600, 0x0), gpu_clocks.Sample(2.0, 1700, 700, 0x4),
               gpu_clocks.Sample(3.0, 1600, 700, 0x84)]
    summary = gpu_clocks.summarise(samples)
    assert summary == {"sm_mhz": pytest.approx(1733.333, rel=1e-5), "min_sm_mhz": 1600,
                       "power_w": pytest.approx(666.667, rel=1e-5),
                       "power_capped": pytest.approx(2 / 3), "samples": 3}
    assert gpu_clocks.summarise([]) is None
    assert gpu_clocks.cell(summary) == "1733 cap" and gpu_clocks.cell(None) is None
    assert gpu_clocks.cell(gpu_clocks.summarise(samples[:2])) == "1800 cap"
    assert gpu_clocks.cell(gpu_clocks.summarise(samples[:1])) == "1900"
    sampler = gpu_clocks.ClockSampler()
    sampler.samples.extend(samples)
    assert sampler.window(1.5, 3.0)["samples"] == 2
    assert sampler.window(3.5, 4.0) is None


def test_clock_sampler_reads_nvidia_smi_in_the_background(monkeypatch, tmp_path):
    """A stand-in nvidia-smi that prints two samples (and its arguments to a
    file), then waits to be stopped."""
    fake = tmp_path / "nvidia-smi"
    fake.write_text('#!/bin/sh\necho "$@" > "$0.args"\necho "1755, 690.5, 0x0000000000000004"\n'
                    'echo "1980, 420.0, 0x0000000000000000"\nexec sleep 30\n')
    fake.chmod(0o755)
    monkeypatch.setattr(gpu_clocks.shutil, "which", lambda name: str(fake))
    start = gpu_clocks.time.perf_counter()
    with gpu_clocks.ClockSampler("GPU-1234", period_ms=50) as sampler:
        assert sampler.active
        deadline = start + 10
        while len(sampler.samples) < 2 and gpu_clocks.time.perf_counter() < deadline:
            gpu_clocks.time.sleep(0.01)
        window = sampler.window(start, gpu_clocks.time.perf_counter())
    assert not sampler.active
    assert window["samples"] == 2 and window["sm_mhz"] == pytest.approx(1867.5)
    assert window["power_capped"] == 0.5
    args = (tmp_path / "nvidia-smi.args").read_text().split()
    assert f"--query-gpu={gpu_clocks.QUERY}" in args and "--id=GPU-1234" in args
    assert "--loop-ms=50" in args


def test_the_sampler_of_torchs_current_device():
    """nvidia-smi's id of the device is "GPU-<uuid>"; without a UUID (an old
    torch) the sampler takes the first GPU."""
    def fake_torch(props):
        cuda = SimpleNamespace(current_device=lambda: 0,
                               get_device_properties=lambda index: props)
        return SimpleNamespace(cuda=cuda)
    sampler = gpu_clocks.current_device_sampler(fake_torch(SimpleNamespace(uuid="ab-12")))
    assert sampler.device == "GPU-ab-12" and sampler.period_ms == 20
    assert gpu_clocks.current_device_sampler(fake_torch(SimpleNamespace())).device is None


def test_clock_sampler_without_nvidia_smi_is_inactive(monkeypatch):
    monkeypatch.setattr(gpu_clocks.shutil, "which", lambda name: None)
    with gpu_clocks.ClockSampler("GPU-x") as sampler:
        assert not sampler.active
        assert sampler.window(0.0, float("inf")) is None


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
