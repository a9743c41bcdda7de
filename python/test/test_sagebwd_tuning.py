"""The SageBwd forward's plan tuner on the CPU: the candidate plans, the
tuning key and its buckets, the memory and disk caches of winners with an
injected timer, the off knob, the situations where nothing is timed
(CUDA graph capture, torch.compile tracing, fake, meta and symbolic
tensors, the interpreter, the backward's plan), failing candidates and
failed tunings, and bench/tune_attention.py's torch-free parts.

Tensors that must look like CUDA tensors are CPU tensors whose ``is_cuda``
and ``get_device`` say cuda:0 (as in test_host_fast_path); the timer of the
candidates (``torch_ops._forward_timer``) is replaced by one that returns
given times, so nothing is launched."""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from repo_files import load_bench  # noqa: E402

from sage.compiler.library import CompilationError  # noqa: E402
from sage.jit import AutotuneError  # noqa: E402
from sage.jit.autotune_cache import FOLDER, FileCache  # noqa: E402
from sage.jit.knobs import KnobError, knobs  # noqa: E402
from sage.kernels.sagebwd import torch_ops, tuning  # noqa: E402
from sage.kernels.sagebwd.launch import ForwardTiles, Shape, Tiles, default_tiles  # noqa: E402
from sage.kernels.sagebwd.tuning import PlanTuner, Problem, Situation  # noqa: E402

CASES = [(d, causal, fine, smooth_q) for d in (64, 128) for causal in (False, True)
         for fine in (True, False) for smooth_q in (False, True)]


@pytest.fixture(autouse=True)
def fresh(tmp_path, monkeypatch) -> Path:
    """No knob set, a cache folder of its own, a new tuner and no plans
    kept; fixed device and compiler identities (no GPU here)."""
    for knob in knobs.all():
        monkeypatch.delenv(knob.env, raising=False)
    monkeypatch.setenv("SAGE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(tuning, "TUNER", PlanTuner())
    monkeypatch.setattr(torch_ops, "_PLANS", {})
    monkeypatch.setattr(tuning, "device_identity",
                        lambda device: {"kind": "cuda", "name": "Test GPU", "capability": "9.0"})
    monkeypatch.setattr(tuning, "compiler_identity", lambda interpreting: {"compiler": "test"})
    return tmp_path / "cache"


def entries(cache: Path) -> list[Path]:
    return sorted((cache / FOLDER).rglob("*.sage"))


class Timing:
    """The injected timer: ``prepare()`` (what torch_ops' pre-pass does once
    per tuning) returns ``time``, which reports ``times[i]`` ms for the i-th
    candidate of the problem, or raises ``errors[i]``."""

    def __init__(self, *times: float, errors: dict[int, Exception] | None = None):
        self.times, self.errors = list(times), errors or {}
        self.prepared, self.timed = 0, []
        self.plans: tuple[ForwardTiles, ...] = ()

    def prepare(self):
        self.prepared += 1
        return self.time

    def time(self, plan: ForwardTiles) -> float:
        self.timed.append(plan)
        index = len(self.timed) - 1
        if index in self.errors:
            raise self.errors[index]
        return self.times[index]

    def forward_timer(self, plan, q, k, v):
        """``torch_ops._forward_timer``'s stand-in."""
        self.plans = tuning.candidates(plan.shape.d, causal=plan.causal,
                                       fine_scales=plan.fine, smooth_q=plan.smooth_q)
        return self.prepare()


def never(*args, **kwargs):
    raise AssertionError("timed where nothing may be timed")


class Devices:
    """Two stand-in CUDA devices: the current one (``torch.cuda.device``
    switches it) and whether a graph is captured on one's current stream
    (``capturing``: 0, 1 or None)."""

    def __init__(self):
        self.current, self.capturing = 0, None

    @contextlib.contextmanager
    def device(self, index: int):
        previous, self.current = self.current, index
        try:
            yield
        finally:
            self.current = previous

    def is_current_stream_capturing(self) -> bool:
        return self.capturing == self.current


@pytest.fixture
def cuda(monkeypatch) -> Devices:
    """CPU tensors look like tensors on cuda:0, the current device, where no
    graph is captured."""
    devices = Devices()
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
    monkeypatch.setattr(torch.Tensor, "get_device", lambda self: 0)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing",
                        devices.is_current_stream_capturing)
    monkeypatch.setattr(torch.cuda, "device", devices.device)
    return devices


def qkv(b=2, h=4, hkv=2, n=1000, n_kv=1000, d=128, dtype=torch.bfloat16):
    return (torch.zeros(b, h, n, d, dtype=dtype), torch.zeros(b, hkv, n_kv, d, dtype=dtype),
            torch.zeros(b, hkv, n_kv, d, dtype=dtype))


ARGS = dict(causal=False, sm_scale=0.125, smooth_k=True, smooth_q=False, scales="fine")


def plan(q, k, v=None, **kwargs):
    return torch_ops.plan_of(q, k, v=v, **dict(ARGS, **kwargs))


def default_plan(q, k, **kwargs) -> torch_ops.Plan:
    """The plan of default_tiles (what SAGE_TUNE_ATTENTION=0 gives)."""
    args = dict(ARGS, **kwargs)
    batch, heads, n, d = q.shape
    return torch_ops.Plan(Shape(batch, heads, k.shape[1], n, k.shape[2], d),
                          default_tiles(d, args["smooth_q"], args["scales"] == "fine",
                                        args["causal"]),
                          args["causal"], args["sm_scale"], args["smooth_k"], args["smooth_q"],
                          q.dtype, args["scales"])


# -- candidates --------------------------------------------------------------------------


@pytest.mark.parametrize("d, causal, fine, smooth_q", CASES)
def test_candidates_keep_block_n_and_fit_the_tiles(d, causal, fine, smooth_q):
    tiles = default_tiles(d, smooth_q, fine, causal)
    default = tiles.forward_tiles(fine, smooth_q)
    plans = tuning.candidates(d, causal=causal, fine_scales=fine, smooth_q=smooth_q)
    assert plans[0] == default and 3 <= len(plans) <= 5 and len(set(plans)) == len(plans)
    for each in plans:
        assert isinstance(each, ForwardTiles) and each.block_n == default.block_n
        assert each.biased_scores == default.biased_scores  # the units' rounding
        assert replace(tiles, forward=each).forward_tiles(fine, smooth_q) == each
        assert each.stages == default.stages and each.tma_store == default.tma_store
    rows = {each.block_m for each in plans}
    # Causal, the query block changes the rounding (the rows' fully masked
    # key blocks): it stays the default's.
    assert rows == ({64, 128} if fine and not smooth_q and not causal else {64})
    # Causal, and not causal without a register cap, the default also walks
    # the tiles from a persistent grid.
    assert (replace(default, persistent=True) in plans) == \
        (causal or default.maxnreg is None)


def test_the_d128_candidates_are_the_measured_plans():
    default, *others = tuning.candidates(128, causal=False, fine_scales=True, smooth_q=False)
    assert (default.block_m, default.num_warps, default.maxnreg, default.block_n,
            default.skewed) == (64, 4, 168, 128, False)
    producer = replace(default, block_m=128, num_warps=8, maxnreg=None, warp_specialize=True)
    assert others == [replace(default, maxnreg=None), replace(default, skewed=True), producer,
                      replace(producer, ping_pong=True)]


def test_the_d64_candidates_follow_the_key_block():
    full = tuning.candidates(64, causal=False, fine_scales=True, smooth_q=False)
    assert full[0].block_n == 256 and not any(each.skewed for each in full)
    assert full[-1] == replace(full[0], persistent=True)
    causal = tuning.candidates(64, causal=True, fine_scales=True, smooth_q=False)
    assert causal[0].maxnreg == 128 and replace(causal[0], maxnreg=None) in causal
    block = tuning.candidates(64, causal=False, fine_scales=False, smooth_q=False)
    assert block[0].maxnreg is None and replace(block[0], maxnreg=128) in block


# -- the key -----------------------------------------------------------------------------


def test_buckets_are_the_next_power_of_two():
    assert [tuning.bucket(n) for n in (1, 2, 3, 4, 5, 1000, 1024, 1025, 16384)] == \
        [1, 2, 4, 4, 8, 1024, 1024, 2048, 16384]


def problem(shape=Shape(4, 32, 8, 4000, 3000, 128), **kwargs) -> Problem:
    args = dict(causal=False, scales="fine", smooth_q=False, smooth_k=True, dtype="bfloat16")
    return tuning.problem_of(shape, **dict(args, **kwargs))


def test_nearby_shapes_share_a_problem_and_flags_do_not():
    base = problem()
    assert base == Problem(128, False, "fine", False, True, "bfloat16", 4, 4096, 4096, 128)
    assert problem(Shape(8, 16, 4, 3073, 4096, 128)) == base
    others = [problem(Shape(4, 32, 8, 4097, 3000, 128)), problem(Shape(4, 32, 8, 4000, 5000, 128)),
              problem(Shape(8, 32, 8, 4000, 3000, 128)), problem(Shape(4, 32, 32, 4000, 3000, 128)),
              problem(Shape(4, 32, 8, 4000, 3000, 64)), problem(causal=True),
              problem(scales="block"), problem(smooth_q=True), problem(smooth_k=False),
              problem(dtype="float16")]
    assert len({base, *others}) == 1 + len(others)
    assert dict(base.key())["n_kv"] == 4096 and base.candidates() == tuning.candidates(
        128, causal=False, fine_scales=True, smooth_q=False)


def test_the_disk_key_holds_device_compiler_problem_and_candidates(monkeypatch):
    base = problem()
    plans = base.candidates()
    key = tuning.disk_key(base, 0, plans)
    assert key == tuning.disk_key(base, 1, plans), "the device by its identity, not its index"
    keys = {key, tuning.disk_key(problem(causal=True), 0, plans),
            tuning.disk_key(base, 0, plans[:-1])}
    monkeypatch.setattr(tuning, "device_identity",
                        lambda device: {"kind": "cuda", "name": "Other GPU", "capability": "9.0"})
    keys.add(tuning.disk_key(base, 0, plans))
    monkeypatch.setattr(tuning, "compiler_identity", lambda interpreting: {"compiler": "new"})
    keys.add(tuning.disk_key(base, 0, plans))
    monkeypatch.setenv("SAGE_CUBIN", "0")  # a knob that changes compiled output
    keys.add(tuning.disk_key(base, 0, plans))
    assert len(keys) == 6


# -- the tuner ---------------------------------------------------------------------------


def test_the_fastest_is_kept_in_memory_and_on_disk(fresh, capsys, monkeypatch):
    base, timing = problem(), Timing(3.0, 1.5, 2.0, 1.0, 4.0)
    tuner = tuning.TUNER
    winner = tuner.choose(base, 0, timing.prepare)
    plans = base.candidates()
    assert winner == plans[3] and timing.prepared == 1 and timing.timed == list(plans)
    assert tuner.memory == {(0, base): winner} and tuner.last.how.startswith("benchmarked in")
    (entry,) = entries(fresh)
    assert f"written to {entry}" in tuner.last.how
    record = json.loads(FileCache(fresh / FOLDER).get(entry.stem)["winner.json"])
    assert record["best"] == 3 and record["timings"] == [3.0, 1.5, 2.0, 1.0, 4.0]
    assert record["kernel"] == "sagebwd_forward" and record["configs"] == [repr(p) for p in plans]
    # In memory: nothing is timed or read again.
    last = tuner.last
    assert tuner.choose(base, 0, never) == winner and tuner.last is last
    assert tuner.choose(base, 1, None) == winner  # device 1 reads device 0's GPU's entry
    # A new process: from disk, untimed, printed with the recorded times.
    monkeypatch.setenv("SAGE_PRINT_AUTOTUNING", "1")
    again = PlanTuner()
    assert again.choose(base, 0, never) == winner and again.last.how == f"from {entry}"
    printed = capsys.readouterr().err
    assert f"sage: autotune sagebwd_forward key={base!r}: {winner!r} (from {entry})" in printed
    assert f"  {plans[0]!r}: 3.0000 ms" in printed
    assert PlanTuner().choose(problem(causal=True), 0, None) is None, "no entry, no timing"


def test_without_the_disk_cache_nothing_is_read_or_written(fresh, monkeypatch):
    tuning.TUNER.choose(problem(), 0, Timing(3.0, 1.0, 2.0, 4.0, 5.0).prepare)
    assert len(entries(fresh)) == 1
    monkeypatch.setenv("SAGE_AUTOTUNE_CACHE", "0")
    timing = Timing(1.0, 3.0, 2.0, 4.0, 5.0)
    tuner = PlanTuner()
    assert tuner.choose(problem(), 0, timing.prepare) == problem().candidates()[0]
    assert timing.prepared == 1 and len(entries(fresh)) == 1
    assert tuner.last.how.startswith("benchmarked in") and "written" not in tuner.last.how
    assert PlanTuner().choose(problem(), 0, None) is None


def test_a_failing_candidate_is_skipped_and_named(fresh, capsys, monkeypatch):
    monkeypatch.setenv("SAGE_PRINT_AUTOTUNING", "1")
    timing = Timing(3.0, 0.5, 2.0, 1.0, 4.0, errors={1: CompilationError("ptxas: too big")})
    plans = problem().candidates()
    assert tuning.TUNER.choose(problem(), 0, timing.prepare) == plans[3]
    record = tuning.TUNER.last.record
    assert record.timings[1] is None and record.failures == {1: "CompilationError: ptxas: "
                                                                "too big"}
    assert f"  {plans[1]!r}: failed: CompilationError: ptxas: too big" in \
        capsys.readouterr().err


def test_every_candidate_failing_is_an_error_and_nothing_is_kept(fresh):
    count = len(problem().candidates())
    timing = Timing(errors={i: CompilationError(f"broken {i}") for i in range(count)})
    with pytest.raises(AutotuneError, match="every config failed") as failure:
        tuning.TUNER.choose(problem(), 0, timing.prepare)
    assert all(f"broken {i}" in str(failure.value) for i in range(count))
    assert tuning.TUNER.memory == {} and not entries(fresh)


def test_an_error_that_is_not_a_candidates_fails_the_tuning(fresh):
    timing = Timing(1.0, errors={0: RuntimeError("CUDA out of memory")})
    with pytest.raises(RuntimeError, match="out of memory"):
        tuning.TUNER.choose(problem(), 0, timing.prepare)
    assert len(timing.timed) == 1 and tuning.TUNER.memory == {} and not entries(fresh)


# -- where it tunes: torch_ops.plan_of -------------------------------------------------------


def test_the_first_call_tunes_and_later_calls_reuse_the_plan(fresh, cuda, monkeypatch):
    timing = Timing(3.0, 2.0, 1.0, 4.0, 5.0)
    monkeypatch.setattr(torch_ops, "_forward_timer", timing.forward_timer)
    q, k, v = qkv()
    first = plan(q, k, v)
    default = default_plan(q, k)
    assert timing.prepared == 1 and first.tiles.forward == timing.plans[2]
    # The backward's tiles and everything else are the default plan's.
    assert replace(first, tiles=replace(first.tiles, forward=default.tiles.forward)) == default
    assert (first.tiles.block_m, first.tiles.block_n, first.tiles.num_warps) == \
        (default.tiles.block_m, default.tiles.block_n, default.tiles.num_warps)
    assert len(entries(fresh)) == 1
    # Later calls: the kept plan, nothing asked of the tuner.
    monkeypatch.setattr(tuning, "situation", never)
    assert plan(q, k, v) is first and plan(q, k) is first


def test_a_shape_in_the_same_bucket_takes_the_winner_untimed(cuda, monkeypatch):
    timing = Timing(3.0, 2.0, 1.0, 4.0, 5.0)
    monkeypatch.setattr(torch_ops, "_forward_timer", timing.forward_timer)
    first = plan(*qkv(n=1000, n_kv=1000))
    second = plan(*qkv(n=1020, n_kv=900))
    assert timing.prepared == 1 and second is not first
    assert second.tiles == first.tiles and second.shape.n == 1020


@pytest.mark.parametrize("d, causal", [(128, False), (64, True)])
def test_a_default_winner_gives_the_default_plan(cuda, monkeypatch, d, causal):
    """Also where default_tiles leaves the forward's block_n to the Tiles' (D=64 causal)."""
    monkeypatch.setattr(torch_ops, "_forward_timer", Timing(1.0, 2.0, 3.0, 4.0, 5.0)
                        .forward_timer)
    q, k, v = qkv(d=d)
    assert plan(q, k, v, causal=causal) == default_plan(q, k, causal=causal)


def test_the_off_knob_and_explicit_tiles_never_tune(cuda, monkeypatch):
    monkeypatch.setattr(torch_ops, "_forward_timer", never)
    q, k, v = qkv()
    tiles = Tiles(64, 64, 8, forward=ForwardTiles(128, 8, warp_specialize=True, block_n=128))
    assert plan(q, k, v, tiles=tiles).tiles is tiles
    monkeypatch.setenv("SAGE_TUNE_ATTENTION", "0")
    off = plan(q, k, v)
    assert off == default_plan(q, k) and plan(q, k, v) is off, "kept: the knob is read once"
    monkeypatch.setenv("SAGE_TUNE_ATTENTION", "sometimes")
    with pytest.raises(KnobError, match="SAGE_TUNE_ATTENTION='sometimes'"):
        plan(*qkv(n=77))


def test_a_bad_cache_knob_is_an_error_not_a_failed_tuning(cuda, monkeypatch):
    monkeypatch.setattr(torch_ops, "_forward_timer", Timing(1.0).forward_timer)
    monkeypatch.setenv("SAGE_AUTOTUNE_CACHE", "perhaps")
    with pytest.raises(KnobError, match="SAGE_AUTOTUNE_CACHE='perhaps'"):
        plan(*qkv())


def test_capture_takes_a_known_winner_or_the_default_untimed(fresh, cuda, monkeypatch):
    monkeypatch.setattr(torch_ops, "_forward_timer", never)
    cuda.capturing = 0
    q, k, v = qkv()
    captured = plan(q, k, v)
    assert captured == default_plan(q, k) and plan(q, k, v) is not captured, "not kept"
    assert tuning.TUNER.memory == {} and not entries(fresh)
    # After an eager call tuned its bucket, capture takes the winner (kept).
    cuda.capturing = None
    timing = Timing(3.0, 2.0, 1.0, 4.0, 5.0)
    monkeypatch.setattr(torch_ops, "_forward_timer", timing.forward_timer)
    plan(*qkv(n=999))
    monkeypatch.setattr(torch_ops, "_forward_timer", never)
    cuda.capturing = 0
    captured = plan(q, k, v)
    assert captured.tiles.forward == timing.plans[2] and plan(q, k, v) is captured
    # ... and in a new process, the winner on disk.
    monkeypatch.setattr(tuning, "TUNER", PlanTuner())
    monkeypatch.setattr(torch_ops, "_PLANS", {})
    assert plan(q, k, v).tiles.forward == timing.plans[2]
    assert tuning.TUNER.last.how.startswith("from ")


def test_a_capture_on_the_current_device_or_the_tensors_counts(cuda):
    q, k, v = qkv()
    assert tuning.situation(q, k, v) is Situation.TIME
    cuda.current, cuda.capturing = 1, 1  # the thread captures on another device
    assert tuning.situation(q, k, v) is Situation.LOOKUP
    cuda.capturing = 0  # ... or on the tensors' device, not the current one
    assert tuning.situation(q, k, v) is Situation.LOOKUP and cuda.current == 1
    cuda.capturing = None
    assert tuning.situation(q, k, v) is Situation.TIME


def test_the_backwards_plan_looks_up_but_never_times(fresh, cuda, monkeypatch):
    monkeypatch.setattr(torch_ops, "_forward_timer", never)
    q, k, _ = qkv()
    without_v = plan(q, k)
    assert without_v == default_plan(q, k) and plan(q, k) is not without_v
    assert not entries(fresh)


def test_tracing_takes_a_remembered_winner_or_the_default(cuda, monkeypatch):
    monkeypatch.setattr(torch_ops, "_forward_timer", never)
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    q, k, v = qkv()
    traced = plan(q, k, v)
    assert traced == default_plan(q, k) and plan(q, k, v) is not traced
    winner = tuning.candidates(128, causal=False, fine_scales=True, smooth_q=False)[1]
    tuning.TUNER.memory[(0, problem(Shape(2, 4, 2, 1000, 1000, 128)))] = winner
    traced = plan(q, k, v)
    assert traced.tiles.forward == winner and plan(q, k, v) is traced


def test_the_interpreter_on_cuda_tensors_times_nothing(cuda, monkeypatch):
    monkeypatch.setattr(torch_ops, "_forward_timer", never)
    monkeypatch.setenv("SAGE_INTERPRET", "1")
    q, k, v = qkv()
    assert tuning.situation(q, k, v) is Situation.REMEMBERED
    interpreted = plan(q, k, v)
    assert interpreted == default_plan(q, k) and plan(q, k, v) is not interpreted


def test_cpu_tensors_keep_the_default_plan(fresh, monkeypatch):
    monkeypatch.setattr(torch_ops, "_forward_timer", never)
    q, k, v = qkv()
    assert tuning.situation(q, k, v) is Situation.NEVER
    cpu = plan(q, k, v)
    assert cpu == default_plan(q, k) and plan(q, k, v) is cpu, "kept: CPU tensors never tune"
    assert not entries(fresh)


def test_fake_meta_and_symbolic_tensors_are_never_timed(monkeypatch):
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import (DimDynamic, ShapeEnv,
                                                       StatelessSymbolicContext)

    monkeypatch.setattr(torch_ops, "_forward_timer", never)
    with FakeTensorMode():
        fake = [torch.empty(x.shape, dtype=x.dtype, device="cuda") for x in qkv()]
        assert tuning.situation(*fake) is Situation.REMEMBERED
        traced = plan(*fake)
        assert traced == default_plan(*fake[:2]) and plan(*fake) is not traced
    meta = [x.to("meta") for x in qkv()]
    assert tuning.situation(*meta) is Situation.REMEMBERED
    assert plan(*meta) is not plan(*meta)
    mode = FakeTensorMode(shape_env=ShapeEnv())
    dynamic = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC] * 4)
    sizes = [mode.from_tensor(x.to("meta"), symbolic_context=dynamic).shape for x in qkv()]
    with mode:
        symbolic = [torch.empty(size, dtype=torch.bfloat16, device="cuda") for size in sizes]
        assert symbolic[0].is_cuda and type(symbolic[0].shape[2]) is torch.SymInt
        assert tuning.situation(*symbolic) is Situation.NEVER, "no bucket of a symbolic size"
        assert plan(*symbolic).tiles == default_tiles(128, False, True, False)


def test_a_failed_tuning_warns_and_keeps_the_default(fresh, cuda, monkeypatch):
    count = len(tuning.candidates(128, causal=False, fine_scales=True, smooth_q=False))
    timing = Timing(errors={i: CompilationError("broken") for i in range(count)})
    monkeypatch.setattr(torch_ops, "_forward_timer", timing.forward_timer)
    q, k, v = qkv()
    with pytest.warns(RuntimeWarning, match="choosing the SageBwd forward's plan for Problem"
                                            r".*failed \(AutotuneError: autotune"):
        failed = plan(q, k, v)
    assert failed == default_plan(q, k)
    assert plan(q, k, v) is failed and timing.prepared == 1, "no retry in this process"
    assert tuning.TUNER.memory == {} and not entries(fresh), "not a winner"


def test_an_error_preparing_the_timing_warns_and_keeps_the_default(fresh, cuda, monkeypatch):
    def out_of_memory(plan, q, k, v):
        raise torch.OutOfMemoryError("CUDA out of memory")
    monkeypatch.setattr(torch_ops, "_forward_timer", out_of_memory)
    q, k, v = qkv()
    with pytest.warns(RuntimeWarning, match="OutOfMemoryError: CUDA out of memory"):
        assert plan(q, k, v) == default_plan(q, k)
    assert tuning.TUNER.memory == {} and not entries(fresh)


# -- bench/tune_attention.py -------------------------------------------------------------------


bench = load_bench("tune_attention")


def test_bench_arguments_and_cases():
    options = bench.parse_args(["o.json", "o.md", "--quick", "--cases", "d128-n4096-full"])
    assert options.quick and options.cases == ["d128-n4096-full"] and not options.cache
    assert [case.name for case in bench.speed_cases(True)] == [
        "d128-n1024-full", "d128-n1024-causal", "d128-n4096-full", "d128-n4096-causal"]
    assert bench.parse_args(["o.json", "o.md", "--cache"]).cache


def test_bench_row_and_render():
    plans = tuning.candidates(128, causal=False, fine_scales=True, smooth_q=False)
    record = tuning.Record(best=1, timings=[2.0, 1.0, None, 1.5, 3.0],
                           failures={2: "CompilationError: spills"})
    made = tuning.Tuning(problem(), 0, plans, record, "benchmarked in 3.00 s")
    row = bench.tuning_row(made)
    assert row["winner"] == repr(plans[1]) and row["gain"] == 2.0
    assert row["candidates"][2] == {"plan": repr(plans[2]), "label": bench.plan_label(plans[2]),
                                    "ms": None, "failure": "CompilationError: spills"}
    row.update(case="d128-n4096-full", first_call_s=4.5, default_forward={"ms": 2.5},
               tuned_forward={"ms": 1.6})
    text = bench.render([row, {"case": "d64-n1024-causal", "error": "RuntimeError: boom"}])
    assert ("| d128-n4096-full | 64x128 w4 r- s2 in-order tma | 2.000 | 1.000 | 2.00x | 2.500 "
            "| 1.600 | 1.56x | 4.5 | benchmarked in 3.00 s |") in text
    assert "| d128-n4096-full | 128x128 w8 r- s2 in-order tma producer | 1.500 | 1.33x |  |" \
        in text
    assert "| d128-n4096-full | 64x128 w4 r168 s2 skewed tma | - | - | failed: " \
           "CompilationError: spills |" in text
    assert "| d128-n4096-full | 64x128 w4 r- s2 in-order tma | 1.000 | 2.00x | winner |" in text
    assert "- d64-n1024-causal: RuntimeError: boom" in text
    assert bench.plan_label(plans[4]) == "128x128 w8 r- s2 in-order tma producer ping-pong"


def test_bench_without_gpu_reports_and_fails_cleanly(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    out_json, out_md = tmp_path / "t.json", tmp_path / "t.md"
    assert bench.main([str(out_json), str(out_md), "--quick"]) == 1
    assert "Run failed" in out_md.read_text()
    assert json.loads(out_json.read_text())["rows"] == []
    assert "SAGE_AUTOTUNE_CACHE" not in os.environ, "the run's setting is not left behind"
