"""GPU timing shared by the speed benchmarks (bench/attention_speed.py, bench/gemm_speed.py,
bench/flash_speed.py).

The CUDA-event :class:`Timer` with its L2 flush, the relative L2 error of an
output, speed ratios, the timing options of their command lines, and the loop
over cases that records a failing case and goes on; for the scripts that time
their providers in rounds (gemm_speed.py, flash_speed.py): the rounds with
their budget check (:func:`time_in_rounds`), the median of rounds
(:func:`median_of_rounds`), the verdicts against a bar and their summary, and
the markdown report (:func:`render_rounds_report`). torch is imported if it is
installed (``timing.torch`` is None otherwise, so the CPU tests can import the
torch-free parts of the scripts).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402  (bench/common.py)
import gpu_clocks  # noqa: E402  (bench/gpu_clocks.py)

try:  # the benchmarks need torch; the CPU tests import the torch-free parts
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None  # type: ignore[assignment]

#: Bytes zeroed before each timed repetition: more than the L2 of any GPU timed here.
FLUSH_BYTES = 256 * 1024 * 1024


class Timer:
    """Median CUDA-event time of a callable, with an L2 flush before each repetition;
    with ``clocks``, the SM clock and board power while the repetitions ran
    (:mod:`gpu_clocks`)."""

    def __init__(self, rep_ms: float, min_reps: int, max_reps: int,
                 clocks: gpu_clocks.ClockSampler | None = None) -> None:
        self.rep_ms, self.min_reps, self.max_reps = rep_ms, min_reps, max_reps
        self.clocks = clocks
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
        began = time.perf_counter()
        for start, end in zip(starts, ends):
            self.flush.zero_()
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        ended = time.perf_counter()
        times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
        result = {"ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times),
                  "reps": reps, "first_call_s": first_s, "estimate_ms": estimate}
        if self.clocks is not None and self.clocks.active:
            result["clocks"] = self.clocks.window(began, ended)
        return result


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


def parse_rounds_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None, *,
                      check_help: str, budget_s: float, rep_ms: float, min_reps: int,
                      max_reps: int) -> argparse.Namespace:
    """Adds the options of a script that times its providers in rounds (see
    :func:`time_in_rounds`) after those ``parser`` has: ``--rounds`` (default 3), the
    timing options of :func:`add_timing_options` with these defaults, and ``--no-check``
    (``options.check`` False; ``check_help`` says what it skips); parses ``argv``, and
    exits through ``parser.error`` if ``--rounds`` is below 1."""
    parser.add_argument("--rounds", type=int, default=3,
                        help="timing rounds (each provider once a round; median of rounds)")
    add_timing_options(parser, budget_s=budget_s, rep_ms=rep_ms, min_reps=min_reps,
                       max_reps=max_reps)
    parser.add_argument("--no-check", dest="check", action="store_false", help=check_help)
    options = parser.parse_args(argv)
    if options.rounds < 1:
        parser.error("--rounds must be at least 1")
    return options


def run_cases(results: dict[str, Any], cases: Iterable[Any], options: argparse.Namespace,
              start: Callable[[Timer], Callable[[Any], dict[str, Any]]],
              log: Callable[[str], None] = common.log) -> None:
    """Appends to ``results["rows"]`` the row of each case (a dataclass with a ``name``)
    that ``options.cases`` selects.

    ``start(timer)`` is called once, after the check for a CUDA device and with a
    :class:`Timer` of the timing options that samples the device's clock and power
    (:class:`gpu_clocks.ClockSampler`, while the cases run); it returns the function
    that runs one case and returns its row. A case that raises (e.g. out of memory
    allocating its inputs) gets a row with its error and the run goes on; an error
    outside a case (no GPU) goes to ``results["error"]``.
    """
    try:
        if torch is None or not torch.cuda.is_available():
            raise RuntimeError("needs torch and a CUDA device")
        with gpu_clocks.current_device_sampler(torch) as clocks:
            run_case = start(Timer(options.rep_ms, options.min_reps, options.max_reps, clocks))
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


# -------------------------------------------------------- providers timed in rounds

def median_of_rounds(rounds: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One provider's time from the :class:`Timer` results of its rounds (at least one).

    Returns ``ms``, the median of the rounds' medians; ``rounds_ms``, those medians in
    round order; ``min_ms`` and ``max_ms`` over every repetition of every round;
    ``reps``, the repetitions of all rounds; and ``first_call_s``, the first round's
    warm-up call (the one that includes compilation).
    """
    medians = [r["ms"] for r in rounds]
    return {"ms": statistics.median(medians), "rounds_ms": medians,
            "min_ms": min(r["min_ms"] for r in rounds),
            "max_ms": max(r["max_ms"] for r in rounds), "reps": sum(r["reps"] for r in rounds),
            "first_call_s": rounds[0]["first_call_s"]}


def time_in_rounds(case: str, work: float, fns: dict[str, Callable[[], Any]],
                   entries: dict[str, dict[str, Any]], options: argparse.Namespace,
                   timer: Timer, budget: common.Budget, history: dict[str, tuple[float, float]],
                   summarize: Callable[[Sequence[dict[str, Any]]], dict[str, Any]],
                   rate: tuple[str, str], log: Callable[[str], None] = common.log) -> None:
    """Times the callables ``fns`` (name -> callable) of case ``case`` in ``options.rounds``
    rounds and records each one's result in its entry of ``entries`` (the same names).

    A callable seen at an earlier case (``history``: name -> (work, ms) of its last
    timing) is first projected to this case's ``work`` (operations, FLOPs: time scales
    with it); if its rounds would not fit in ``budget``, its entry gets ``skipped``.
    Every round times each callable once with ``timer``, in reverse order every other
    round, so clock drift favours none. A callable that raises gets ``error`` in its
    entry and is not timed again. The others' entries are updated with
    ``summarize(rounds)`` of their Timer results (e.g. :func:`median_of_rounds` and a
    rate), ``history`` with their work and ``ms``, and a line is logged with the rate
    ``entry[rate[0]]`` in units ``rate[1]`` (e.g. ``("tops", "TOP/s")``). Removes from
    ``fns`` the callables skipped or failed.
    """
    for name in list(fns):
        seen = history.get(name)
        if seen is not None:
            call_ms = seen[1] * work / seen[0]
            reps = max(options.min_reps, min(options.max_reps, options.rep_ms / call_ms))
            needed = options.rounds * (reps + 2) * (call_ms + 0.2) / 1e3 + 1.0
            if not budget.fits(needed):
                entries[name]["skipped"] = f"projected {needed:.0f} s, {budget.left():.0f} s left"
                del fns[name]
    timings: dict[str, list[dict[str, Any]]] = {name: [] for name in fns}
    for round_index in range(options.rounds):
        order = list(fns) if round_index % 2 == 0 else list(reversed(fns))
        for name in order:
            try:
                timings[name].append(timer(fns[name]))
            except Exception as exc:  # noqa: BLE001 - recorded, the others go on
                entries[name]["error"] = common.error_text(exc)
                del fns[name], timings[name]
                torch.cuda.empty_cache()
    key, unit = rate
    for name, rounds in timings.items():
        entry = entries[name]
        entry.update(summarize(rounds))
        history[name] = (work, entry["ms"])
        log(f"  {case} {name}: {entry['ms']:.4f} ms ({entry[key]:.1f} {unit}, "
            f"rounds {', '.join(f'{ms:.4f}' for ms in entry['rounds_ms'])})")


def verdict(ratio: float | None, at_least: float, correct: bool) -> str:
    """A speed ratio against a bar: PASS or MISS; WRONG when an output failed its
    check; - when unmeasured (``ratio`` None)."""
    if ratio is None:
        return "-"
    if not correct:
        return "WRONG"
    return "PASS" if ratio >= at_least else "MISS"


def bars_summary(ratios: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Whether a run meets its bars: every ratio at a default plan (``headline``) that
    has a ``verdict`` is PASS (a bar with nothing judged is not met). Returns ``met``,
    how many ratios were ``judged`` and the ``misses`` (``CASE SAGE/OTHER: VERDICT``)."""
    judged = [r for r in ratios if r["headline"] and "verdict" in r]
    misses = [f"{r['case']} {r['sage']}/{r['other']}: {r['verdict']}" for r in judged
              if r["verdict"] != "PASS"]
    return {"met": bool(judged) and not misses, "judged": len(judged), "misses": misses}


def check_cell(entry: dict[str, Any]) -> str:
    """What the check of one provider's output (``entry["check"]``) found: not checked,
    the reference itself, its relative L2 error and tolerance, exact (integers equal to
    the reference's) or how many differ, or the dtype and shape that did not match;
    behind ``WRONG:`` when the check failed."""
    check = entry.get("check")
    if not check:
        return "not checked"
    if check.get("reference"):
        return "reference"
    if "rel_l2" in check:
        text = f"rel-L2 {check['rel_l2']:.1e} (tol {check['tol']:g})"
    elif "mismatches" in check:
        text = "exact" if check["ok"] else (f"{check['mismatches']} differ, max |diff| "
                                            f"{check['max_abs_diff']}")
    else:
        text = check.get("mismatch", "?")
    return text if check["ok"] else f"WRONG: {text}"


def render_rounds_report(rows: Sequence[dict[str, Any]], ratios: Sequence[dict[str, Any]],
                         bars: dict[str, Any], checked: bool, *, tiles_header: str,
                         rate: tuple[str, str], bars_title: str, legend: str) -> str:
    """The markdown of a run timed with :func:`time_in_rounds`: the speed table (case,
    provider, ``tiles_header``, ms, the rate ``rate`` = (key, unit) of each entry, and
    :func:`check_cell`), the ratio table with the bars' verdicts, the line
    ``**BARS_TITLE: met|not met**`` (from :func:`bars_summary`), the ``legend``, a
    warning when the outputs were not ``checked``, and the notes (the errors and skips
    of rows and providers)."""
    key, unit = rate
    speed_rows = []
    notes = []
    for row in rows:
        if "error" in row:
            notes.append(f"- {row['case']}: {row['error']}")
        for name, entry in row["providers"].items():
            ms = entry.get("ms")
            why = entry.get("skipped") or entry.get("error")
            speed_rows.append([row["case"], name, entry.get("tiles") or "-",
                               f"{ms:.4f}" if ms else ("skipped" if "skipped" in entry
                                                       else "error"),
                               f"{entry[key]:.1f}" if ms else None, check_cell(entry)])
            if why:
                notes.append(f"- {row['case']} {name}: {why}")
    ratio_rows = [[r["case"], r["sage"], r["other"],
                   None if r["ratio"] is None else f"{r['ratio']:.3f}x",
                   f">= {r['at_least']}x" if "at_least" in r else "-", r.get("verdict", "-")]
                  for r in ratios]
    status = "met" if bars["met"] else "not met"
    lines = [common.markdown_table(["case", "provider", tiles_header, "ms", unit, "check"],
                                   speed_rows, right=[False, False, False, True, True, False]),
             "",
             common.markdown_table(["case", "sage", "vs", "speed ratio", "bar", "verdict"],
                                   ratio_rows, right=[False, False, False, True, True, False]),
             "", f"**{bars_title}: {status}** ({bars['judged']} judged"
             + (f"; {'; '.join(bars['misses'])})" if bars["misses"] else ")"), "", legend]
    if not checked:
        lines += ["", "**Outputs were not checked (`--no-check`).**"]
    lines += common.notes(notes)
    return "\n".join(lines)
