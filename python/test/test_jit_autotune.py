"""@sage.autotune on the CPU: config and decorator validation, the tuning key,
pruning, a timer that picks the winner, the memory and disk caches of
winners, resets between benchmark runs, failures, and the interpreter's
untimed choice. Kernels run in the interpreter (SAGE_INTERPRET=1); the
timer is injected, so every result is deterministic."""

from __future__ import annotations

import contextlib
import json
import pickle
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import sage
import sage.language as sl
from sage.jit import ArgumentError, AutotuneError, Autotuner, Config
from sage.jit.autotune import do_bench
from sage.jit.autotune_cache import FOLDER, WinnerCache, kernel_identity
from sage.jit.cache import FileCache
from sage.jit.knobs import knobs


def column_sums(x, out, M, N, BLOCK_M: sl.constexpr, BLOCK_N: sl.constexpr,
                STAGES: sl.constexpr = 1):
    """out (1 x N) += the column sums of x (M x N): program (i, j) adds those
    of rows [2 i BLOCK_M, 2 (i + 1) BLOCK_M), columns of block j, atomically."""
    col = sl.program_id(1) * BLOCK_N
    start = sl.program_id(0) * (2 * BLOCK_M)
    acc = sl.zeros((1, BLOCK_N), sl.float32)
    for r in sl.range(start, start + 2 * BLOCK_M, BLOCK_M, num_stages=STAGES):
        t = sl.load(x, (BLOCK_M, BLOCK_N), (r, col), (N, 1), (M, N))
        acc = acc + sl.sum(t, axis=0)
    sl.store(out, acc, (0, col), (N, 1), (1, N), atomic_add=True)


def scale_in_place(x, n, alpha, BLOCK: sl.constexpr):
    row = sl.program_id(0) * BLOCK
    t = sl.load(x, shape=(1, BLOCK), offsets=(0, row), strides=(n, 1), bounds=(1, n))
    sl.store(x, t * alpha, offsets=(0, row), strides=(n, 1), bounds=(1, n))


CONFIGS = [Config({"BLOCK_M": 16, "BLOCK_N": 32}),
           Config({"BLOCK_M": 8, "BLOCK_N": 16, "STAGES": 2}, num_warps=8),
           Config({"BLOCK_M": 32, "BLOCK_N": 64}, maxnreg=128)]


def grid(meta):
    return (-(-meta["M"] // (2 * meta["BLOCK_M"])), -(-meta["N"] // meta["BLOCK_N"]))


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch) -> Path:
    for knob in knobs.all():
        monkeypatch.delenv(knob.env, raising=False)
    monkeypatch.setenv("SAGE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SAGE_INTERPRET", "1")
    return tmp_path / "cache"


class Timer:
    """An injected timer: runs the launch (resets included) ``runs`` times
    and reports the next of ``times`` (one per benchmarked config)."""

    def __init__(self, *times: float, runs: int = 1, check=None):
        self.times, self.runs, self.check = list(times), runs, check
        self.calls = 0

    def __call__(self, fn) -> float:
        for _ in range(self.runs):
            fn()
            if self.check:
                self.check()
        self.calls += 1
        return self.times[self.calls - 1]


def problem(m=70, n=50, seed=0):
    """x with small integer values (f32 sums exact in any order), a zeroed out."""
    x = np.random.default_rng(seed).integers(-8, 9, (m, n)).astype(np.float32)
    return x, np.zeros((1, n), np.float32)


def tuned_sums(timer=None, configs=CONFIGS, **options) -> Autotuner:
    return sage.autotune(configs, key=["M", "N"], reset_to_zero=["out"], do_bench=timer,
                         **options)(sage.jit(column_sums))


def launch(tuned, x, out, **kwargs):
    tuned[grid](x, out, *x.shape, **kwargs)


def entries(cache_dir: Path) -> list[Path]:
    return sorted((cache_dir / FOLDER).rglob("*.sage"))


# -- configs and the decorator ---------------------------------------------------------


def test_config_values_hash_and_repr():
    a = Config({"STAGES": 2, "BLOCK": 64}, num_warps=8)
    b = Config({"BLOCK": 64, "STAGES": 2}, num_warps=8)
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert repr(a) == "Config({'BLOCK': 64, 'STAGES': 2}, num_warps=8)"
    assert repr(Config(maxnreg=96)) == "Config({}, num_warps=4, maxnreg=96)"
    assert a != Config({"BLOCK": 64, "STAGES": 2}) and a != Config({"BLOCK": 64}, num_warps=8)
    assert a.all_kwargs() == {"BLOCK": 64, "STAGES": 2, "num_warps": 8}
    assert Config(maxnreg=96).all_kwargs() == {"num_warps": 4, "maxnreg": 96}
    staged = Config({"BLOCK": 64}, num_warps=8, num_stages=3)
    assert repr(staged) == "Config({'BLOCK': 64}, num_warps=8, num_stages=3)"
    assert staged.num_stages == 3 and Config().num_stages is None
    assert staged != Config({"BLOCK": 64}, num_warps=8) != Config({"BLOCK": 64}, num_warps=8,
                                                                  num_stages=1)
    assert staged.all_kwargs() == {"BLOCK": 64, "num_warps": 8, "num_stages": 3}
    assert pickle.loads(pickle.dumps(staged)) == staged
    with pytest.raises(AttributeError, match="immutable"):
        a.num_warps = 4
    assert pickle.loads(pickle.dumps(Config({"B": 1}, 2, 64))) == Config({"B": 1}, 2, 64)
    with pytest.raises(TypeError):
        a.kwargs["BLOCK"] = 32


@pytest.mark.parametrize("make, error, message", [
    (lambda: Config({}, num_ctas=2), TypeError, "no option 'num_ctas': .*clusters"),
    (lambda: Config({}, pre_hook=print), TypeError, "reset_to_zero= or restore_value="),
    (lambda: Config({}, warps=4), TypeError, "no option 'warps': it takes kwargs, num_warps"),
    (lambda: Config({"num_warps": 8}), ValueError, r"launch option: Config\(..., num_warps"),
    (lambda: Config([("BLOCK", 64)]), TypeError, "a dict of constexpr names"),
    (lambda: Config({1: 64}), TypeError, "named by parameter names"),
    (lambda: Config({"BLOCK": [64]}), TypeError, "hashable"),
    (lambda: Config(num_warps=3), ValueError, "num_warps must be 1, 2, 4, 8 or 16"),
    (lambda: Config(num_warps=True), ValueError, "num_warps must be"),
    (lambda: Config(maxnreg=8), ValueError, "maxnreg must be None or an integer from 24"),
    (lambda: Config({"num_stages": 2}), ValueError, r"launch option: Config\(..., num_stages"),
    *[(lambda stages=stages: Config(num_stages=stages), ValueError,
       rf"num_stages must be an integer >= 1, got {stages!r}") for stages in (0, -1, True, 2.5)],
])
def test_bad_configs_are_errors(make, error, message):
    with pytest.raises(error, match=message):
        make()


@pytest.mark.parametrize("options, error, message", [
    (dict(configs=[]), ValueError, "at least one Config"),
    (dict(configs=[{"BLOCK_M": 16}]), TypeError, "configs are sage.Config"),
    (dict(configs=[Config({"BLOCK_K": 16})]), ValueError,
     "sets 'BLOCK_K', which is not a parameter"),
    (dict(configs=[Config({"M": 16})]), ValueError, "sets 'M', a runtime argument"),
    (dict(key=["K"]), ValueError, "key names 'K', which is not a parameter"),
    (dict(key=["BLOCK_M"]), ValueError, "key names 'BLOCK_M', which the configs set"),
    (dict(configs=CONFIGS[:1], reset_to_zero=["STAGES"]), ValueError,
     "reset_to_zero names 'STAGES', a constexpr"),
    (dict(restore_value=["y"]), ValueError, "restore_value names 'y'"),
    (dict(prune_configs_by=3), TypeError, "prune_configs_by is a callable"),
    (dict(prune_configs_by={"top": 1}), ValueError, r"no field\(s\) \['top'\]"),
    (dict(prune_configs_by={"top_k": 0}), ValueError, "top_k is a number of configs"),
    (dict(prune_configs_by={"top_k": 1.5}), ValueError, "top_k is a number of configs"),
    (dict(rep=0), ValueError, "rep > 0"),
])
def test_bad_autotune_arguments_are_errors(options, error, message):
    arguments = {"configs": CONFIGS, "key": ["M", "N"], **options}
    with pytest.raises(error, match=message):
        sage.autotune(**arguments)(sage.jit(column_sums))


def test_autotune_wraps_jit_kernels_and_plain_functions():
    kernel = sage.jit(column_sums)
    tuned = sage.autotune(CONFIGS, key="M")(kernel)
    assert tuned.fn is kernel and tuned.key == ("M",) and tuned.__name__ == "column_sums"
    plain = sage.autotune(CONFIGS, key=["M"])(column_sums)
    assert isinstance(plain.fn, sage.jit.JITFunction) and plain.fn.fn is column_sums
    with pytest.raises(TypeError, match="wraps a @sage.jit kernel"):
        sage.autotune(CONFIGS, key=["M"])(object())
    with pytest.raises(TypeError, match=r"launch it with column_sums\[grid\]"):
        tuned(1, 2)
    assert repr(tuned) == "<sage.autotune kernel column_sums, 3 configs>"


def test_kernel_identity_hashes_the_source_and_the_helpers():
    import hashlib
    import inspect

    plain = kernel_identity(column_sums, "column_sums")
    assert plain == {"name": "column_sums",
                     "source": hashlib.sha256(inspect.getsource(column_sums).encode()).hexdigest()}
    helped = kernel_identity(column_sums, "column_sums", helpers=(scale_in_place,))
    assert helped["source"] != plain["source"] and helped["name"] == "column_sums"
    assert kernel_identity(column_sums, "column_sums", helpers=(scale_in_place,)) == helped
    module = kernel_identity(column_sums, "column_sums", helpers=(sys.modules[__name__],))
    assert module["source"] not in (plain["source"], helped["source"])


def test_tuning_key_is_the_key_values_and_the_dtypes():
    tuned = tuned_sums()
    x, out = problem()
    named = tuned.named_args((x, out, 70, 50), {})
    assert set(named) == {"x", "out", "M", "N"}
    assert tuned.tuning_key(named) == (70, 50, "float32", "float32")
    by_tensor = sage.autotune(CONFIGS, key=["x", "N"])(column_sums)
    key = by_tensor.tuning_key(by_tensor.named_args((x.astype(np.float16), out, 70, 50), {}))
    assert key == (((70, 50), "float16"), 50, "float16", "float32")
    buffer = sl.Buffer(np.zeros(6, np.float32), sl.bfloat16)
    assert by_tensor.tuning_key(by_tensor.named_args((buffer, out, 70, 50), {}))[0][0] == (6,)


# -- choosing --------------------------------------------------------------------


def test_the_fastest_config_is_chosen_and_remembered(cache_dir):
    timer = Timer(3.0, 1.0, 2.0)
    tuned = tuned_sums(timer)
    x, out = problem()
    launch(tuned, x, out)
    assert timer.calls == 3 and tuned.best_config == CONFIGS[1]
    assert tuned.configs_timings == dict(zip(CONFIGS, (3.0, 1.0, 2.0)))
    assert tuned.failures == {} and tuned.bench_time > 0
    np.testing.assert_array_equal(out[0], x.sum(axis=0))
    out[...] = 0
    launch(tuned, x, out)  # same key: no tuning
    assert timer.calls == 3 and tuned.best_config == CONFIGS[1]
    np.testing.assert_array_equal(out[0], x.sum(axis=0))
    x2, out2 = problem(40, 50)
    timer.times += [1.0, 2.0, 0.5]
    launch(tuned, x2, out2)  # another key: tuned again
    assert timer.calls == 6 and tuned.best_config == CONFIGS[2]
    assert set(tuned.cache.values()) == {CONFIGS[1], CONFIGS[2]} and len(entries(cache_dir)) == 2


def test_a_tie_goes_to_the_first_config():
    tuned = tuned_sums(Timer(2.0, 1.0, 1.0))
    launch(tuned, *problem())
    assert tuned.best_config == CONFIGS[1]


def test_a_timer_returning_quantiles_counts_by_its_first():
    quantiles = iter([[3.0, 0.1, 9.0], [1.0, 0.5, 1.5], [2.0, 2.0, 2.0]])
    tuned = tuned_sums(lambda fn: next(quantiles))
    launch(tuned, *problem())
    assert tuned.best_config == CONFIGS[1]
    assert list(tuned.configs_timings.values()) == [3.0, 1.0, 2.0]


def test_a_single_config_is_never_timed(cache_dir):
    timer = Timer()
    tuned = tuned_sums(timer, configs=CONFIGS[2:])
    x, out = problem()
    launch(tuned, x, out)
    assert timer.calls == 0 and tuned.best_config == CONFIGS[2] and not entries(cache_dir)
    np.testing.assert_array_equal(out[0], x.sum(axis=0))


def test_pruning_by_a_callable_and_by_a_perf_model(cache_dir):
    seen = {}

    def early(configs, named_args, **kwargs):
        seen.update(named_args=set(named_args), kwargs=kwargs)
        return [config for config in configs if config.num_warps == 4]
    timer = Timer(2.0, 1.0)
    unstaged = [*CONFIGS[::2], Config({"BLOCK_M": 8, "BLOCK_N": 16}, num_warps=8)]
    tuned = tuned_sums(timer, configs=unstaged, prune_configs_by=early)
    launch(tuned, *problem(), STAGES=2)
    assert seen == {"named_args": {"x", "out", "M", "N", "STAGES"}, "kwargs": {"STAGES": 2}}
    assert timer.calls == 2 and tuned.best_config == CONFIGS[2]
    assert list(tuned.configs_timings) == [CONFIGS[0], CONFIGS[2]]

    def model(**meta):
        return meta["BLOCK_N"] * (1 if meta["num_warps"] == 8 else 2)  # 64, 16, 128
    timer = Timer(4.0, 3.0)
    tuned = tuned_sums(timer, prune_configs_by={"perf_model": model, "top_k": 2})
    launch(tuned, *problem())
    assert list(tuned.configs_timings) == [CONFIGS[1], CONFIGS[0]]
    assert tuned.best_config == CONFIGS[0]
    tuned = tuned_sums(Timer(), prune_configs_by={"perf_model": model, "top_k": 0.34})
    launch(tuned, *problem())  # one config left: untimed
    assert tuned.best_config == CONFIGS[1] and tuned.configs_timings == {}
    with pytest.raises(AutotuneError, match="early_config_prune kept no config"):
        launch(tuned_sums(Timer(), prune_configs_by=lambda configs, named: []), *problem())
    with pytest.raises(ValueError, match="not a parameter of the kernel"):
        launch(tuned_sums(Timer(), prune_configs_by=lambda configs, named: [
            Config({"BLOCK_K": 1}), *configs]), *problem())


def test_arguments_the_configs_set_are_errors():
    tuned = tuned_sums(Timer(1.0, 2.0, 3.0))
    x, out = problem()
    for extra in ({"BLOCK_N": 64}, {"num_warps": 8}, {"maxnreg": 64, "BLOCK_M": 8}):
        with pytest.raises(ArgumentError, match="conflicting meta-parameters"):
            launch(tuned, x, out, **extra)
    with pytest.raises(ArgumentError, match="maxnreg"):
        launch(tuned, x, out, maxnreg=64)
    staged = sage.autotune([Config({"BLOCK_M": 8, "BLOCK_N": 16}, num_stages=2)],
                           key=["M"])(column_sums)
    with pytest.raises(ArgumentError, match="conflicting meta-parameters num_stages"):
        launch(staged, x, out, num_stages=3)
    # A launch option no config sets stays the caller's.
    unset = sage.autotune(CONFIGS[:2], key=["M"], do_bench=Timer(1.0, 2.0))(column_sums)
    launch(unset, x, out, maxnreg=64, num_stages=3)
    assert unset.best_config == CONFIGS[0]


def test_failing_configs_are_skipped_and_named():
    broken = [Config({"BLOCK_M": 0, "BLOCK_N": 32}), Config({"BLOCK_M": 8, "BLOCK_N": 0})]
    tuned = tuned_sums(Timer(1.0), configs=[broken[0], CONFIGS[1]])
    x, out = problem()
    tuned[(4, 4)](x, out, *x.shape)
    assert tuned.best_config == CONFIGS[1]
    assert tuned.configs_timings == {broken[0]: float("inf"), CONFIGS[1]: 1.0}
    assert "sl.range step must be positive, got 0" in tuned.failures[broken[0]]
    assert tuned.failures[broken[0]].startswith("CompilationError: ")
    with pytest.raises(AutotuneError) as failure:
        tuned_sums(Timer(), configs=broken)[(4, 4)](x, out, *x.shape)
    message = str(failure.value)
    assert "every config failed for key (70, 50, 'float32', 'float32')" in message
    assert all(f"  {config!r}: CompilationError: " in message for config in broken)


def test_reset_to_zero_before_every_timed_run_and_after():
    x, out = problem()
    expected = x.sum(axis=0)

    def one_sum_in_out():  # a run on top of an unreset out would double it
        np.testing.assert_array_equal(out[0], expected)
    timer = Timer(2.0, 1.0, 3.0, runs=3, check=one_sum_in_out)
    tuned = tuned_sums(timer)
    out[...] = 7.0  # reset_to_zero: the kernel wants it zeroed
    launch(tuned, x, out)
    assert timer.calls == 3
    np.testing.assert_array_equal(out[0], expected)


def test_restore_value_before_every_timed_run_and_after():
    x = np.arange(1, 101, dtype=np.float32)[None, :]
    original = x.copy()
    configs = [Config({"BLOCK": 32}), Config({"BLOCK": 64})]

    def scaled_once():
        np.testing.assert_array_equal(x, original * 3.0)
    tuned = sage.autotune(configs, key=["n"], restore_value=["x"],
                          do_bench=Timer(1.0, 2.0, runs=2, check=scaled_once))(scale_in_place)
    tuned[lambda meta: (-(-meta["n"] // meta["BLOCK"]),)](x, 100, 3.0)
    np.testing.assert_array_equal(x, original * 3.0)


# -- the interpreter ----------------------------------------------------------------


def test_the_interpreter_takes_the_first_config_untimed(cache_dir):
    tuned = sage.autotune(CONFIGS[::-1], key=["M", "N"], reset_to_zero=["out"])(column_sums)
    x, out = problem(100, 90)
    launch(tuned, x, out)
    assert tuned.best_config == CONFIGS[2] and tuned.configs_timings == {}
    np.testing.assert_array_equal(out[0], x.sum(axis=0))
    assert not entries(cache_dir), "an untimed choice is not a tuning result"
    pruned = sage.autotune(CONFIGS, key=["M"],
                           prune_configs_by=lambda configs, named: configs[1:])(column_sums)
    out[...] = 0
    launch(pruned, x, out)
    assert pruned.best_config == CONFIGS[1]
    np.testing.assert_array_equal(out[0], x.sum(axis=0))


def test_torch_tensors_in_the_interpreter():
    torch = pytest.importorskip("torch")
    x, out = (torch.from_numpy(array) for array in problem())
    tuned = sage.autotune(CONFIGS, key=["x"], reset_to_zero=["out"],
                          do_bench=Timer(2.0, 1.0, 3.0, runs=2))(column_sums)
    launch(tuned, x, out)
    assert tuned.best_config == CONFIGS[1]
    assert tuned.tuning_key(tuned.named_args((x, out, 70, 50), {}))[0] == \
        ((70, 50), "torch.float32")
    assert torch.equal(out[0], x.sum(dim=0))


# -- the disk cache -------------------------------------------------------------------


def test_a_new_autotuner_reads_the_winner_from_disk(cache_dir, capsys, monkeypatch):
    launch(tuned_sums(Timer(3.0, 1.0, 2.0)), *problem())
    (entry,) = entries(cache_dir)
    record = json.loads(FileCache(cache_dir / FOLDER).get(entry.stem)["winner.json"])
    assert record["best"] == 1 and record["timings"] == [3.0, 1.0, 2.0]
    assert record["kernel"] == "column_sums" and record["configs"] == [repr(c) for c in CONFIGS]
    monkeypatch.setenv("SAGE_PRINT_AUTOTUNING", "1")
    timer = Timer()
    again = tuned_sums(timer)
    x, out = problem()
    launch(again, x, out)
    assert timer.calls == 0 and again.best_config == CONFIGS[1]
    assert again.configs_timings == dict(zip(CONFIGS, (3.0, 1.0, 2.0)))
    np.testing.assert_array_equal(out[0], x.sum(axis=0))
    printed = capsys.readouterr().err
    assert f"sage: autotune column_sums key=(70, 50, 'float32', 'float32'): {CONFIGS[1]!r} " \
           f"(from {entry})" in printed
    assert f"  {CONFIGS[0]!r}: 3.0000 ms" in printed


@pytest.mark.parametrize("change", ["key", "configs", "config_order", "num_stages", "source",
                                    "compiler", "environment"])
def test_every_key_change_is_another_entry(change, cache_dir, monkeypatch):
    launch(tuned_sums(Timer(3.0, 1.0, 2.0)), *problem())
    timer = Timer(1.0, 2.0, 3.0)
    configs, x = CONFIGS, problem()
    if change == "key":
        x = problem(71)
    elif change == "configs":
        configs = CONFIGS + [Config({"BLOCK_M": 8, "BLOCK_N": 8})]
        timer.times.append(4.0)
    elif change == "config_order":
        configs = CONFIGS[::-1]
    elif change == "num_stages":  # a config's launch option is part of the config space
        configs = CONFIGS[:2] + [Config(CONFIGS[2].kwargs, maxnreg=128, num_stages=2)]
    elif change == "compiler":
        monkeypatch.setattr("sage.jit.compiler.python_sources_hash", lambda: "other")
    elif change == "environment":
        monkeypatch.setenv("SAGE_CUBIN", "0")
    if change == "source":
        namespace = {"sl": sl}
        exec(compile("def column_sums(x, out, M, N, BLOCK_M: sl.constexpr, "
                     "BLOCK_N: sl.constexpr, STAGES: sl.constexpr = 1):\n    pass\n",
                     "other.py", "exec"), namespace)
        tuned = sage.autotune(configs, key=["M", "N"], do_bench=timer)(namespace["column_sums"])
    else:
        tuned = tuned_sums(timer, configs=configs)
    launch(tuned, *x)
    assert timer.calls == len(configs) and tuned.best_config == configs[0]
    assert len(entries(cache_dir)) == 2


def test_a_damaged_entry_is_replaced(cache_dir):
    launch(tuned_sums(Timer(3.0, 1.0, 2.0)), *problem())
    (entry,) = entries(cache_dir)
    entry.write_bytes(entry.read_bytes()[:-5] + b"xxxxx")  # checksum no longer matches
    timer = Timer(1.0, 2.0, 3.0)
    launch(tuned_sums(timer), *problem())
    assert timer.calls == 3 and entries(cache_dir) == [entry]
    cache = WinnerCache()
    assert cache.get(entry.stem, CONFIGS).best == 0
    # An entry whose checksum holds but whose contents do not fit is ignored too.
    for bad in (b"not json", json.dumps({"best": 9, "timings": [1, 2, 3], "failures": {},
                                         "configs": [repr(c) for c in CONFIGS]}).encode()):
        cache.files.put(entry.stem, {"winner.json": bad})
        timer = Timer(2.0, 3.0, 1.0)
        launch(tuned_sums(timer), *problem())
        assert timer.calls == 3 and cache.get(entry.stem, CONFIGS).best == 2


def test_the_disk_cache_can_be_turned_off(cache_dir, monkeypatch):
    monkeypatch.setenv("SAGE_AUTOTUNE_CACHE", "0")
    launch(tuned_sums(Timer(3.0, 1.0, 2.0)), *problem())
    assert not entries(cache_dir)
    monkeypatch.delenv("SAGE_AUTOTUNE_CACHE")
    launch(tuned_sums(Timer(3.0, 1.0, 2.0)), *problem())
    monkeypatch.setenv("SAGE_AUTOTUNE_CACHE", "0")
    timer = Timer(1.0, 2.0, 3.0)
    launch(tuned_sums(timer), *problem())
    assert timer.calls == 3, "nothing is read either"


# -- the default timer ---------------------------------------------------------------


class FakeCuda:
    """torch.cuda's events over a clock that the runs advance: a launch
    0.5 ms, a reset 10 ms, the L2 flush 100 ms."""

    def __init__(self):
        self.now, self.counts = 0.0, {"fn": 0, "setup": 0, "flush": 0}
        clock = self

        class Event:
            def __init__(self, enable_timing):
                assert enable_timing

            def record(self):
                self.at = clock.now

            def elapsed_time(self, end):
                return end.at - self.at
        self.Event = Event

    def advance(self, what: str, ms: float) -> None:
        self.now += ms
        self.counts[what] += 1

    def torch(self):
        flush = SimpleNamespace(zero_=lambda: self.advance("flush", 100.0))
        cuda = SimpleNamespace(is_available=lambda: True, Event=self.Event,
                               synchronize=lambda device: None,
                               device=lambda device: contextlib.nullcontext())
        return SimpleNamespace(int8="int8", device=lambda kind, index: (kind, index),
                               empty=lambda size, dtype, device: flush, cuda=cuda)


def test_the_default_timer_times_the_launch_alone(monkeypatch):
    cuda = FakeCuda()
    monkeypatch.setitem(sys.modules, "torch", cuda.torch())
    ms = do_bench(lambda: cuda.advance("fn", 0.5), lambda: cuda.advance("setup", 10.0),
                  warmup=25, rep=100, device=0)
    assert ms == 0.5
    # One untimed run, 5 to estimate, 25 / 0.5 warm-up runs, 100 / 0.5 timed runs.
    assert cuda.counts == {"fn": 256, "setup": 256, "flush": 255}
    cuda.counts = dict.fromkeys(cuda.counts, 0)
    assert do_bench(lambda: cuda.advance("fn", 0.5), rep=1, warmup=0, device=0) == 0.5
    assert cuda.counts["fn"] == 1 + 5 + 1 + 5, "at least 5 timed runs"
    cuda.counts = dict.fromkeys(cuda.counts, 0)
    do_bench(lambda: cuda.advance("fn", 1e-6), device=0)
    assert cuda.counts["fn"] == 1 + 5 + 1000 + 1000, "at most 1000 runs"


def test_the_default_timer_without_torch_synchronises_around_each_run(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    synchronized = []
    binding = SimpleNamespace(synchronize=synchronized.append)
    monkeypatch.setattr("sage.compiler.binding.load_binding", lambda: binding)
    runs = []
    ms = do_bench(lambda: runs.append(1), warmup=0, rep=1e-9, device=3)
    assert ms >= 0 and len(runs) == 1 + 5 + 1 + 5
    assert synchronized == [3] * (1 + 2 * (len(runs) - 1))
