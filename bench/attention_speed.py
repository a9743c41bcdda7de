"""Attention speed: sage.attention vs torch SDPA (cuDNN and flash backends), bf16, on one GPU.

    python3 bench/attention_speed.py OUT.json OUT.md [--quick] [--cases d128-n4096]
        [--passes fwd,bwd,fwdbwd] [--providers sage,cudnn,flash] [--budget-s 330]

For B=4, H=32, D in {64, 128}, N in {1K, 4K, 16K}, causal and not: the
forward, the backward and forward+backward of each provider, in one process,
on the same inputs. Times are medians of CUDA-event timings (bench/timing.py),
each repetition after an L2 flush, after a warm-up call (compilation stays out
of the numbers; the first call's time is recorded separately). Repetitions
are capped by ``--rep-ms`` per measurement; a measurement whose projected time
(from the same provider/pass at a smaller N, scaled by N^2) exceeds
``--max-call-s`` per call or the remaining ``--budget-s`` is skipped and
marked. A provider that fails on a case is recorded with its error and the
run goes on. Each measurement also records the SM clock and board power it
ran at (bench/gpu_clocks.py, ``nvidia-smi``): the table's MHz columns, with
``cap`` where the power limit held the clock down.

FLOPs follow FlashAttention's convention: forward 4·B·H·N²·D (halved when
causal), backward 2.5 x forward, forward+backward 3.5 x forward. Ratios are
speed ratios: ``sage/cuDNN`` = t_cuDNN / t_sage (above 1: sage is faster).
"""

from __future__ import annotations

import argparse
import sys
import zlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402  (bench/common.py)
from common import AttentionCase  # noqa: E402
import gpu_clocks  # noqa: E402  (bench/gpu_clocks.py)
import timing  # noqa: E402  (bench/timing.py)
from timing import torch  # noqa: E402  (None without torch: the CPU tests import the rest)

common.add_python_path()

PASSES = ("fwd", "bwd", "fwdbwd")
PASS_LABELS = {"fwd": "forward", "bwd": "backward", "fwdbwd": "fwd+bwd"}
PROVIDERS = ("sage", "cudnn", "flash")
PROVIDER_LABELS = {"sage": "sage", "cudnn": "cuDNN", "flash": "flash"}
PASS_FLOP_FACTOR = {"fwd": 1.0, "bwd": 2.5, "fwdbwd": 3.5}


def attention_flops(case: AttentionCase, pass_name: str) -> float:
    """FlashAttention's FLOP count of ``pass_name`` ("fwd", "bwd", "fwdbwd") for ``case``."""
    forward = 4.0 * case.batch * case.heads * case.n * case.n * case.d
    if case.causal:
        forward /= 2
    return forward * PASS_FLOP_FACTOR[pass_name]


def tflops(case: AttentionCase, pass_name: str, ms: float | None) -> float | None:
    """Achieved TFLOP/s of a pass that took ``ms`` milliseconds (None if not measured)."""
    if not ms:
        return None
    return attention_flops(case, pass_name) / (ms * 1e-3) / 1e12


def speed_cases(quick: bool = False) -> list[AttentionCase]:
    """The issue's grid, smallest N first (so larger ones can be projected)."""
    lengths = (1024, 4096) if quick else (1024, 4096, 16384)
    dims = (128,) if quick else (64, 128)
    return [AttentionCase(n, d, causal) for n in lengths for d in dims for causal in (False, True)]


def project_ms(history: dict[tuple[str, int, bool, str], tuple[int, float]],
               provider: str, case: AttentionCase, pass_name: str) -> float | None:
    """A time for (provider, case, pass) scaled by N^2 from the largest smaller N measured
    with the same provider, D, causality and pass; None if there is none."""
    seen = history.get((provider, case.d, case.causal, pass_name))
    if seen is None:
        return None
    n, ms = seen
    return ms * (case.n / n) ** 2


# --------------------------------------------------------------------------- GPU side

def forward_fn(provider: str, q: Any, k: Any, v: Any, causal: bool) -> Callable[[], Any]:
    """The provider's forward as a callable returning O."""
    if provider == "sage":
        import sage  # noqa: PLC0415
        return lambda: sage.attention(q, k, v, causal=causal)
    from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: PLC0415
    from torch.nn.functional import scaled_dot_product_attention as sdpa  # noqa: PLC0415
    backend = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}[provider]

    def run() -> Any:
        with sdpa_kernel(backend):
            return sdpa(q, k, v, is_causal=causal)
    return run


def pass_fn(pass_name: str, forward: Callable[[], Any], inputs: tuple[Any, ...],
            do: Any) -> Callable[[], Any]:
    """The callable that one timed repetition of ``pass_name`` runs."""
    if pass_name == "fwd":
        return forward
    if pass_name == "fwdbwd":
        return lambda: torch.autograd.grad(forward(), inputs, do)
    o = forward()  # bwd: one forward, its graph kept and differentiated again each time
    return lambda: torch.autograd.grad(o, inputs, do, retain_graph=True)


def sanity(q: Any, k: Any, v: Any, do: Any, case: AttentionCase,
           providers: Sequence[str]) -> dict[str, Any]:
    """Relative L2 of sage's O, dQ, dK, dV against the first SDPA backend that runs
    (a check that the timed kernels compute attention, not an accuracy report)."""
    inputs = (q, k, v)
    results: dict[str, Any] = {}
    try:
        o = forward_fn("sage", q, k, v, case.causal)()
        grads = torch.autograd.grad(o, inputs, do)
    except Exception as exc:  # noqa: BLE001
        return {"error": common.error_text(exc)}
    for provider in providers:
        if provider == "sage":
            continue
        try:
            ref = forward_fn(provider, q, k, v, case.causal)()
            ref_grads = torch.autograd.grad(ref, inputs, do)
        except Exception as exc:  # noqa: BLE001
            results[f"{provider}_error"] = common.error_text(exc)
            continue
        results["against"] = provider
        for name, x, r in zip(("o", "dq", "dk", "dv"), (o, *grads), (ref, *ref_grads)):
            results[name] = timing.rel_l2(x, r)
        break
    return results


def run_case(case: AttentionCase, options: argparse.Namespace, timer: timing.Timer,
             budget: common.Budget, history: dict[tuple[str, int, bool, str], tuple[int, float]],
             log: Callable[[str], None]) -> dict[str, Any]:
    """All providers and passes of one case."""
    row: dict[str, Any] = {"case": case.name, **asdict(case), "providers": {}}
    torch.manual_seed(zlib.crc32(case.name.encode()))
    shape = (case.batch, case.heads, case.n, case.d)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16).requires_grad_(True)
               for _ in range(3))
    do = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    if "sage" in options.providers and options.check:
        projected = project_ms(history, "sage", case, "fwdbwd")
        if projected is None or (projected / 1e3 <= options.max_call_s
                                 and budget.fits(2 * projected / 1e3 + 1.0)):
            row["check_rel_l2"] = sanity(q, k, v, do, case, options.providers)
        else:
            row["check_rel_l2"] = {"skipped": f"projected sage fwd+bwd {projected / 1e3:.1f} s"}
    for provider in options.providers:
        entry: dict[str, Any] = {}
        row["providers"][provider] = entry
        for pass_name in options.passes:
            projected = project_ms(history, provider, case, pass_name)
            if projected is not None:
                call_s = projected / 1e3
                needed = call_s * (3 + timer.min_reps) + 1.0
                if call_s > options.max_call_s or not budget.fits(needed):
                    entry[pass_name] = {"skipped": f"projected {call_s:.1f} s per call, "
                                                   f"{budget.left():.0f} s left"}
                    log(f"  {case.name} {provider} {pass_name}: skipped "
                        f"({entry[pass_name]['skipped']})")
                    continue
            try:
                fn = pass_fn(pass_name, forward_fn(provider, q, k, v, case.causal), (q, k, v),
                             do)
                result = timer(fn)
                del fn
                result["tflops"] = tflops(case, pass_name, result["ms"])
                history[(provider, case.d, case.causal, pass_name)] = (case.n, result["ms"])
                log(f"  {case.name} {provider} {pass_name}: {result['ms']:.3f} ms "
                    f"({result['tflops']:.1f} TFLOP/s, {result['reps']} reps)")
            except Exception as exc:  # noqa: BLE001 - recorded, the run goes on
                result = {"error": common.error_text(exc)}
                log(f"  {case.name} {provider} {pass_name}: {result['error']}")
                torch.cuda.empty_cache()
            entry[pass_name] = result
        derive_backward(entry, case)
    del q, k, v, do
    torch.cuda.empty_cache()
    return row


def derive_backward(entry: dict[str, Any], case: AttentionCase) -> None:
    """If the backward alone could not be timed (e.g. a second backward through a
    retained graph is refused) but forward and forward+backward were, record
    fwd+bwd - fwd as the backward, marked ``derived``."""
    bwd, fwd, both = entry.get("bwd"), entry.get("fwd"), entry.get("fwdbwd")
    if bwd and "error" in bwd and fwd and "ms" in fwd and both and "ms" in both:
        ms = both["ms"] - fwd["ms"]
        entry["bwd"] = {"ms": ms, "derived": True, "error_direct": bwd["error"],
                        "tflops": tflops(case, "bwd", ms)}


# --------------------------------------------------------------------------- report

def cell_ms(result: dict[str, Any] | None) -> str | float | None:
    """A table cell for one measurement: ms, or why there is none."""
    if not result:
        return None
    if "ms" in result:
        return f"{result['ms']:.3f}" + ("*" if result.get("derived") else "")
    return "skipped" if "skipped" in result else "error"


def render(rows: Sequence[dict[str, Any]], providers: Sequence[str],
           passes: Sequence[str]) -> str:
    """The speed table: ms and TFLOP/s per provider, sage's speed ratios, and the
    SM clock each provider ran at."""
    headers = ["case", "pass"]
    headers += [f"{PROVIDER_LABELS[p]} ms" for p in providers]
    headers += [f"{PROVIDER_LABELS[p]} TFLOP/s" for p in providers]
    others = [p for p in providers if p != "sage"]
    if "sage" in providers:
        headers += [f"sage/{PROVIDER_LABELS[p]}" for p in others]
    headers += [f"{PROVIDER_LABELS[p]} MHz" for p in providers]
    table = []
    for row in rows:
        case = AttentionCase(row["n"], row["d"], row["causal"], row["batch"], row["heads"])
        for pass_name in passes:
            results = {p: row["providers"].get(p, {}).get(pass_name) for p in providers}
            ms = {p: (r or {}).get("ms") for p, r in results.items()}
            cells: list[Any] = [case.name, PASS_LABELS[pass_name]]
            cells += [cell_ms(results[p]) for p in providers]
            cells += [None if ms[p] is None else f"{tflops(case, pass_name, ms[p]):.1f}"
                      for p in providers]
            if "sage" in providers:
                ratios = [timing.speed_ratio(ms["sage"], ms[p]) for p in others]
                cells += [None if r is None else f"{r:.2f}x" for r in ratios]
            cells += [gpu_clocks.cell((results[p] or {}).get("clocks")) for p in providers]
            table.append(cells)
    lines = [common.markdown_table(headers, table, right=[False, False]
                                   + [True] * (len(headers) - 2)), "",
             "Ratios are speed ratios (t_other / t_sage; above 1: sage faster). `*`: backward "
             "derived as fwd+bwd - fwd. FLOPs: fwd 4·B·H·N²·D (halved when causal), bwd 2.5x, "
             "fwd+bwd 3.5x. MHz: the mean SM clock while the repetitions ran (nvidia-smi, "
             "bench/gpu_clocks.py); `cap`: held down by the board's power limit in at least "
             "half of the samples, so the kernel's power, not only its cycles, sets its "
             "time."]
    problems = []
    for row in rows:
        for provider, entry in row["providers"].items():
            for pass_name, result in entry.items():
                why = result.get("skipped") or result.get("error")
                if why and not result.get("derived"):
                    problems.append(f"- {row['case']} {provider} {pass_name}: {why}")
        check = row.get("check_rel_l2")
        if check:
            text = ", ".join(f"{k} {v:.2e}" if isinstance(v, float) else f"{k} {v}"
                             for k, v in check.items())
            problems.append(f"- {row['case']} sanity (sage vs SDPA, rel-L2): {text}")
    lines += common.notes(problems)
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line (see the module's docstring)."""
    parser = common.BenchmarkParser(
        __doc__.splitlines()[0], markdown_help="where the markdown table goes",
        quick_help="D=128, N in {1K, 4K}", cases_example="d128-n4096,*-causal",
        subsets={"--passes": PASSES, "--providers": PROVIDERS})
    timing.add_timing_options(parser, budget_s=330.0, rep_ms=150.0, min_reps=3, max_reps=100,
                              max_call_s=5.0)
    parser.add_argument("--no-check", dest="check", action="store_false",
                        help="skip the sage-vs-SDPA sanity check of each case")
    return parser.parse_args(argv)


def header(results: dict[str, Any]) -> str:
    """The report's title line (date, device, versions, commit, time) and command."""
    return common.report_header(results, "Attention speed, bf16, B=4 H=32", "attention_speed.py")


def main(argv: Sequence[str] | None = None) -> int:
    """Times the selected cases, writes the JSON and the markdown; 1 if the run failed."""
    options = parse_args(argv)
    budget = common.Budget(options.budget_s)
    results: dict[str, Any] = {"argv": list(argv or sys.argv[1:]), "quick": options.quick,
                               "flop_convention": "fwd 4BHN^2D (causal /2), bwd 2.5x, "
                                                  "fwdbwd 3.5x", "rows": []}

    def start(timer: timing.Timer) -> Callable[[AttentionCase], dict[str, Any]]:
        """The runner of one case; N^2 projections are kept across cases."""
        history: dict[tuple[str, int, bool, str], tuple[int, float]] = {}
        return lambda case: run_case(case, options, timer, budget, history, common.log)

    timing.run_cases(results, speed_cases(options.quick), options, start)
    body = render(results["rows"], options.providers, options.passes)
    return common.write_report(results, options.json, options.markdown, budget, header, body)


if __name__ == "__main__":
    sys.exit(main())
