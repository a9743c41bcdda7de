"""The SageBwd forward's plan tuner on the GPU: every candidate plan gives
the same O and LSE bit for bit (they share the default's key block, the
granule of P~'s quantization, so the choice cannot change a result); the
first call of a problem tunes it, writes the winner to disk and returns what
the default plan returns; a fresh process state reads the winner back
without timing; a forward captured in a CUDA graph times nothing. Skipped
without a GPU (conftest)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch sees no CUDA device", allow_module_level=True)

from sage.jit.autotune_cache import FOLDER  # noqa: E402
from sage.kernels.sagebwd import torch_ops, tuning  # noqa: E402
from sage.kernels.sagebwd.launch import default_tiles  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_state(monkeypatch) -> None:
    """Tuning on, a new tuner and no plans kept."""
    for knob in ("SAGE_INTERPRET", "SAGE_AUTOTUNE_CACHE", "SAGE_TUNE_ATTENTION",
                 "SAGE_ALWAYS_COMPILE"):
        monkeypatch.delenv(knob, raising=False)
    monkeypatch.setattr(tuning, "TUNER", tuning.PlanTuner())
    monkeypatch.setattr(torch_ops, "_PLANS", {})


@pytest.fixture
def fresh(tmp_path, monkeypatch) -> Path:
    """A cache folder of its own (no winner from an earlier run; kernels
    compile again there)."""
    monkeypatch.setenv("SAGE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def inputs(d: int, n: int = 300, n_kv: int = 333, seed: int = 0):
    """GQA (4 query heads on 2 kv heads); N and N_kv not multiples of any block."""
    gen = torch.Generator(device="cuda").manual_seed(seed + d)
    return tuple(torch.randn(2, h, s, d, generator=gen, device="cuda", dtype=torch.bfloat16)
                 for h, s in ((4, n), (2, n_kv), (2, n_kv)))


def no_timing(*args, **kwargs):
    raise AssertionError("timed where the winner is known or nothing may be timed")


@pytest.mark.parametrize("d, causal, scales, smooth_q", [
    (64, False, "fine", False), (64, True, "fine", False), (128, False, "fine", False),
    (128, True, "fine", False), (128, True, "fine", True), (64, False, "block", False)])
def test_every_candidate_gives_the_same_o_and_lse(d, causal, scales, smooth_q):
    """The numerics do not depend on the plan: every candidate keeps the
    default's block_n, the granule of P~'s scales, so O and LSE are equal
    bit for bit (rows per program, warps, registers, the loop's order and the
    producer change the schedule only)."""
    q, k, v = inputs(d)
    tiles = default_tiles(d, smooth_q, scales == "fine", causal)
    plans = tuning.candidates(d, causal=causal, fine_scales=scales == "fine", smooth_q=smooth_q)
    results = []
    for plan in plans:
        o, lse, _ = torch_ops.forward(q, k, v, causal=causal, smooth_q=smooth_q, scales=scales,
                                      tiles=replace(tiles, forward=plan))
        results.append((plan, o, lse))
    _, o0, lse0 = results[0]
    assert torch.isfinite(o0.float()).all() and torch.isfinite(lse0).all()
    for plan, o, lse in results[1:]:
        assert torch.equal(o, o0), plan
        assert torch.equal(lse, lse0), plan


def test_the_first_call_tunes_writes_and_a_new_process_reads_back(fresh, monkeypatch):
    q, k, v = inputs(128, n=1000, n_kv=1000)
    default = default_tiles(128)
    o_default, lse_default, _ = torch_ops.forward(q, k, v, tiles=default)
    o, lse, saved = torch_ops.forward(q, k, v)
    made = tuning.TUNER.last
    assert made is not None and made.how.startswith("benchmarked in") and "written to" in \
        made.how, made
    assert min(ms for ms in made.record.timings if ms is not None) > 0
    assert saved.plan.tiles.forward_tiles(True, False) == made.winner
    # The backward's tiles are the default's; the result is the default plan's.
    assert (saved.plan.tiles.block_m, saved.plan.tiles.block_n, saved.plan.tiles.num_warps) == \
        (default.block_m, default.block_n, default.num_warps)
    assert torch.equal(o, o_default) and torch.equal(lse, lse_default)
    assert len(list((fresh / FOLDER).rglob("*.sage"))) == 1
    # A later call in this process: the kept plan.
    assert torch_ops.plan_of(q, k, causal=False, sm_scale=128 ** -0.5, smooth_k=True,
                             smooth_q=False, scales="fine", v=v) is saved.plan
    # A new process: the winner from disk, nothing timed.
    monkeypatch.setattr(tuning, "TUNER", tuning.PlanTuner())
    monkeypatch.setattr(torch_ops, "_PLANS", {})
    monkeypatch.setattr(torch_ops, "_forward_timer", no_timing)
    monkeypatch.setattr(tuning, "time_launch", no_timing)
    o2, _, saved2 = torch_ops.forward(q, k, v)
    assert tuning.TUNER.last.how.startswith("from ") and tuning.TUNER.last.winner == made.winner
    assert saved2.plan.tiles == saved.plan.tiles and torch.equal(o2, o)


def test_a_captured_forward_times_nothing(fresh, monkeypatch):
    q, k, v = inputs(64, n=256, n_kv=256)
    o_eager, _, _ = torch_ops.forward(q, k, v, tiles=default_tiles(64))  # compiles the kernels
    monkeypatch.setattr(torch_ops, "_forward_timer", no_timing)
    kept = dict(torch_ops._PLANS)  # the eager call's, with its explicit tiles
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o_captured, _, saved = torch_ops.forward(q, k, v)
    graph.replay()
    torch.cuda.synchronize()
    assert saved.plan.tiles == default_tiles(64) and torch.equal(o_captured, o_eager)
    assert tuning.TUNER.memory == {} and not list((fresh / FOLDER).rglob("*.sage"))
    assert torch_ops._PLANS == kept, "a plan a later call could tune is not kept"
