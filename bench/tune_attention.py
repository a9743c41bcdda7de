"""SageBwd forward plan tuning: every candidate's time and the winner, at the issue's shapes, bf16.

    python3 bench/tune_attention.py OUT.json OUT.md [--quick] [--cases d128-n4096-full]
        [--cache] [--budget-s 600]

For B=4, H=32, D in {64, 128}, N in {1K, 4K, 16K}, causal and not (the cases
and names of bench/attention_speed.py), the first sage forward of a case
chooses its plan as sage.attention's first call does
(sage.kernels.sagebwd.tuning). Recorded per case: each candidate plan's
forward-kernel time (the tuner's: CUDA events, the L2 cache flushed before
each run, the median) or failure, the winner and its gain over the default
plan, the first call's wall time (every candidate compiled and timed), and
the whole forward (pre-pass included; bench/timing.py's Timer) at the
default and at the chosen plan. Without --cache the disk cache of winners
is off (SAGE_AUTOTUNE_CACHE=0): every case is timed and nothing is written;
with it, a winner on disk is reported with the times recorded there, and
new winners are written where sage.attention reads them.
"""

from __future__ import annotations

import argparse
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402  (bench/common.py)
from attention_speed import speed_cases  # noqa: E402  (the issue's cases)
from common import AttentionCase  # noqa: E402
import timing  # noqa: E402  (bench/timing.py)
from timing import torch  # noqa: E402  (None without torch)

common.add_python_path()

from sage.kernels.sagebwd import torch_ops, tuning  # noqa: E402
from sage.kernels.sagebwd.launch import ForwardTiles, default_tiles  # noqa: E402


def plan_label(plan: ForwardTiles) -> str:
    """A plan in a few words: ``64x128 w4 r168 s2 in-order tma`` (rows x keys,
    warps, register cap, stages, the loop's order, then the options it sets)."""
    options = [name for name, on in (("tma", plan.tma_store), ("producer", plan.warp_specialize),
                                     ("ping-pong", plan.ping_pong),
                                     ("persistent", plan.persistent)) if on]
    return " ".join([f"{plan.block_m}x{plan.block_n}", f"w{plan.num_warps}",
                     f"r{plan.maxnreg or '-'}", f"s{plan.stages}",
                     "skewed" if plan.skewed else "in-order", *options])


def tuning_row(made: tuning.Tuning) -> dict[str, Any]:
    """What a case records of its tuning: the problem, how the winner was had,
    the winner and every candidate's kernel time (ms) or failure."""
    timings = made.record.timings
    default_ms, winner_ms = timings[0], timings[made.record.best]
    return {"problem": repr(made.problem), "how": made.how, "winner": repr(made.winner),
            "winner_label": plan_label(made.winner), "default_ms": default_ms,
            "winner_ms": winner_ms,
            "gain": None if default_ms is None else default_ms / winner_ms,
            "candidates": [{"plan": repr(plan), "label": plan_label(plan), "ms": ms,
                            "failure": made.record.failures.get(index)}
                           for index, (plan, ms) in enumerate(zip(made.candidates, timings))]}


def run_case(case: AttentionCase, timer: timing.Timer) -> dict[str, Any]:
    """Tunes one case by its first forward, then times the forward at the
    default and at the chosen plan."""
    torch.manual_seed(zlib.crc32(case.name.encode()))
    q, k, v = (torch.randn(case.batch, case.heads, case.n, case.d, device="cuda",
                           dtype=torch.bfloat16) for _ in range(3))
    tuning.TUNER.last = None
    start = time.perf_counter()
    torch_ops.forward(q, k, v, causal=case.causal)
    torch.cuda.synchronize()
    first_call_s = time.perf_counter() - start
    made = tuning.TUNER.last
    if made is None:
        raise RuntimeError("the first call chose no plan by timing or from disk (is "
                           "SAGE_TUNE_ATTENTION=0?)")
    row = {"case": case.name, **asdict(case), **tuning_row(made), "first_call_s": first_call_s}
    default = default_tiles(case.d, causal=case.causal, n_kv=case.n)
    row["default_forward"] = timer(lambda: torch_ops.forward(q, k, v, causal=case.causal,
                                                             tiles=default))
    row["tuned_forward"] = timer(lambda: torch_ops.forward(q, k, v, causal=case.causal))
    common.log(f"  {case.name}: {row['winner_label']} ({made.how}), kernel "
               f"{common.fmt(row['default_ms'])} -> {common.fmt(row['winner_ms'])} ms")
    return row


def _ms(value: float | None) -> str | None:
    return None if value is None else f"{value:.3f}"


def _ratio(slow: float | None, fast: float | None) -> str | None:
    return None if not slow or not fast else f"{slow / fast:.2f}x"


def render(rows: Sequence[dict[str, Any]]) -> str:
    """The winners (one row a case) and every candidate's time (one row a plan)."""
    tuned = [row for row in rows if "candidates" in row]
    summary = [[row["case"], row["winner_label"], _ms(row["default_ms"]), _ms(row["winner_ms"]),
                _ratio(row["default_ms"], row["winner_ms"]),
                _ms(row["default_forward"].get("ms")), _ms(row["tuned_forward"].get("ms")),
                _ratio(row["default_forward"].get("ms"), row["tuned_forward"].get("ms")),
                f"{row['first_call_s']:.1f}", row["how"]] for row in tuned]
    plans = [[row["case"], each["label"], _ms(each["ms"]), _ratio(row["default_ms"], each["ms"]),
              f"failed: {each['failure']}" if each["failure"]
              else "winner" if each["plan"] == row["winner"] else ""]
             for row in tuned for each in row["candidates"]]
    lines = [common.markdown_table(
                 ["case", "winner", "default kernel ms", "winner kernel ms", "kernel gain",
                  "forward ms (default plan)", "forward ms (tuned)", "forward gain",
                  "first call s", "how"], summary), "",
             "Kernel: the sagebwd_forward launch alone, as the tuner times it; forward: the "
             "whole call, pre-pass included. Plans: query rows x keys, warps, register cap, "
             "stages, the key loop's order, O by the copy engine (tma), a producer warpgroup, "
             "ping-pong, a persistent grid.", "",
             common.markdown_table(["case", "plan", "kernel ms", "default / plan", "note"],
                                   plans)]
    problems = [f"- {row['case']}: {row.get('error') or row.get('skipped')}" for row in rows
                if "error" in row or "skipped" in row]
    lines += common.notes(problems)
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line (see the module's docstring)."""
    parser = common.BenchmarkParser(
        __doc__.splitlines()[0], markdown_help="where the markdown tables go",
        quick_help="D=128, N in {1K, 4K}", cases_example="d128-n4096-full,*-causal",
        subsets={})
    timing.add_timing_options(parser, budget_s=600.0, rep_ms=100.0, min_reps=3, max_reps=100)
    parser.add_argument("--cache", action="store_true",
                        help="read and write the disk cache of winners (SAGE_AUTOTUNE_CACHE) "
                             "as sage.attention does; default: time every case, write nothing")
    return parser.parse_args(argv)


def header(results: dict[str, Any]) -> str:
    """The report's title line (date, device, versions, commit, time) and command."""
    return common.report_header(results, "SageBwd forward plan tuning, bf16, B=4 H=32",
                                "tune_attention.py")


def main(argv: Sequence[str] | None = None) -> int:
    """Tunes the selected cases, writes the JSON and the markdown; 1 if the run failed."""
    options = parse_args(argv)
    budget = common.Budget(options.budget_s)
    results: dict[str, Any] = {"argv": list(argv if argv is not None else sys.argv[1:]),
                               "quick": options.quick, "cache": options.cache, "rows": []}

    def start(timer: timing.Timer) -> Callable[[AttentionCase], dict[str, Any]]:
        def case_row(case: AttentionCase) -> dict[str, Any]:
            if budget.left() <= 0:
                return {"case": case.name, **asdict(case), "skipped": "the budget is spent"}
            return run_case(case, timer)
        return case_row

    def run() -> None:
        timing.run_cases(results, speed_cases(options.quick), options, start)
    (run if options.cache else common.with_environment(run, "SAGE_AUTOTUNE_CACHE", "0"))()
    return common.write_report(results, options.json, options.markdown, budget, header,
                               render(results["rows"]))


if __name__ == "__main__":
    sys.exit(main())
