"""GPU timing shared by the speed benchmarks (bench/attention_speed.py, bench/gemm_speed.py).

The CUDA-event :class:`Timer` with its L2 flush, the relative L2 error of an
output, speed ratios, the timing options of their command lines, and the loop
over cases that records a failing case and goes on. torch is imported if it
is installed (``timing.torch`` is None otherwise, so the CPU tests can import
the torch-free parts of the scripts).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402  (bench/common.py)

try:  # the benchmarks need torch; the CPU tests import the torch-free parts
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None  # type: ignore[assignment]

#: Bytes zeroed before each timed repetition: more than the L2 of any GPU timed here.
FLUSH_BYTES = 256 * 1024 * 1024


class Timer:
    """Median CUDA-event time of a callable, with an L2 flush before each repetition."""

    def __init__(self, rep_ms: float, min_reps: int, max_reps: int) -> None:
        self.rep_ms, self.min_reps, self.max_reps = rep_ms, min_reps, max_reps
        self.flush = torch.empty(FLUSH_BYTES, dtype=torch.int8, device="cuda")

    def _once(self, fn: Callable[[], Any]) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        self.flush.zero_()
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)

    def __call__(self, fn: Callable[[], Any]) -> dict[str, Any]:
        """Warm-up call (host-timed, includes compilation), one estimate, then repetitions."""
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        first_s = time.perf_counter() - t0
        estimate = self._once(fn)
        reps = max(self.min_reps, min(self.max_reps, int(self.rep_ms / max(estimate, 1e-3))))
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        for start, end in zip(starts, ends):
            self.flush.zero_()
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
        return {"ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times),
                "reps": reps, "first_call_s": first_s, "estimate_ms": estimate}


def rel_l2(x: Any, ref: Any) -> float:
    """‖x − ref‖₂ / ‖ref‖₂ of two tensors, both cast to float32 first."""
    x, ref = x.detach().float(), ref.detach().float()
    return float((x - ref).norm() / ref.norm())


def speed_ratio(sage_ms: float | None, other_ms: float | None) -> float | None:
    """t_other / t_sage: above 1 means sage is faster (None if either is missing)."""
    if not sage_ms or not other_ms:
        return None
    return other_ms / sage_ms


def add_timing_options(parser: argparse.ArgumentParser, *, budget_s: float, rep_ms: float,
                       min_reps: int, max_reps: int, max_call_s: float | None = None) -> None:
    """Adds ``--budget-s``, ``--rep-ms``, ``--min-reps`` and ``--max-reps`` (the last
    three are what :func:`run_cases` reads) with these defaults, and ``--max-call-s``
    after ``--budget-s`` where ``max_call_s`` gives its default."""
    parser.add_argument("--budget-s", type=float, default=budget_s,
                        help="wall-clock budget; measurements projected past it are skipped")
    if max_call_s is not None:
        parser.add_argument("--max-call-s", type=float, default=max_call_s,
                            help="skip a measurement whose single call is projected longer")
    parser.add_argument("--rep-ms", type=float, default=rep_ms,
                        help="target time of the repetitions of one measurement")
    parser.add_argument("--min-reps", type=int, default=min_reps)
    parser.add_argument("--max-reps", type=int, default=max_reps)


def run_cases(results: dict[str, Any], cases: Iterable[Any], options: argparse.Namespace,
              start: Callable[[Timer], Callable[[Any], dict[str, Any]]],
              log: Callable[[str], None] = common.log) -> None:
    """Appends to ``results["rows"]`` the row of each case (a dataclass with a ``name``)
    that ``options.cases`` selects.

    ``start(timer)`` is called once, after the check for a CUDA device and with a
    :class:`Timer` of the timing options; it returns the function that runs one case
    and returns its row. A case that raises (e.g. out of memory allocating its inputs)
    gets a row with its error and the run goes on; an error outside a case (no GPU)
    goes to ``results["error"]``.
    """
    try:
        if torch is None or not torch.cuda.is_available():
            raise RuntimeError("needs torch and a CUDA device")
        run_case = start(Timer(options.rep_ms, options.min_reps, options.max_reps))
        for case in cases:
            if not common.matches(case.name, options.cases):
                continue
            log(case.name)
            try:
                results["rows"].append(run_case(case))
            except Exception as exc:  # noqa: BLE001 - e.g. out of memory allocating inputs
                results["rows"].append({"case": case.name, **asdict(case), "providers": {},
                                        "error": common.error_text(exc)})
                log(f"  {case.name}: {results['rows'][-1]['error']}")
                torch.cuda.empty_cache()
    except Exception as exc:  # noqa: BLE001 - still write what there is
        results["error"] = common.error_text(exc, 2000)
