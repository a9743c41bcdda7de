"""The SageBwd forward's plan, chosen per problem by timing and kept.

Which plan runs the forward kernel fastest (query rows per program, warps,
a register cap, the key loop skewed or in dependency order, a producer
warpgroup, ping-pong) depends on the GPU and on the problem.
:func:`candidates` gives a short list of plans per case, built from
:func:`~sage.kernels.sagebwd.launch.default_tiles` (the default first).
Every candidate keeps the default's key block ``block_n`` (the granule of
P~'s quantization: its scales follow the key blocks) and its
``biased_scores`` (which snaps P~'s units), so O and the LSE do not depend
on the choice, and the float64 emulation follows the same decisions
(:func:`~sage.kernels.sagebwd.launch.emulation_blocks`).
The pre-pass and the backward keep their tiles: their blocks fix the
scales the backward reads.

:class:`PlanTuner` chooses per (device, :class:`Problem`): the winner kept
in memory, else one on disk (``@sage.autotune``'s cache of winners under
``SAGE_CACHE_DIR/autotune``: SAGE_AUTOTUNE_CACHE), else, where
:func:`situation` allows it, the fastest candidate by the JIT autotuner's
timer (CUDA events, the L2 cache flushed before each run, the median of a
bounded number of runs) of the forward kernel's launch alone. The
:mod:`~sage.kernels.sagebwd.torch_ops` driver asks when it first makes a
problem's plan (``plan_of``), so later calls pay nothing.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch
from torch._subclasses.fake_tensor import is_fake

import sage.kernels.sagebwd.common as common
import sage.kernels.sagebwd.forward as forward_module
import sage.kernels.sagebwd.launch as launch
import sage.kernels.sagebwd.prepass as prepass
import sage.kernels.strided as strided
from sage.jit.autotune import (benchmark_configs, do_bench, failure_types, record_by_config,
                               report_choice)
from sage.jit.autotune_cache import (Record, compiler_identity, device_identity, entry_key,
                                     kernel_identity, recorded_or_benchmarked)
from sage.jit.knobs import knobs
from sage.kernels.sagebwd.launch import ForwardTiles, Shape, Tiles, default_tiles

#: The kernel whose plan is tuned (its name in printed choices and on disk).
KERNEL = "sagebwd_forward"
#: The register cap at which four 128-thread programs share an SM (the D=64
#: causal default's): tried where the default has no cap and 64-key blocks,
#: which fit it without spills.
FOUR_PROGRAMS_AN_SM = 128
#: The longest key block whose loop is tried skewed: a skewed loop holds two
#: BM x BN f32 score tiles, 128 registers a thread each at 64 x 256.
SKEWED_MAX_BLOCK_N = 128
#: Milliseconds of untimed and timed runs per candidate (less than the JIT
#: autotuner's 25 and 100: each problem's first call pays them for every
#: candidate, and at least five timed runs are kept).
WARMUP_MS, REP_MS = 10.0, 50.0


def candidates(d: int, *, causal: bool, fine_scales: bool,
               smooth_q: bool, n_kv: int | None = None) -> tuple[ForwardTiles, ...]:
    """The forward plans tried for a case, the default first (3 to 5: each
    costs a compilation and a timing on the case's first call).

    From the default plan (:func:`~sage.kernels.sagebwd.launch.default_tiles`
    at ``n_kv`` keys, its ``block_n`` filled in), keeping that ``block_n``:
    without its register cap (fewer programs an SM, no spills), or with four
    programs an SM where it has no cap and 64-key blocks; the loop skewed (the next S on the tensor
    cores during the softmax) up to 128-key blocks; and 128 query rows on two
    consumer warpgroups beside a producer warpgroup, with and without
    ping-pong, where :meth:`Tiles.forward_tiles` lets the forward's query
    block differ from the pre-pass's (fine scales, no Q-smoothing) and the
    mask is not causal (there the query block changes the rounding); the
    default made persistent: causal (longest tiles first), and not causal
    where it has no register cap (at D=64 N=4K 1.7% faster; at D=128, capped,
    13% slower). Measured on the H100 in
    bench/results/2026-11-26-h100-forward-plans*.md,
    2026-11-26-h100-tune-attention*.md and
    2026-11-27-h100-forward-persistent.md.
    """
    tiles = default_tiles(d, smooth_q, fine_scales, causal, n_kv=n_kv)
    default = tiles.forward_tiles(fine_scales, smooth_q)
    plans = [default]
    if default.maxnreg is not None:
        plans.append(replace(default, maxnreg=None))
    elif default.block_n <= 64:
        plans.append(replace(default, maxnreg=FOUR_PROGRAMS_AN_SM))
    if default.block_n <= SKEWED_MAX_BLOCK_N:
        plans.append(replace(default, skewed=True))
    # Causal, the query block decides which key blocks a row meets with all
    # its keys masked, and those move the row's units (docs/sagebwd.md,
    # "Units"): other rounding, not bit-equal O and LSE (measured on the
    # H100). There the candidates keep the default's query block.
    if not causal:
        producer = replace(default, block_m=128, num_warps=8, maxnreg=None,
                           warp_specialize=True)
        plans += [plan for plan in (producer, replace(producer, ping_pong=True))
                  if _allowed(tiles, plan, fine_scales, smooth_q)]
        if default.maxnreg is None:
            # The SMs' worth of programs walking the tiles, without a last
            # partial wave. Under a register cap the walk's own state spills.
            plans.append(replace(default, persistent=True))
    else:
        # The SMs' worth of programs walking the tiles, longest first.
        plans.append(replace(default, persistent=True))
    return tuple(dict.fromkeys(plans))  # in order, without repeats


def _allowed(tiles: Tiles, plan: ForwardTiles, fine_scales: bool, smooth_q: bool) -> bool:
    """Whether ``plan`` may be the forward's plan beside ``tiles``'s pre-pass
    and backward blocks (:meth:`Tiles.forward_tiles` is the rule's home)."""
    try:
        replace(tiles, forward=plan).forward_tiles(fine_scales, smooth_q)
    except ValueError:
        return False
    return True


def bucket(n: int) -> int:
    """The power of two a size counts as in a :class:`Problem`: the smallest
    at least ``n`` (``n`` >= 1)."""
    return 1 << max(n - 1, 0).bit_length()


@dataclass(frozen=True)
class Problem:
    """What selects the forward's plan on a device (the tuning key, with the
    device's and the compiler's identities on disk).

    The flags, dtype and GQA group select the kernel variant. The sizes
    enter as :func:`bucket`\\ s of N, N_kv and batch x heads, so nearby shapes
    share a winner: a plan's speed follows the key loop's length (N_kv) and
    how the programs (N / block_m x batch x heads) fill the SMs, both smooth
    in the sizes, and varying lengths (batches of other sequence lengths, a
    KV cache that grows while decoding) tune a few times, once per power of
    two, not once per length.
    """

    d: int
    causal: bool
    scales: str
    smooth_q: bool
    smooth_k: bool
    dtype: str
    group: int  # query heads per kv head
    n: int  # bucket(N)
    n_kv: int  # bucket(N_kv)
    batch_heads: int  # bucket(batch x heads)

    def candidates(self) -> tuple[ForwardTiles, ...]:
        """The plans tried for this problem (:func:`candidates`)."""
        return candidates(self.d, causal=self.causal, fine_scales=self.scales == "fine",
                          smooth_q=self.smooth_q, n_kv=self.n_kv)

    def key(self) -> tuple[tuple[str, Any], ...]:
        """The fields by name, as the disk key holds them."""
        return tuple(asdict(self).items())


def problem_of(shape: Shape, *, causal: bool, scales: str, smooth_q: bool, smooth_k: bool,
               dtype: str) -> Problem:
    """The :class:`Problem` of a call (``dtype``: the inputs', e.g. "bfloat16")."""
    return Problem(shape.d, causal, scales, smooth_q, smooth_k, dtype,
                   shape.heads // shape.kv_heads, bucket(shape.n), bucket(shape.n_kv),
                   bucket(shape.batch * shape.heads))


class Situation(enum.Enum):
    """Where a call's plan may come from (:func:`situation`)."""

    #: Real CUDA tensors, nothing capturing or tracing: a problem met for the
    #: first time is tuned.
    TIME = "time"
    #: Real CUDA tensors where timing is impossible now (a CUDA graph is being
    #: captured; no V: the backward's plan): a winner in memory or on disk,
    #: else the default, and nothing is stored.
    LOOKUP = "lookup"
    #: Fake or meta tensors (torch.compile tracing, shape propagation), or the
    #: interpreter on CUDA tensors: a winner in memory, else the default.
    REMEMBERED = "remembered"
    #: CPU tensors (the interpreter: its speed says nothing of a GPU's) and
    #: symbolic sizes (no bucket): the default plan.
    NEVER = "never"


def situation(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor | None) -> Situation:
    """Where the plan of a forward on ``q, k, v`` may come from (``v`` None:
    a plan made without the inputs, as the backward's)."""
    if any(type(size) is not int for size in (*q.shape, *k.shape)):
        return Situation.NEVER
    if not q.is_cuda:
        return Situation.NEVER if q.is_cpu else Situation.REMEMBERED
    if is_fake(q) or torch.compiler.is_compiling() or knobs.interpret.get():
        return Situation.REMEMBERED
    if v is None or _capturing(q.get_device()):
        return Situation.LOOKUP
    return Situation.TIME


def _capturing(device: int) -> bool:
    """Whether a CUDA graph is being captured on the current stream of the
    current device or of ``device`` (where the JIT launches): the timer's
    synchronisations are not allowed there, nor would its runs be timed."""
    if torch.cuda.is_current_stream_capturing():
        return True
    with torch.cuda.device(device):
        return torch.cuda.is_current_stream_capturing()


def time_launch(launch_once: Callable[[], Any], device: int) -> float:
    """The median time (ms) of ``launch_once`` (one kernel launch) on
    ``device`` by the JIT autotuner's timer (:func:`sage.jit.autotune.do_bench`:
    CUDA events, the L2 cache flushed before each run, 5 to 1000 runs), for
    :data:`WARMUP_MS` untimed and :data:`REP_MS` timed."""
    return do_bench(launch_once, warmup=WARMUP_MS, rep=REP_MS, device=device)


@functools.cache
def _kernel_identity() -> dict[str, str]:
    """The forward kernel's name and a hash of its source and of the modules
    that shape it (its helpers, the pre-pass module's Q-block functions among
    them, its constexprs and the default plans)."""
    return kernel_identity(forward_module.sagebwd_forward, KERNEL,
                           helpers=(forward_module, common, prepass, strided, launch))


def disk_key(problem: Problem, device: int, plans: tuple[ForwardTiles, ...]) -> str:
    """The disk cache key of a tuning: the kernel, the candidates, the
    problem, the device's identity (name, compute capability) and the
    compiler's (:func:`sage.jit.autotune_cache.entry_key`)."""
    return entry_key(_kernel_identity(), plans, problem.key(), device_identity(device),
                     compiler_identity(False))


@dataclass(frozen=True)
class Tuning:
    """A choice made by timing or read from disk: the problem, the device,
    the candidates, their record (times, failures, the winner's index) and
    how it was had (``benchmarked in ...`` or ``from PATH``)."""

    problem: Problem
    device: int
    candidates: tuple[ForwardTiles, ...]
    record: Record
    how: str

    @property
    def winner(self) -> ForwardTiles:
        """The chosen plan."""
        return self.candidates[self.record.best]


class PlanTuner:
    """The forward plans chosen in this process, per (device, problem).

    Attributes:
        memory: (device index, :class:`Problem`) -> the chosen plan.
        last: the last :class:`Tuning` made by timing or read from disk.
    """

    def __init__(self) -> None:
        self.memory: dict[tuple[int, Problem], ForwardTiles] = {}
        self.last: Tuning | None = None

    def remembered(self, problem: Problem, device: int) -> ForwardTiles | None:
        """The plan chosen for ``problem`` on ``device`` in this process, if any."""
        return self.memory.get((device, problem))

    def choose(self, problem: Problem, device: int,
               measure: Callable[[], Callable[[ForwardTiles], float]] | None = None
               ) -> ForwardTiles | None:
        """The plan for ``problem`` on ``device``: the one in memory, else the
        disk cache's (SAGE_AUTOTUNE_CACHE), else the fastest candidate.

        Args:
            measure: called once, on a miss: prepares the timing (the
                pre-pass on the inputs) and returns the timer of one
                candidate (ms). None where timing is impossible: a miss is
                then None, and nothing is stored.

        Raises:
            sage.jit.AutotuneError: every candidate failed (each failure,
                a compile or driver error, is named); other errors of
                ``measure`` and of the timing pass through.
        """
        chosen = self.remembered(problem, device)
        if chosen is not None:
            return chosen
        plans = problem.candidates()
        benchmark = None if measure is None else (
            lambda: benchmark_configs(KERNEL, problem, plans, measure(), failure_types(False)))
        found = recorded_or_benchmarked(
            plans, lambda: disk_key(problem, device, plans), benchmark,
            {"kernel": KERNEL, "key": [repr(value) for value in problem.key()]})
        if found is None:
            return None
        record, how = found
        self.last = Tuning(problem, device, plans, record, how)
        self.memory[(device, problem)] = self.last.winner
        report_choice(KERNEL, problem, self.last.winner, how, *record_by_config(plans, record))
        return self.last.winner


#: The plans of this process (torch_ops asks it).
TUNER = PlanTuner()

__all__ = ["KERNEL", "PlanTuner", "Problem", "Situation", "TUNER", "Tuning", "bucket",
           "candidates", "disk_key", "problem_of", "situation", "time_launch"]
