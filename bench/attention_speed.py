"""Attention speed: sage.attention vs torch SDPA (cuDNN and flash backends), bf16, on one GPU.

    python3 bench/attention_speed.py OUT.json OUT.md [--quick] [--cases d128-n4096]
        [--passes fwd,bwd,fwdbwd] [--providers sage,cudnn,flash] [--budget-s 330]

For B=4, H=32, D in {64, 128}, N in {1K, 4K, 16K}, causal and not: the
forward, the backward and forward+backward of each provider, in one process,
on the same inputs. Times are medians of CUDA-event timings, each repetition
after an L2 flush, after a warm-up call (compilation stays out of the
numbers; the first call's time is recorded separately). Repetitions are
capped by ``--rep-ms`` per measurement; a measurement whose projected time
(from the same provider/pass at a smaller N, scaled by N^2) exceeds
``--max-call-s`` per call or the remaining ``--budget-s`` is skipped and
marked. A provider that fails on a case is recorded with its error and the
run goes on.

FLOPs follow FlashAttention's convention: forward 4·B·H·N²·D (halved when
causal), backward 2.5 x forward, forward+backward 3.5 x forward. Ratios are
speed ratios: ``sage/cuDNN`` = t_cuDNN / t_sage (above 1: sage is faster).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402  (bench/common.py)

common.add_python_path()

try:  # the benchmark needs torch; the CPU tests import the torch-free parts
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None  # type: ignore[assignment]

PASSES = ("fwd", "bwd", "fwdbwd")
PASS_LABELS = {"fwd": "forward", "bwd": "backward", "fwdbwd": "fwd+bwd"}
PROVIDERS = ("sage", "cudnn", "flash")
PROVIDER_LABELS = {"sage": "sage", "cudnn": "cuDNN", "flash": "flash"}
PASS_FLOP_FACTOR = {"fwd": 1.0, "bwd": 2.5, "fwdbwd": 3.5}


@dataclass(frozen=True)
class SpeedCase:
    """One attention shape: q, k, v (batch, heads, n, d), bf16."""

    n: int
    d: int
    causal: bool
    batch: int = 4
    heads: int = 32

    @property
    def name(self) -> str:
        """E.g. ``d128-n4096-causal`` (what ``--cases`` matches)."""
        return f"d{self.d}-n{self.n}-{'causal' if self.causal else 'full'}"


def attention_flops(case: SpeedCase, pass_name: str) -> float:
    """FlashAttention's FLOP count of ``pass_name`` ("fwd", "bwd", "fwdbwd") for ``case``."""
    forward = 4.0 * case.batch * case.heads * case.n * case.n * case.d
    if case.causal:
        forward /= 2
    return forward * PASS_FLOP_FACTOR[pass_name]


def tflops(case: SpeedCase, pass_name: str, ms: float | None) -> float | None:
    """Achieved TFLOP/s of a pass that took ``ms`` milliseconds (None if not measured)."""
    if not ms:
        return None
    return attention_flops(case, pass_name) / (ms * 1e-3) / 1e12


def speed_cases(quick: bool = False) -> list[SpeedCase]:
    """The issue's grid, smallest N first (so larger ones can be projected)."""
    lengths = (1024, 4096) if quick else (1024, 4096, 16384)
    dims = (128,) if quick else (64, 128)
    return [SpeedCase(n, d, causal) for n in lengths for d in dims for causal in (False, True)]


def project_ms(history: dict[tuple[str, int, bool, str], tuple[int, float]],
               provider: str, case: SpeedCase, pass_name: str) -> float | None:
    """A time for (provider, case, pass) scaled by N^2 from the largest smaller N measured
    with the same provider, D, causality and pass; None if there is none."""
    seen = history.get((provider, case.d, case.causal, pass_name))
    if seen is None:
        return None
    n, ms = seen
    return ms * (case.n / n) ** 2


def speed_ratio(sage_ms: float | None, other_ms: float | None) -> float | None:
    """t_other / t_sage: above 1 means sage is faster (None if either is missing)."""
    if not sage_ms or not other_ms:
        return None
    return other_ms / sage_ms


# --------------------------------------------------------------------------- GPU side

class Timer:
    """Median CUDA-event time of a callable, with an L2 flush before each repetition."""

    def __init__(self, rep_ms: float, min_reps: int, max_reps: int) -> None:
        self.rep_ms, self.min_reps, self.max_reps = rep_ms, min_reps, max_reps
        self.flush = torch.empty(256 * 1024 * 1024, dtype=torch.int8, device="cuda")

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


def _rel_l2(x: Any, ref: Any) -> float:
    x, ref = x.detach().float(), ref.detach().float()
    return float((x - ref).norm() / ref.norm())


def sanity(q: Any, k: Any, v: Any, do: Any, case: SpeedCase,
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
            results[name] = _rel_l2(x, r)
        break
    return results


def run_case(case: SpeedCase, options: argparse.Namespace, timer: Timer, budget: common.Budget,
             history: dict[tuple[str, int, bool, str], tuple[int, float]],
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


def derive_backward(entry: dict[str, Any], case: SpeedCase) -> None:
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
    """The speed table: ms and TFLOP/s per provider, and sage's speed ratios."""
    headers = ["case", "pass"]
    headers += [f"{PROVIDER_LABELS[p]} ms" for p in providers]
    headers += [f"{PROVIDER_LABELS[p]} TFLOP/s" for p in providers]
    others = [p for p in providers if p != "sage"]
    if "sage" in providers:
        headers += [f"sage/{PROVIDER_LABELS[p]}" for p in others]
    table = []
    for row in rows:
        case = SpeedCase(row["n"], row["d"], row["causal"], row["batch"], row["heads"])
        for pass_name in passes:
            results = {p: row["providers"].get(p, {}).get(pass_name) for p in providers}
            ms = {p: (r or {}).get("ms") for p, r in results.items()}
            cells: list[Any] = [case.name, PASS_LABELS[pass_name]]
            cells += [cell_ms(results[p]) for p in providers]
            cells += [None if ms[p] is None else f"{tflops(case, pass_name, ms[p]):.1f}"
                      for p in providers]
            if "sage" in providers:
                cells += [None if speed_ratio(ms["sage"], ms[p]) is None
                          else f"{speed_ratio(ms['sage'], ms[p]):.2f}x" for p in others]
            table.append(cells)
    lines = [common.markdown_table(headers, table, right=[False, False]
                                   + [True] * (len(headers) - 2)), "",
             "Ratios are speed ratios (t_other / t_sage; above 1: sage faster). `*`: backward "
             "derived as fwd+bwd - fwd. FLOPs: fwd 4·B·H·N²·D (halved when causal), bwd 2.5x, "
             "fwd+bwd 3.5x."]
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
    if problems:
        lines += ["", "Notes:", "", *problems]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", type=Path, help="where the JSON results go")
    parser.add_argument("markdown", type=Path, help="where the markdown table goes")
    parser.add_argument("--quick", action="store_true", help="D=128, N in {1K, 4K}")
    parser.add_argument("--cases", type=common.split_patterns, default=None,
                        help="comma-separated substrings/globs of case names, e.g. "
                             "'d128-n4096,*-causal'")
    parser.add_argument("--passes", type=common.split_patterns, default=list(PASSES),
                        help="comma-separated subset of fwd,bwd,fwdbwd")
    parser.add_argument("--providers", type=common.split_patterns, default=list(PROVIDERS),
                        help="comma-separated subset of sage,cudnn,flash")
    parser.add_argument("--budget-s", type=float, default=330.0,
                        help="wall-clock budget; measurements projected past it are skipped")
    parser.add_argument("--max-call-s", type=float, default=5.0,
                        help="skip a measurement whose single call is projected longer")
    parser.add_argument("--rep-ms", type=float, default=150.0,
                        help="target time of the repetitions of one measurement")
    parser.add_argument("--min-reps", type=int, default=3)
    parser.add_argument("--max-reps", type=int, default=100)
    parser.add_argument("--no-check", dest="check", action="store_false",
                        help="skip the sage-vs-SDPA sanity check of each case")
    options = parser.parse_args(argv)
    for name, values, allowed in (("--passes", options.passes, PASSES),
                                  ("--providers", options.providers, PROVIDERS)):
        bad = [x for x in values if x not in allowed]
        if bad:
            parser.error(f"{name}: unknown {bad}; expected a subset of {','.join(allowed)}")

    def log(text: str) -> None:
        print(text, flush=True)

    budget = common.Budget(options.budget_s)
    results: dict[str, Any] = {"argv": list(argv or sys.argv[1:]), "quick": options.quick,
                               "flop_convention": "fwd 4BHN^2D (causal /2), bwd 2.5x, "
                                                  "fwdbwd 3.5x", "rows": []}
    try:
        if torch is None or not torch.cuda.is_available():
            raise RuntimeError("needs torch and a CUDA device")
        timer = Timer(options.rep_ms, options.min_reps, options.max_reps)
        history: dict[tuple[str, int, bool, str], tuple[int, float]] = {}
        for case in speed_cases(options.quick):
            if not common.matches(case.name, options.cases):
                continue
            log(case.name)
            try:
                results["rows"].append(run_case(case, options, timer, budget, history, log))
            except Exception as exc:  # noqa: BLE001 - e.g. out of memory allocating inputs
                results["rows"].append({"case": case.name, **asdict(case), "providers": {},
                                        "error": common.error_text(exc)})
                log(f"  {case.name}: {results['rows'][-1]['error']}")
                torch.cuda.empty_cache()
    except Exception as exc:  # noqa: BLE001 - still write what there is
        results["error"] = common.error_text(exc, 2000)
    results["environment"] = common.environment()
    results["elapsed_s"] = budget.elapsed()
    env = results["environment"]
    header = (f"## Attention speed, bf16, B=4 H=32 ({env['date_utc']}, "
              f"{env.get('device', '-')}, torch {env.get('torch', '-')}, cuDNN "
              f"{env.get('cudnn', '-')}, commit {env['commit']}, {results['elapsed_s']:.0f} s)\n\n"
              f"Command: `python3 bench/attention_speed.py {' '.join(results['argv'])}`")
    body = render(results["rows"], options.providers, options.passes)
    if "error" in results:
        body = f"**Run failed:** {results['error']}\n\n" + body
    markdown = header + "\n\n" + body
    common.write_outputs(options.json, options.markdown, results, markdown)
    print("\n" + markdown)
    return 1 if "error" in results else 0


if __name__ == "__main__":
    sys.exit(main())
