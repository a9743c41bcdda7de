"""GEMM speed (issue #11): the sage INT8 and bf16 GEMMs vs torch and Triton, C = A·Bᵀ.

    python3 bench/gemm_speed.py OUT.json OUT.md [--quick] [--cases m4096,m8192]
        [--providers sage-int8,torch-int8,...] [--sage-tiles [int8=|bf16=]128x128x128:4:8[:ws][:p][:ts][:dm]]
        [--triton-tiles 128x256x128:3:8] [--rounds 3] [--budget-s 200] [--no-check]

A is M x K and B is N x K (both K-major, contiguous), at M = N = K = 4096 and
8192 and the skinny M = 16384, N = 1024, K = 4096, in one process, on the
same inputs for every provider:

* ``sage-int8``: ``sage.kernels.gemm.ops.int8_mm(a, b)``, exact int32;
* ``sage-int8-f32``: the same with per-row scales of A and B, dequantized f32;
* ``torch-int8``: ``torch._int_mm(a, b.t())`` (cuBLASLt), int32;
* ``triton-int8``: the Triton INT8 GEMM of this file (int32, grouped-M program
  order; 128x256x128 tiles, 8 warps, 3 stages unless ``--triton-tiles``);
* ``sage-bf16``: ``half_mm(a, b)`` on bf16, bf16 out, f32 accumulation;
* ``torch-bf16``: ``a @ b.t()`` (cuBLAS).

Before timing, every output is checked (``--no-check`` skips it, and the
report says so): INT8 int32 outputs must equal ``torch._int_mm``'s exactly,
the f32 one ``_int_mm`` · scales within rel-L2 1e-6, the bf16 ones the
float64 product of the same inputs within rel-L2 1e-2 (the bf16 rounding of
C alone is ~2e-3). Each provider is timed in ``--rounds`` rounds (every
provider once a round, the order reversed every other round, so clock drift
does not favour one) with the Timer of bench/timing.py (CUDA events, L2
flush, median); its time is the median of its rounds' medians.

Reported: TOP/s = 2·M·N·K / t per provider and shape, and the speed ratios
t_other / t_sage (above 1: sage faster) with issue #11's bars: sage-int8 ≥
1.1x torch._int_mm and ≥ 1.0x Triton at both square sizes, sage-bf16 ≥
0.95x cuBLAS at every shape. ``--sage-tiles`` (repeatable) adds the sage
providers at other tile plans (``BMxBNxBK:STAGES:WARPS``, ``:ws`` for a
warp-specialised loop: a TMA producer warpgroup beside WARPS consumer warps,
``:p`` for one persistent program per SM walking the tiles, ``:ts`` for C
stored by the copy engine, ``:dm`` for tensor maps built by every program
(SAGE_TENSOR_MAPS=device) instead of encoded at launch;
``bf16=`` for the bf16 GEMM, else INT8), timed and compared like the
defaults; only the default plans count for the bars.
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
import zlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402  (bench/common.py)
import timing  # noqa: E402  (bench/timing.py)
from common import Variant  # noqa: E402  (a provider at a tile plan)
from timing import torch  # noqa: E402  (None without torch: the CPU tests import the rest)

common.add_python_path()

PROVIDERS = ("sage-int8", "sage-int8-f32", "torch-int8", "triton-int8", "sage-bf16",
             "torch-bf16")
#: The operands' type of each provider.
KIND = {"sage-int8": "int8", "sage-int8-f32": "int8", "torch-int8": "int8",
        "triton-int8": "int8", "sage-bf16": "bf16", "torch-bf16": "bf16"}
#: Which providers each sage provider is compared against.
COMPARE = {"sage-int8": ("torch-int8", "triton-int8"),
           "sage-int8-f32": ("torch-int8", "triton-int8"),
           "sage-bf16": ("torch-bf16",)}
#: The issue's tile plan for the Triton kernel, and the program grouping along M
#: (every kernel's: sage's default plans use it too).
TRITON_TILES = "128x256x128:3:8"
GROUP_M = 8
F32_TOL = 1e-6
BF16_TOL = 1e-2
TILES_RE = re.compile(r"(\d+)x(\d+)x(\d+):(\d+):(\d+)(:ws)?(:p)?(:ts)?")
TILE_FIELDS = ("block_m", "block_n", "block_k", "stages", "num_warps")


@dataclass(frozen=True)
class GemmCase:
    """One shape of C (M x N) = A (M x K) · B (N x K)ᵀ."""

    m: int
    n: int
    k: int

    @property
    def name(self) -> str:
        """E.g. ``m4096-n4096-k4096`` (what ``--cases`` matches)."""
        return f"m{self.m}-n{self.n}-k{self.k}"

    @property
    def square(self) -> bool:
        """Whether M = N = K (the shapes the INT8 bars apply to)."""
        return self.m == self.n == self.k

    @property
    def ops(self) -> float:
        """2·M·N·K: one multiply and one add per term."""
        return 2.0 * self.m * self.n * self.k


@dataclass(frozen=True)
class Bar:
    """A done-when bar of issue #11: t_other / t_sage ≥ ``at_least``."""

    sage: str
    other: str
    at_least: float
    square_only: bool

    def applies(self, case: GemmCase) -> bool:
        """Whether the bar is judged at ``case``."""
        return case.square or not self.square_only


BARS = (Bar("sage-int8", "torch-int8", 1.1, True), Bar("sage-int8", "triton-int8", 1.0, True),
        Bar("sage-bf16", "torch-bf16", 0.95, False))


def gemm_cases(quick: bool = False) -> list[GemmCase]:
    """The issue's shapes (``quick``: the 4096 cube only)."""
    cases = [GemmCase(4096, 4096, 4096), GemmCase(16384, 1024, 4096),
             GemmCase(8192, 8192, 8192)]
    return cases[:1] if quick else cases


def parse_tiles(spec: str) -> dict[str, int]:
    """``"128x256x128:3:8"`` -> the fields of ``GemmTiles`` (block_m, block_n, block_k,
    stages, num_warps, warp_specialize: a ``:ws`` suffix, persistent: ``:p``,
    tma_store: ``:ts``)."""
    match = TILES_RE.fullmatch(spec.strip())
    if match is None:
        raise ValueError(f"tile plan {spec!r} is not BMxBNxBK:STAGES:WARPS[:ws][:p][:ts]")
    *numbers, ws, persistent, tma_store = match.groups()
    return {**dict(zip(TILE_FIELDS, map(int, numbers))), "warp_specialize": ws is not None,
            "persistent": persistent is not None, "tma_store": tma_store is not None}


def tiles_spec(tiles: dict[str, int]) -> str:
    """The inverse of :func:`parse_tiles`."""
    spec = "{block_m}x{block_n}x{block_k}:{stages}:{num_warps}".format(**tiles)
    return (spec + (":ws" if tiles.get("warp_specialize") else "")
            + (":p" if tiles.get("persistent") else "")
            + (":ts" if tiles.get("tma_store") else ""))


def sage_tiles_arg(text: str) -> tuple[str, str]:
    """A ``--sage-tiles`` value, ``[int8=|bf16=]BMxBNxBK:STAGES:WARPS[:ws][:p][:ts][:dm]``
    -> (kind, plan)."""
    kind, _, spec = text.rpartition("=")
    kind = kind or "int8"
    if kind not in ("int8", "bf16"):
        raise argparse.ArgumentTypeError(f"{text!r}: the prefix is int8= or bf16=")
    plan, device_maps = common.split_device_maps(spec)
    try:
        return kind, tiles_spec(parse_tiles(plan)) + (common.DEVICE_MAPS if device_maps else "")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def triton_tiles_arg(text: str) -> str:
    """A ``--triton-tiles`` value, normalised (no ``:ws``: the Triton kernel's
    schedule is Triton's)."""
    try:
        tiles = parse_tiles(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    if tiles["warp_specialize"] or tiles["persistent"] or tiles["tma_store"]:
        raise argparse.ArgumentTypeError(f"{text!r}: :ws, :p and :ts are for the sage kernels")
    return tiles_spec(tiles)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line (see the module's docstring)."""
    parser = common.BenchmarkParser(
        __doc__.splitlines()[0], markdown_help="where the markdown tables go",
        quick_help="the 4096 cube only", cases_example="m4096-n4096,m8192",
        subsets={"--providers": PROVIDERS})
    parser.add_argument("--sage-tiles", type=sage_tiles_arg, action="append", default=[],
                        metavar="[int8=|bf16=]BMxBNxBK:STAGES:WARPS[:ws][:p][:ts][:dm]",
                        help="also time the sage providers of that kind at this plan "
                             "(repeatable; no prefix: INT8)")
    parser.add_argument("--triton-tiles", type=triton_tiles_arg, default=TRITON_TILES,
                        metavar="BMxBNxBK:STAGES:WARPS", help="the Triton kernel's plan")
    parser.add_argument("--group-m", type=int, default=GROUP_M,
                        help="tile rows per program group (the Triton and sage kernels)")
    return timing.parse_rounds_args(parser, argv,
                                    check_help="skip the correctness check of every output",
                                    budget_s=200.0, rep_ms=100.0, min_reps=10, max_reps=300)


def variants(providers: Sequence[str], overrides: Sequence[tuple[str, str]]) -> list[Variant]:
    """Every provider at its default plan, then the sage providers of each override's kind
    at that plan (a plan given twice is timed once)."""
    out = [Variant(p) for p in providers]
    for kind, plan in overrides:
        out += [Variant(p, plan) for p in providers
                if p in COMPARE and KIND[p] == kind and Variant(p, plan) not in out]
    return out


def tiles_used(variant: Variant, defaults: dict[str, str]) -> str | None:
    """The plan a variant runs at: its own, the default of its provider (``defaults``:
    the provider's name -> plan) or None (the library picks: cuBLAS)."""
    return variant.tiles or defaults.get(variant.provider)


def summarize(rounds: Sequence[dict[str, Any]], case: GemmCase) -> dict[str, Any]:
    """One provider's time from its rounds' Timer results (the median of their medians:
    :func:`timing.median_of_rounds`) and its TOP/s."""
    summary = timing.median_of_rounds(rounds)
    return {**summary, "tops": tops(case, summary["ms"])}


def tops(case: GemmCase, ms: float | None) -> float | None:
    """2·M·N·K / t in TOP/s (TFLOP/s for bf16); None if not measured."""
    return case.ops / (ms * 1e-3) / 1e12 if ms else None


def comparisons(row: dict[str, Any], variants_run: Sequence[Variant]) -> list[dict[str, Any]]:
    """The speed ratios of one case's sage variants against their comparators, each
    with its bar and verdict where the issue sets one."""
    case = GemmCase(row["m"], row["n"], row["k"])
    entries = row["providers"]
    out = []
    for variant in variants_run:
        for other in COMPARE.get(variant.provider, ()):
            if variant.name not in entries or other not in entries:
                continue
            mine, theirs = entries[variant.name], entries[other]
            ratio = timing.speed_ratio(mine.get("ms"), theirs.get("ms"))
            item: dict[str, Any] = {"case": row["case"], "sage": variant.name, "other": other,
                                    "ratio": ratio, "headline": variant.tiles is None}
            bar = next((b for b in BARS if (b.sage, b.other) == (variant.provider, other)
                        and b.applies(case)), None)
            if bar is not None:
                correct = all((e.get("check") or {}).get("ok", True) for e in (mine, theirs))
                item.update(at_least=bar.at_least,
                            verdict=timing.verdict(ratio, bar.at_least, correct))
            out.append(item)
    return out


# --------------------------------------------------------------------------- GPU side

class ProviderMissing(Exception):
    """A provider that cannot run on this machine (recorded as skipped)."""


@functools.cache
def triton_int8_kernel() -> Any:
    """The Triton INT8 GEMM, C (int32) = A·Bᵀ: one (BLOCK_M x BLOCK_N) tile a program,
    programs ordered in groups of GROUP_M tile rows (a group's B tiles stay in L2).
    Built on first use: triton is imported here."""
    try:
        import triton  # noqa: PLC0415
        import triton.language as tl  # noqa: PLC0415
    except ImportError as exc:
        raise ProviderMissing(f"triton is not importable ({exc})") from exc

    @triton.jit
    def int8_gemm_abt(a, b, c, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr):
        pid = tl.program_id(0)
        tiles_m = tl.cdiv(M, BLOCK_M)
        tiles_n = tl.cdiv(N, BLOCK_N)
        group = GROUP_M * tiles_n
        first_m = (pid // group) * GROUP_M
        group_m = min(tiles_m - first_m, GROUP_M)
        pid_m = first_m + (pid % group) % group_m
        pid_n = (pid % group) // group_m
        # Rows past M or N wrap (their results are not stored): no load masks.
        rows = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
        cols = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
        rows = tl.max_contiguous(tl.multiple_of(rows, BLOCK_M), BLOCK_M)
        cols = tl.max_contiguous(tl.multiple_of(cols, BLOCK_N), BLOCK_N)
        ks = tl.arange(0, BLOCK_K)
        a_ptrs = a + rows[:, None] * K + ks[None, :]
        b_ptrs = b + cols[:, None] * K + ks[None, :]
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
        for k0 in range(0, K, BLOCK_K):
            if EVEN_K:
                at = tl.load(a_ptrs)
                bt = tl.load(b_ptrs)
            else:
                at = tl.load(a_ptrs, mask=ks[None, :] < K - k0, other=0)
                bt = tl.load(b_ptrs, mask=ks[None, :] < K - k0, other=0)
            acc = tl.dot(at, tl.trans(bt), acc, out_dtype=tl.int32)
            a_ptrs += BLOCK_K
            b_ptrs += BLOCK_K
        out_rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        out_cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        mask = (out_rows[:, None] < M) & (out_cols[None, :] < N)
        tl.store(c + out_rows[:, None] * N + out_cols[None, :], acc, mask=mask)

    return int8_gemm_abt


def triton_int8_mm(a: Any, b: Any, plan: str, group_m: int = GROUP_M) -> Any:
    """``a @ b.T`` (int32) of int8 ``a`` (M x K) and ``b`` (N x K) by the Triton kernel."""
    tiles = parse_tiles(plan)
    kernel = triton_int8_kernel()
    m, k = a.shape
    n = b.shape[0]
    c = torch.empty((m, n), dtype=torch.int32, device=a.device)
    bm, bn, bk = tiles["block_m"], tiles["block_n"], tiles["block_k"]
    grid = (-(-m // bm) * -(-n // bn),)
    kernel[grid](a, b, c, m, n, k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group_m,
                 EVEN_K=k % bk == 0, num_warps=tiles["num_warps"],
                 num_stages=tiles["stages"])
    return c


def default_tiles(triton_plan: str) -> dict[str, str]:
    """Each provider's default plan: the sage library's INT8_TILES / HALF_TILES, and
    ``triton_plan`` for Triton."""
    from sage.kernels.gemm.ops import HALF_TILES, INT8_TILES  # noqa: PLC0415
    int8, half = tiles_spec(INT8_TILES.as_dict()), tiles_spec(HALF_TILES.as_dict())
    return {"sage-int8": int8, "sage-int8-f32": int8, "sage-bf16": half,
            "triton-int8": triton_plan}


def make_inputs(case: GemmCase, kinds: set[str]) -> dict[str, Any]:
    """Random operands of the kinds needed: int8 a, b (uniform over [-128, 127]) and
    f32 per-row scales; bf16 x, y (standard normal)."""
    torch.manual_seed(zlib.crc32(case.name.encode()))
    inputs: dict[str, Any] = {}
    if "int8" in kinds:
        for name, rows in (("a", case.m), ("b", case.n)):
            inputs[name] = torch.randint(-128, 128, (rows, case.k), dtype=torch.int8,
                                         device="cuda")
            inputs[f"{name}_scale"] = torch.rand(rows, device="cuda") * 1e-2 + 1e-3
    if "bf16" in kinds:
        for name, rows in (("x", case.m), ("y", case.n)):
            inputs[name] = torch.randn(rows, case.k, dtype=torch.bfloat16, device="cuda")
    return inputs


def provider_fn(variant: Variant, plan: str | None, inputs: dict[str, Any],
                group_m: int) -> Callable[[], Any]:
    """The callable that one timed repetition runs; it returns C."""
    provider = variant.provider
    if provider == "torch-int8":
        a, bt = inputs["a"], inputs["b"].t()
        return lambda: torch._int_mm(a, bt)
    if provider == "torch-bf16":
        x, yt = inputs["x"], inputs["y"].t()
        return lambda: x @ yt
    if provider == "triton-int8":
        triton_int8_kernel()  # ProviderMissing without triton
        return lambda: triton_int8_mm(inputs["a"], inputs["b"], plan, group_m)
    from sage.kernels.gemm.ops import GemmTiles, half_mm, int8_mm  # noqa: PLC0415
    plan, device_maps = common.split_device_maps(plan)
    tiles = GemmTiles(**parse_tiles(plan), group_m=group_m)
    if provider == "sage-int8":
        fn = lambda: int8_mm(inputs["a"], inputs["b"], tiles=tiles)  # noqa: E731
    elif provider == "sage-int8-f32":
        fn = lambda: int8_mm(inputs["a"], inputs["b"], inputs["a_scale"],  # noqa: E731
                             inputs["b_scale"], tiles=tiles)
    elif provider == "sage-bf16":
        fn = lambda: half_mm(inputs["x"], inputs["y"], tiles=tiles)  # noqa: E731
    else:
        raise ValueError(f"unknown provider {provider!r}")
    return common.with_tensor_maps(fn, device_maps)


def check_output(provider: str, out: Any, inputs: dict[str, Any],
                 refs: dict[str, Any]) -> dict[str, Any]:
    """``out`` against the reference of its kind (computed once into ``refs``): int32
    exactly equal to torch._int_mm's, f32 and bf16 within a rel-L2 tolerance."""
    if provider == "torch-int8":
        return {"ok": True, "reference": True}
    if KIND[provider] == "int8" and "int32" not in refs:
        refs["int32"] = torch._int_mm(inputs["a"], inputs["b"].t())
    if provider == "sage-int8-f32":
        if "f32" not in refs:
            refs["f32"] = (refs["int32"].double() * inputs["a_scale"].double()[:, None]
                           * inputs["b_scale"].double()[None, :])
        rel = timing.rel_l2(out, refs["f32"])
        return {"ok": rel <= F32_TOL, "rel_l2": rel, "tol": F32_TOL}
    if KIND[provider] == "bf16":
        if "bf16" not in refs:
            refs["bf16"] = inputs["x"].double() @ inputs["y"].double().t()
        rel = timing.rel_l2(out, refs["bf16"])
        return {"ok": rel <= BF16_TOL, "rel_l2": rel, "tol": BF16_TOL}
    ref = refs["int32"]
    if out.dtype != ref.dtype or out.shape != ref.shape:
        return {"ok": False, "mismatch": f"{out.dtype} {tuple(out.shape)}"}
    differ = int((out != ref).sum())
    max_diff = int((out.long() - ref.long()).abs().max()) if differ else 0
    return {"ok": differ == 0, "mismatches": differ, "max_abs_diff": max_diff}


def run_case(case: GemmCase, variants_run: Sequence[Variant], defaults: dict[str, str],
             options: argparse.Namespace, timer: timing.Timer, budget: common.Budget,
             history: dict[str, tuple[float, float]],
             log: Callable[[str], None]) -> dict[str, Any]:
    """Every variant at one shape: check, then ``--rounds`` rounds of timings."""
    row: dict[str, Any] = {"case": case.name, **asdict(case), "providers": {}}
    inputs = make_inputs(case, {KIND[v.provider] for v in variants_run})
    refs: dict[str, Any] = {}
    fns: dict[str, Callable[[], Any]] = {}
    for variant in variants_run:
        entry = row["providers"][variant.name] = {
            "provider": variant.provider, "tiles": tiles_used(variant, defaults)}
        try:
            fn = provider_fn(variant, entry["tiles"], inputs, options.group_m)
            if options.check:
                entry["check"] = check_output(variant.provider, fn(), inputs, refs)
            fns[variant.name] = fn
        except ProviderMissing as exc:
            entry["skipped"] = str(exc)
        except Exception as exc:  # noqa: BLE001 - recorded, the run goes on
            entry["error"] = common.error_text(exc)
            torch.cuda.empty_cache()
        log(f"  {case.name} {variant.name}: " + (entry.get("skipped") or entry.get("error")
                                                 or f"check {entry.get('check')}"))
    del refs
    timing.time_in_rounds(case.name, case.ops, fns, row["providers"], options, timer, budget,
                          history, functools.partial(summarize, case=case), ("tops", "TOP/s"),
                          log)
    del inputs, fns
    torch.cuda.empty_cache()
    return row


# --------------------------------------------------------------------------- report

def render(rows: Sequence[dict[str, Any]], ratios: Sequence[dict[str, Any]],
           bars: dict[str, Any], checked: bool) -> str:
    """The speed table, the ratio table with the bars' verdicts, and the notes
    (:func:`timing.render_rounds_report`)."""
    return timing.render_rounds_report(
        rows, ratios, bars, checked, tiles_header="tiles (BMxBNxBK:stages:warps)",
        rate=("tops", "TOP/s"), bars_title="Issue #11 bars",
        legend="TOP/s = 2·M·N·K / t (TFLOP/s for bf16). Speed ratio = t_other / t_sage "
               "(above 1: sage faster). Bars (default plans only): sage-int8 >= 1.1x "
               "torch-int8 and >= 1.0x triton-int8 at the square shapes, sage-bf16 >= 0.95x "
               "torch-bf16 at every shape. Checks: int32 equal to torch._int_mm, f32 rel-L2 "
               f"<= {F32_TOL:g} vs _int_mm · scales, bf16 rel-L2 <= {BF16_TOL:g} vs float64.")


def header(results: dict[str, Any]) -> str:
    """The report's title line (date, device, versions, commit, time) and command."""
    return common.report_header(
        results, "GEMM speed, C = A·Bᵀ", "gemm_speed.py", versions=("torch", "cudnn", "triton"),
        command_note=f"(median of {results['rounds']} rounds; program groups of "
                     f"{results['group_m']} tile rows)")


def main(argv: Sequence[str] | None = None) -> int:
    """Checks and times the selected shapes, writes the JSON and the markdown; 1 if the
    run failed."""
    options = parse_args(argv)
    budget = common.Budget(options.budget_s)
    variants_run = variants(options.providers, options.sage_tiles)
    results: dict[str, Any] = {"argv": list(argv or sys.argv[1:]), "quick": options.quick,
                               "checked": options.check, "rounds": options.rounds,
                               "group_m": options.group_m, "rows": []}

    def start(timer: timing.Timer) -> Callable[[GemmCase], dict[str, Any]]:
        """The runner of one case, at the default plans (recorded in ``results``)."""
        defaults = results["tiles"] = default_tiles(options.triton_tiles)
        history: dict[str, tuple[float, float]] = {}
        return lambda case: run_case(case, variants_run, defaults, options, timer, budget,
                                     history, common.log)

    timing.run_cases(results, gemm_cases(options.quick), options, start)
    results["ratios"] = [r for row in results["rows"] for r in comparisons(row, variants_run)]
    results["bars"] = timing.bars_summary(results["ratios"])
    body = render(results["rows"], results["ratios"], results["bars"], options.check)
    return common.write_report(results, options.json, options.markdown, budget, header, body)


if __name__ == "__main__":
    sys.exit(main())
