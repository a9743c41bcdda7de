"""``@sage.autotune``: a ``@sage.jit`` kernel that tries several launch
configurations and keeps the fastest per key, in memory and on disk.

    @sage.autotune(configs=[sage.Config({"BLOCK_N": 64}, num_stages=2),
                            sage.Config({"BLOCK_N": 128}, num_warps=8, num_stages=3)],
                   key=["M", "N", "K"])
    @sage.jit
    def matmul(a, b, c, M, N, K, BLOCK_N: sl.constexpr): ...  # sl.range loops: no num_stages

    matmul[lambda meta: (cdiv(meta["M"], 64), cdiv(meta["N"], meta["BLOCK_N"]))](a, b, c,
                                                                                M, N, K)

The first launch for a key benchmarks every config (after pruning) and
launches the winner; later launches for that key launch it at once. Under
SAGE_INTERPRET=1 nothing is timed: the first config is taken. The disk
record is described in :mod:`sage.jit.autotune_cache`.
"""

from __future__ import annotations

import functools
import inspect
import math
import statistics
import sys
import time
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping, Sequence

from sage.compiler.library import CompilationError
from sage.jit.autotune_cache import (Record, compiler_identity, device_identity, entry_key,
                                     kernel_identity, recorded_or_benchmarked)
from sage.jit.function import JITFunction, jit
from sage.jit.knobs import knobs
from sage.jit.launcher import current_device
from sage.jit.options import DEFAULT_NUM_STAGES, DEFAULT_NUM_WARPS, NAMES, LaunchOptions
from sage.jit.specialize import ArgumentError

#: Options of Triton's ``Config`` that sage has no launch equivalent of, and
#: what to do instead.
_FOREIGN_OPTIONS = {
    "num_ctas": "pass num_ctas to the launch: a kernel's clusters are part of its design "
                "(sl.cluster_barrier), not a tuning choice",
    "pre_hook": "give autotune reset_to_zero= or restore_value= for the arguments the "
                "benchmark runs change",
    "ir_override": "use SAGE_OVERRIDE_DIR",
}
#: The launch options a config sets besides its constexprs (where tensor maps
#: are built is the caller's choice, not tuned).
_LAUNCH_OPTIONS = ("num_warps", "maxnreg", "num_stages")
#: Bytes written between timed runs to evict the L2 cache (50 MB on an H100),
#: so each run reads its inputs from memory as a cold launch in a model does.
_FLUSH_BYTES = 256 << 20
#: Bounds on the timed runs of one config (tiny kernels would otherwise run
#: tens of thousands of times for the default 100 ms).
_MIN_RUNS, _MAX_RUNS = 5, 1000


class AutotuneError(RuntimeError):
    """No config could be chosen: every one failed (each failure is named),
    or pruning left none."""


class Config:
    """One launch configuration for :func:`autotune` to try.

    Args:
        kwargs: values of constexpr parameters of the kernel: tile sizes,
            warp-specialisation choices, per-loop stages (a constexpr passed
            to ``sl.range(..., num_stages=S)``), whatever the kernel makes a
            constexpr.
        num_warps: warps per program (1, 2, 4, 8, 16).
        maxnreg: a cap on registers per thread (24-255); None leaves it to
            ptxas (or to a ``maxnreg`` the caller passes).
        num_stages: the stages (an int >= 1) of every ``sl.range`` loop that
            passes none itself; None leaves them to a ``num_stages`` the
            caller passes (default 1, not pipelined).

    Configs are immutable, compare and hash by value, and their ``repr`` (part
    of the disk key) lists the kwargs sorted by name and the launch options
    set.

    Raises:
        TypeError: for an option sage does not have (``num_ctas``,
            ``pre_hook``: the message says what to do instead) or kwargs that
            are not a mapping of names to hashable values.
        ValueError: for launch options in ``kwargs``, or a bad ``num_warps``,
            ``maxnreg`` or ``num_stages``.
    """

    __slots__ = ("kwargs", "num_warps", "maxnreg", "num_stages", "_identity")

    def __init__(self, kwargs: Mapping[str, Any] | None = None,
                 num_warps: int = DEFAULT_NUM_WARPS, maxnreg: int | None = None,
                 num_stages: int | None = None, **options: Any):
        if options:
            raise TypeError("; ".join(
                f"Config has no option {name!r}: "
                + _FOREIGN_OPTIONS.get(name, "it takes kwargs, num_warps, maxnreg and "
                                             "num_stages")
                for name in options))
        if kwargs is not None and not isinstance(kwargs, Mapping):
            raise TypeError(f"Config kwargs are a dict of constexpr names to values, got "
                            f"{kwargs!r}")
        values = dict(kwargs or {})
        for name in values:
            if not isinstance(name, str) or not name.isidentifier():
                raise TypeError(f"Config kwargs are named by parameter names, got {name!r}")
            if name in NAMES:
                raise ValueError(f"{name} is a launch option: Config(..., {name}=...), not "
                                 "one of the kwargs")
        # Checked as a launch checks them (an unset num_stages as the default's).
        LaunchOptions(num_warps, maxnreg,
                      DEFAULT_NUM_STAGES if num_stages is None else num_stages)
        identity = (tuple(sorted(values.items())), num_warps, maxnreg, num_stages)
        try:
            hash(identity)
        except TypeError:
            raise TypeError(f"Config kwargs values must be hashable, got {values!r}") from None
        for slot, value in (("kwargs", MappingProxyType(values)), ("num_warps", num_warps),
                            ("maxnreg", maxnreg), ("num_stages", num_stages),
                            ("_identity", identity)):
            object.__setattr__(self, slot, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a Config is immutable: make a new one")

    def __reduce__(self) -> tuple:
        # Pickled and copied through the constructor (its slots refuse setattr).
        return Config, (dict(self.kwargs), self.num_warps, self.maxnreg, self.num_stages)

    def launch_options(self) -> dict[str, Any]:
        """The launch options the config sets (``maxnreg`` and ``num_stages``
        only when not None: the caller's, or the default, otherwise)."""
        return {name: getattr(self, name) for name in _LAUNCH_OPTIONS
                if name == "num_warps" or getattr(self, name) is not None}

    def all_kwargs(self) -> dict[str, Any]:
        """What the config adds to a launch: its kwargs and launch options
        (:meth:`launch_options`)."""
        return {**self.kwargs, **self.launch_options()}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Config) and self._identity == other._identity

    def __hash__(self) -> int:
        return hash(self._identity)

    def __repr__(self) -> str:
        values = ", ".join(f"{name!r}: {value!r}" for name, value in self._identity[0])
        options = "".join(f", {name}={value!r}" for name, value in self.launch_options().items())
        return f"Config({{{values}}}{options})"


# -- timing --------------------------------------------------------------------


class _EventClock:
    """Times runs with CUDA events on torch's current stream of the device,
    the stream the JIT launches on."""

    def __init__(self, torch: Any, device: int):
        self.torch, self.device = torch, device
        self.flush = torch.empty(_FLUSH_BYTES, dtype=torch.int8,
                                 device=torch.device("cuda", device))

    def synchronize(self) -> None:
        self.torch.cuda.synchronize(self.device)

    def measure(self, fn: Callable[[], Any], setup: Callable[[], Any], runs: int
                ) -> list[float]:
        cuda = self.torch.cuda
        with cuda.device(self.device):
            events = [(cuda.Event(enable_timing=True), cuda.Event(enable_timing=True))
                      for _ in range(runs)]
            for start, end in events:
                setup()  # outside the events: resets are not the kernel's time
                self.flush.zero_()
                start.record()
                fn()
                end.record()
            cuda.synchronize(self.device)
        return [start.elapsed_time(end) for start, end in events]


class _HostClock:
    """Times runs by the host's clock around each run, the device
    synchronised before and after (no torch: CuPy or other arrays)."""

    def __init__(self, device: int):
        from sage.compiler.binding import load_binding
        self.synchronize = functools.partial(load_binding().synchronize, device)

    def measure(self, fn: Callable[[], Any], setup: Callable[[], Any], runs: int
                ) -> list[float]:
        times = []
        for _ in range(runs):
            setup()
            self.synchronize()
            start = time.perf_counter()
            fn()
            self.synchronize()
            times.append((time.perf_counter() - start) * 1e3)
        return times


def _nothing() -> None:
    pass


def do_bench(fn: Callable[[], Any], setup: Callable[[], Any] | None = None, *,
             warmup: float = 25, rep: float = 100, device: int | None = None) -> float:
    """The median time in milliseconds of ``fn`` (kernel launches) on the GPU:
    the default timer of :func:`autotune`.

    ``fn`` runs once untimed (compiling and loading), five times for an
    estimate, then for about ``warmup`` ms untimed and ``rep`` ms timed
    (5 to 1000 runs). ``setup`` runs before every run, outside the timed
    part. With torch imported the runs are timed by CUDA events on torch's
    current stream with the L2 cache flushed before each; without torch, by
    the host's clock with the device synchronised around each run.
    """
    setup = setup or _nothing
    device = current_device() if device is None else device
    torch = sys.modules.get("torch")
    clock = (_EventClock(torch, device) if torch is not None and torch.cuda.is_available()
             else _HostClock(device))
    setup()
    fn()
    clock.synchronize()
    estimate = max(statistics.median(clock.measure(fn, setup, _MIN_RUNS)), 1e-4)
    clock.measure(fn, setup, min(_MAX_RUNS, max(1, int(warmup / estimate))))
    runs = min(_MAX_RUNS, max(_MIN_RUNS, int(rep / estimate)))
    return statistics.median(clock.measure(fn, setup, runs))


# -- arguments -----------------------------------------------------------------


def _memory(value: Any) -> Any:
    """The array behind an argument (an ``sl.Buffer`` keeps its elements in
    a numpy array)."""
    return value.array if type(value).__name__ == "Buffer" and hasattr(value, "array") \
        else value


def _zero(value: Any) -> None:
    memory = _memory(value)
    if hasattr(memory, "zero_"):  # torch
        memory.zero_()
    else:  # numpy, CuPy
        memory.fill(0)


def _copy(value: Any) -> Any:
    memory = _memory(value)
    return memory.clone() if hasattr(memory, "clone") else memory.copy()


def _restore(value: Any, saved: Any) -> None:
    memory = _memory(value)
    if hasattr(memory, "copy_"):  # torch
        memory.copy_(saved)
    else:
        memory[...] = saved


class _Preserved:
    """The arguments that benchmark runs change: the ``reset_to_zero`` ones
    are zeroed and the ``restore_value`` ones put back as the caller passed
    them, before every run and once after the tuning (so the real launch
    sees them as a launch without tuning would)."""

    def __init__(self, named: Mapping[str, Any], zeroed: Sequence[str],
                 restored: Sequence[str]):
        self.zeroed = [named[name] for name in zeroed if named[name] is not None]
        self.saved = [(named[name], _copy(named[name])) for name in restored
                      if named[name] is not None]

    def reset(self) -> None:
        for value in self.zeroed:
            _zero(value)
        for value, saved in self.saved:
            _restore(value, saved)


def key_value(value: Any) -> Any:
    """What an argument named in ``key`` contributes to the tuning key: a
    tensor (anything with a shape and a dtype) its shape and dtype, any
    other value itself."""
    memory = _memory(value)
    shape = getattr(memory, "shape", None)
    if shape is not None and hasattr(value, "dtype"):
        return tuple(int(extent) for extent in shape), str(value.dtype)
    return value


def failure_types(interpreting: bool) -> tuple[type[BaseException], ...]:
    """What a config that cannot run raises, to be skipped: a compile error
    (the trace, the compiler, ptxas), and on the GPU a driver error (e.g. more
    shared memory than the device has)."""
    if interpreting:
        return (CompilationError,)
    from sage.compiler.binding import load_binding
    return CompilationError, load_binding().CudaError


def benchmark_configs(name: str, key: tuple, configs: Sequence[Any],
                      time_config: Callable[[Any], float],
                      failures_of: tuple[type[BaseException], ...]) -> Record:
    """Times every config with ``time_config(config) -> ms``; a config that
    raises one of ``failures_of`` is skipped, its message kept. The record's
    winner is the fastest (the first of equals).

    Raises:
        AutotuneError: when every config failed, naming each failure (the
            kernel ``name`` and the ``key`` head the message).
    """
    timings: list[float | None] = []
    failures: dict[int, str] = {}
    for index, config in enumerate(configs):
        try:
            timings.append(time_config(config))
        except failures_of as error:
            timings.append(None)
            failures[index] = f"{type(error).__name__}: {error}"
    ran = [index for index, ms in enumerate(timings) if ms is not None]
    if not ran:
        raise AutotuneError(f"autotune {name}: every config failed for key {key!r}:\n"
                            + "\n".join(f"  {configs[index]!r}: {message}"
                                        for index, message in failures.items()))
    return Record(best=min(ran, key=timings.__getitem__), timings=timings, failures=failures)


def record_by_config(configs: Sequence[Any], record: Record
                     ) -> tuple[dict[Any, float], dict[Any, str]]:
    """A record's times ({config: ms}, ``inf`` for a config that failed) and
    failures ({config: message}), by config."""
    timings = {config: math.inf if ms is None else ms
               for config, ms in zip(configs, record.timings)}
    return timings, {configs[index]: message for index, message in record.failures.items()}


def report_choice(name: str, key: Any, chosen: Any, how: str, timings: Mapping[Any, float],
                  failures: Mapping[Any, str]) -> None:
    """Prints to stderr, when SAGE_PRINT_AUTOTUNING is on, the choice of
    ``chosen`` for ``key`` (``how``: timed, from which entry, untimed) and
    every config's time (ms) or failure."""
    if not knobs.print_autotuning.get():
        return
    lines = [f"sage: autotune {name} key={key!r}: {chosen!r} ({how})"]
    for each, ms in timings.items():
        failure = failures.get(each)
        lines.append(f"  {each!r}: " + (f"failed: {failure}" if failure else f"{ms:.4f} ms"))
    print("\n".join(lines), file=sys.stderr)


# -- the autotuner -------------------------------------------------------------


class Autotuner:
    """A ``@sage.jit`` kernel that chooses its config per key; made by
    :func:`autotune`, launched as ``tuned[grid](*args, **kwargs)``.

    Attributes:
        fn: the :class:`~sage.jit.JITFunction`.
        configs: the config space.
        key: the names of the arguments whose values select a tuning.
        cache: tuning key -> the chosen :class:`Config`, in this process.
        best_config: the config of the last launch.
        configs_timings: {config: ms} of the last tuning (``inf`` for a
            failed config); empty when nothing was timed.
        failures: {config: error message} of the last tuning.
        bench_time: seconds the last benchmark took (0 when none ran).
    """

    def __init__(self, fn: JITFunction, configs: Sequence[Config], key: Iterable[str], *,
                 reset_to_zero: Iterable[str] | None = None,
                 restore_value: Iterable[str] | None = None,
                 prune_configs_by: Callable | Mapping[str, Any] | None = None,
                 warmup: float = 25, rep: float = 100,
                 do_bench: Callable[[Callable[[], Any]], Any] | None = None):
        self.fn = fn
        self._params = {param.name: param for param in fn.params}
        self.configs = list(configs)
        if not self.configs:
            raise ValueError(f"autotune {fn.name}: give at least one Config")
        for config in self.configs:
            self._check_config(config)
        #: Names the caller may not pass: the configs set them.
        self._tuned = frozenset(name for config in self.configs for name in config.all_kwargs())
        self.key = self._names("key", key, runtime=False)
        self.reset_to_zero = self._names("reset_to_zero", reset_to_zero, runtime=True)
        self.restore_value = self._names("restore_value", restore_value, runtime=True)
        self._early_prune, self._perf_model, self._top_k = _pruning(prune_configs_by)
        if not (warmup >= 0 and rep > 0):
            raise ValueError(f"autotune {fn.name}: warmup >= 0 and rep > 0 ms, got "
                             f"warmup={warmup}, rep={rep}")
        self.warmup, self.rep, self._do_bench = warmup, rep, do_bench
        self.cache: dict[tuple, Config] = {}
        self.best_config: Config | None = None
        self.configs_timings: dict[Config, float] = {}
        self.failures: dict[Config, str] = {}
        self.bench_time = 0.0
        functools.update_wrapper(self, fn.fn)

    def _check_config(self, config: Any) -> None:
        if not isinstance(config, Config):
            raise TypeError(f"autotune {self.fn.name}: configs are sage.Config, got "
                            f"{config!r}")
        for name in config.kwargs:
            if name not in self._params:
                raise ValueError(f"autotune {self.fn.name}: {config!r} sets {name!r}, which "
                                 "is not a parameter of the kernel")
            if not self._params[name].constexpr:
                raise ValueError(f"autotune {self.fn.name}: {config!r} sets {name!r}, a "
                                 "runtime argument; configs set sl.constexpr parameters")

    def _names(self, what: str, names: Iterable[str] | None, runtime: bool) -> tuple[str, ...]:
        names = (names,) if isinstance(names, str) else tuple(names or ())
        for name in names:
            if name not in self._params:
                raise ValueError(f"autotune {self.fn.name}: {what} names {name!r}, which is "
                                 "not a parameter of the kernel")
            if name in self._tuned:
                raise ValueError(f"autotune {self.fn.name}: {what} names {name!r}, which the "
                                 "configs set")
            if runtime and self._params[name].constexpr:
                raise ValueError(f"autotune {self.fn.name}: {what} names {name!r}, a "
                                 "constexpr; it takes tensor arguments")
        return names

    @functools.cached_property
    def identity(self) -> dict[str, str]:
        """The kernel's name and source hash, as the disk key holds them."""
        return kernel_identity(self.fn.fn, self.fn.name)

    # -- launching -------------------------------------------------------------

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        """``tuned[grid](*args, **kwargs)``: ``grid`` as for ``@sage.jit``; a
        callable gets the chosen config's constexprs with the arguments."""
        return functools.partial(self.run, grid)

    def run(self, grid: Any, *args: Any, **kwargs: Any) -> None:
        """Chooses the config for these arguments (tuning on a new key) and
        launches with it.

        Raises:
            ArgumentError: for arguments the configs set (``num_warps``, a
                tuned constexpr), or that do not fit the kernel.
            AutotuneError: when every config fails.
        """
        conflicts = sorted(self._tuned & kwargs.keys())
        if conflicts:
            raise ArgumentError(f"{self.fn.name}: conflicting meta-parameters "
                                f"{', '.join(conflicts)}: the autotuner's configs set them; "
                                "do not pass them")
        config = self._choose(grid, args, kwargs)
        self.best_config = config
        self.fn.run(grid, *args, **kwargs, **config.all_kwargs())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"{self.fn.name} is an autotuned sage kernel: launch it with "
                        f"{self.fn.name}[grid](...)")

    def __repr__(self) -> str:
        return f"<sage.autotune kernel {self.fn.name}, {len(self.configs)} configs>"

    # -- choosing ----------------------------------------------------------------

    def named_args(self, args: tuple, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """Every argument of a call by name (defaults filled), without the
        ones the configs set."""
        values, _, _ = self.fn.split(args, {**kwargs, **self.configs[0].kwargs})
        return {name: value for name, value in values.items() if name not in self._tuned}

    def tuning_key(self, named: Mapping[str, Any]) -> tuple:
        """The values of the ``key`` arguments (:func:`key_value`), then the
        dtype of every tensor argument (a dtype change compiles another
        kernel, whose best config may differ)."""
        dtypes = tuple(str(named[param.name].dtype) for param in self.fn.runtime_params
                       if hasattr(named[param.name], "dtype"))
        return tuple(key_value(named[name]) for name in self.key) + dtypes

    def prune(self, named: Mapping[str, Any], kwargs: Mapping[str, Any]) -> list[Config]:
        """The configs worth benchmarking for these arguments: those
        ``early_config_prune(configs, named_args, **kwargs)`` keeps, then the
        ``top_k`` best by ``perf_model(**named_args, **config.all_kwargs())``."""
        configs = self.configs
        if self._early_prune is not None:
            configs = list(self._early_prune(list(configs), dict(named), **kwargs))
            if not configs:
                raise AutotuneError(f"autotune {self.fn.name}: early_config_prune kept no "
                                    "config; it must keep at least one")
            for config in configs:
                self._check_config(config)
        if self._perf_model is not None:
            top_k = self._top_k if isinstance(self._top_k, int) \
                else max(1, int(len(configs) * self._top_k))
            if len(configs) > top_k:
                estimate = {config: self._perf_model(**named, **config.all_kwargs())
                            for config in configs}
                configs = sorted(configs, key=estimate.__getitem__)[:top_k]
        return list(configs)

    def _choose(self, grid: Any, args: tuple, kwargs: dict[str, Any]) -> Config:
        if len(self.configs) == 1:
            return self.configs[0]
        named = self.named_args(args, kwargs)
        key = self.tuning_key(named)
        config = self.cache.get(key)
        if config is None:
            config = self.cache[key] = self._tune(grid, args, kwargs, named, key)
        return config

    def _tune(self, grid: Any, args: tuple, kwargs: dict[str, Any], named: dict[str, Any],
              key: tuple) -> Config:
        configs = self.prune(named, kwargs)
        interpreting = knobs.interpret.get()
        self.configs_timings, self.failures, self.bench_time = {}, {}, 0.0
        if len(configs) == 1:
            self._report(key, configs[0], "the only config left by pruning")
            return configs[0]
        if interpreting and self._do_bench is None:
            # The interpreter runs every config alike (stages and warps do not
            # change its results) and its speed says nothing of the GPU's.
            self._report(key, configs[0], "SAGE_INTERPRET=1: the first config, untimed")
            return configs[0]
        device = None if interpreting else \
            self.fn.bind(args, {**kwargs, **configs[0].all_kwargs()}).device
        record, how = recorded_or_benchmarked(
            configs, lambda: entry_key(self.identity, configs, key, device_identity(device),
                                       compiler_identity(interpreting)),
            lambda: self._benchmark(grid, args, kwargs, named, configs, device, key),
            {"kernel": self.fn.name, "key": [repr(value) for value in key]})
        self._remember(configs, record)
        self._report(key, configs[record.best], how)
        return configs[record.best]

    def _benchmark(self, grid: Any, args: tuple, kwargs: dict[str, Any],
                   named: dict[str, Any], configs: list[Config], device: int | None,
                   key: tuple) -> Record:
        preserved = _Preserved(named, self.reset_to_zero, self.restore_value)

        def time_config(config: Config) -> float:
            launch = functools.partial(self.fn.run, grid, *args, **kwargs,
                                       **config.all_kwargs())
            return self._time(launch, preserved.reset, device)
        start = time.perf_counter()
        try:
            record = benchmark_configs(self.fn.name, key, configs, time_config,
                                       failure_types(device is None))
        finally:
            preserved.reset()
            self.bench_time = time.perf_counter() - start
        self._remember(configs, record)
        return record

    def _time(self, launch: Callable[[], None], setup: Callable[[], None],
              device: int | None) -> float:
        if self._do_bench is None:
            return do_bench(launch, setup, warmup=self.warmup, rep=self.rep, device=device)

        def run() -> None:
            setup()
            launch()
        ms = self._do_bench(run)
        # triton.testing.do_bench returns a list when asked for quantiles.
        return float(ms[0] if isinstance(ms, (list, tuple)) else ms)

    def _remember(self, configs: list[Config], record: Record) -> None:
        self.configs_timings, self.failures = record_by_config(configs, record)

    def _report(self, key: tuple, config: Config, how: str) -> None:
        report_choice(self.fn.name, key, config, how, self.configs_timings, self.failures)


def _pruning(prune_configs_by: Callable | Mapping[str, Any] | None
             ) -> tuple[Callable | None, Callable | None, int | float]:
    """(early_config_prune, perf_model, top_k) from ``prune_configs_by``: a
    callable (the early pruning) or Triton's dict of those three."""
    if prune_configs_by is None:
        return None, None, 1.0
    if callable(prune_configs_by):
        return prune_configs_by, None, 1.0
    if not isinstance(prune_configs_by, Mapping):
        raise TypeError("prune_configs_by is a callable(configs, named_args, **kwargs) or a "
                        "dict with early_config_prune, perf_model and top_k")
    unknown = sorted(set(prune_configs_by) - {"early_config_prune", "perf_model", "top_k"})
    if unknown:
        raise ValueError(f"prune_configs_by has no field(s) {unknown}; it takes "
                         "early_config_prune, perf_model and top_k")
    top_k = prune_configs_by.get("top_k", 1.0)
    if isinstance(top_k, bool) or not (isinstance(top_k, int) and top_k >= 1
                                       or isinstance(top_k, float) and 0 < top_k <= 1):
        raise ValueError(f"top_k is a number of configs (an int >= 1) or a fraction of them "
                         f"(a float in (0, 1]), got {top_k!r}")
    return prune_configs_by.get("early_config_prune"), prune_configs_by.get("perf_model"), top_k


def autotune(configs: Sequence[Config], key: Iterable[str], *,
             prune_configs_by: Callable | Mapping[str, Any] | None = None,
             reset_to_zero: Iterable[str] | None = None,
             restore_value: Iterable[str] | None = None,
             warmup: float = 25, rep: float = 100,
             do_bench: Callable[[Callable[[], Any]], Any] | None = None
             ) -> Callable[[JITFunction | Callable], Autotuner]:
    """Decorator over ``@sage.jit``: launch with the fastest of ``configs``
    for each distinct value of the ``key`` arguments.

    Args:
        configs: the :class:`Config` space.
        key: argument names whose values select a tuning (a tensor counts by
            its shape and dtype); the dtypes of all tensor arguments count too.
        prune_configs_by: ``early_config_prune(configs, named_args, **kwargs)
            -> configs``, or a dict with ``early_config_prune``, ``perf_model``
            (``perf_model(**named_args, **config.all_kwargs()) -> estimate``)
            and ``top_k`` (an int, or a fraction of the configs).
        reset_to_zero: tensor arguments zeroed before every benchmark run and
            after the tuning (outputs kernels accumulate into).
        restore_value: tensor arguments put back as passed before every
            benchmark run and after the tuning (inputs kernels update).
        warmup, rep: milliseconds of untimed and timed runs per config for
            the default timer (:func:`do_bench`).
        do_bench: a timer ``do_bench(fn) -> ms`` (or a list whose first item
            is the ms) used instead; ``fn`` does the resets and one launch.
            It is also called under SAGE_INTERPRET=1, where the default timer
            is not (the interpreter takes the first config untimed).

    A plain function is made ``@sage.jit`` first (with its defaults); put
    ``@sage.autotune`` above ``@sage.jit`` to give jit options.

    Raises:
        TypeError, ValueError: for configs, names or pruning that do not fit
            the kernel.
    """
    def wrap(fn: JITFunction | Callable) -> Autotuner:
        if not isinstance(fn, JITFunction):
            if not inspect.isfunction(fn):
                raise TypeError(f"sage.autotune wraps a @sage.jit kernel, got {fn!r}")
            fn = jit(fn)
        return Autotuner(fn, configs, key, reset_to_zero=reset_to_zero,
                         restore_value=restore_value, prune_configs_by=prune_configs_by,
                         warmup=warmup, rep=rep, do_bench=do_bench)
    return wrap
