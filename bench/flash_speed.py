"""FlashAttention speed (issue #11): the sage bf16 forward vs cuDNN and flash SDPA.

    python3 bench/flash_speed.py OUT.json OUT.md [--quick] [--cases d128-n8192]
        [--providers sage,cudnn,flash] [--sage-tiles 128x64:2:8:v] [--rounds 3]
        [--budget-s 300] [--no-check]

The forward of attention, O = softmax(Q Kᵀ / sqrt(D)) V, bf16, q, k, v
(B, H, N, D) contiguous, B = 4, H = 32, in one process, on the same inputs
for every provider: the issue's B4 H32 N8K D128, causal and not (its bar),
and D = 64 and N = 4K as extra rows:

* ``sage``: ``sage.kernels.flash.ops.flash_attention(q, k, v, causal)`` at its
  default plan;
* ``cudnn``, ``flash``: ``scaled_dot_product_attention(q, k, v, is_causal=causal)``
  under ``sdpa_kernel(SDPBackend.CUDNN_ATTENTION)`` / ``(FLASH_ATTENTION)``.

Inputs need no gradient: every provider runs its inference forward (O only,
no LSE). Causal masks are aligned top-left (N = Nkv here, so every
convention agrees).

Before timing, every output is checked against float64 attention computed on
the GPU (``--no-check`` skips it, and the report says so): relative L2 at most
1e-2 (the bf16 rounding of O alone is ~3e-3). Each provider is timed in
``--rounds`` rounds (every provider once a round, the order reversed every
other round) with the Timer of bench/timing.py (CUDA events, L2 flush,
median); its time is the median of its rounds' medians.

Reported: TFLOP/s = 4·B·H·N²·D / t (halved when causal) per provider and
case, and the speed ratios t_other / t_sage (above 1: sage faster) against
cuDNN and flash; issue #11's bar is sage >= 0.95x cuDNN at B4 H32 N8K D128,
causal and not (the default plan only). ``--sage-tiles`` (repeatable) times
sage at other plans as well (``BMxBN:STAGES:WARPS`` with ``:rN`` (at most N
registers), ``:ws`` (a producer warpgroup), ``:pp`` (ping-pong), ``:ps``
(persistent), ``:ts`` (O stored by the copy engine) and ``:dm`` (tensor
maps built by every program,
SAGE_TENSOR_MAPS=device, instead of encoded at launch)); without it, the
default blocks with ping-pong and persistent are timed besides,
``--sage-tiles none`` times none.
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
from common import AttentionCase, Variant  # noqa: E402  (a shape; a provider at a plan)
from timing import torch  # noqa: E402  (None without torch: the CPU tests import the rest)

common.add_python_path()

PROVIDERS = ("sage", "cudnn", "flash")
#: The SDPA backend of each torch provider (``torch.nn.attention.SDPBackend``).
BACKENDS = {"cudnn": "CUDNN_ATTENTION", "flash": "FLASH_ATTENTION"}
#: The providers each sage variant is compared against.
COMPARE = ("cudnn", "flash")
#: Issue #11: the sage forward at >= 0.95x cuDNN's speed at the headline shape.
BAR_OTHER, BAR_AT_LEAST = "cudnn", 0.95
#: Relative L2 of O against float64 attention that passes the check.
CHECK_TOL = 1e-2
#: Plans timed besides the default when --sage-tiles is not given: the default
#: blocks with ping-pong and persistent.
EXTRA_TILES = ("128x128:2:8:ws:pp", "128x128:2:8:ws:ps")
TILES_RE = re.compile(r"(\d+)x(\d+):(\d+):(\d+)(?::r(\d+))?(:ws)?(:pp)?(:ps)?(:ts)?")
#: Heads of the float64 reference computed at once (their logits: 4 x N² doubles).
REF_HEADS = 4


@dataclass(frozen=True)
class FlashCase(AttentionCase):
    """One shape (bench/common.py), with its forward's flops and whether the
    issue's bar is judged at it."""

    @property
    def flops(self) -> float:
        """FlashAttention's count: 4·B·H·N²·D (two matmuls), halved when causal."""
        flops = 4.0 * self.batch * self.heads * self.n * self.n * self.d
        return flops / 2 if self.causal else flops

    @property
    def headline(self) -> bool:
        """Whether issue #11's bar is judged here (B4 H32 N8K D128)."""
        return (self.batch, self.heads, self.n, self.d) == (4, 32, 8192, 128)


def flash_cases(quick: bool = False) -> list[FlashCase]:
    """The headline shape first, then D = 64 and N = 4K (``quick``: N = 4K, D = 128 only)."""
    if quick:
        return [FlashCase(4096, 128, False), FlashCase(4096, 128, True)]
    return [FlashCase(n, d, causal) for n, d in ((8192, 128), (8192, 64), (4096, 128),
                                                 (4096, 64)) for causal in (False, True)]


def parse_tiles(spec: str) -> dict[str, Any]:
    """``"128x64:2:8:r200"`` -> the fields of ``FlashTiles`` (block_m, block_n, stages,
    num_warps, maxnreg (``:rN``), warp_specialize (``:ws``), ping_pong (``:pp``),
    persistent (``:ps``), tma_store (``:ts``))."""
    match = TILES_RE.fullmatch(spec.strip())
    if match is None:
        raise ValueError(f"tile plan {spec!r} is not BMxBN:STAGES:WARPS[:rN][:ws][:pp][:ps][:ts]")
    bm, bn, stages, warps, maxnreg, ws, pp, ps, ts = match.groups()
    return {"block_m": int(bm), "block_n": int(bn), "stages": int(stages),
            "num_warps": int(warps), "maxnreg": None if maxnreg is None else int(maxnreg),
            "warp_specialize": bool(ws), "ping_pong": bool(pp), "persistent": bool(ps),
            "tma_store": bool(ts)}


def tiles_spec(tiles: dict[str, Any]) -> str:
    """The inverse of :func:`parse_tiles`."""
    text = "{block_m}x{block_n}:{stages}:{num_warps}".format(**tiles)
    text += f":r{tiles['maxnreg']}" if tiles.get("maxnreg") is not None else ""
    text += ":ws" if tiles.get("warp_specialize") else ""
    text += ":pp" if tiles.get("ping_pong") else ""
    text += ":ps" if tiles.get("persistent") else ""
    return text + (":ts" if tiles.get("tma_store") else "")


def sage_tiles_arg(text: str) -> str:
    """A ``--sage-tiles`` value, normalised (``none``: no extra plan)."""
    if text.strip() == "none":
        return "none"
    plan, device_maps = common.split_device_maps(text.strip())
    try:
        return tiles_spec(parse_tiles(plan)) + (common.DEVICE_MAPS if device_maps else "")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line (see the module's docstring)."""
    parser = common.BenchmarkParser(
        __doc__.splitlines()[0], markdown_help="where the markdown tables go",
        quick_help="N = 4K, D = 128 only", cases_example="d128-n8192,*-causal",
        subsets={"--providers": PROVIDERS})
    parser.add_argument("--sage-tiles", type=sage_tiles_arg, action="append", default=None,
                        metavar="BMxBN:STAGES:WARPS[:rN][:ws][:pp][:ps][:ts][:dm]",
                        help="also time sage at this plan (repeatable; default "
                             f"{','.join(EXTRA_TILES)}; 'none': no other plan)")
    options = timing.parse_rounds_args(
        parser, argv, check_help="skip the check of every output against float64 attention",
        budget_s=300.0, rep_ms=150.0, min_reps=5, max_reps=100)
    plans = EXTRA_TILES if options.sage_tiles is None else options.sage_tiles
    options.sage_tiles = [] if "none" in plans else list(dict.fromkeys(plans))
    return options


def variants(providers: Sequence[str], plans: Sequence[str]) -> list[Variant]:
    """Every provider at its default plan, then sage at each other plan."""
    out = [Variant(p) for p in providers]
    if "sage" in providers:
        out += [Variant("sage", plan) for plan in plans]
    return out


def tflops(case: FlashCase, ms: float | None) -> float | None:
    """Achieved TFLOP/s of a forward that took ``ms`` milliseconds (None if not measured)."""
    return case.flops / (ms * 1e-3) / 1e12 if ms else None


def summarize(rounds: Sequence[dict[str, Any]], case: FlashCase) -> dict[str, Any]:
    """One provider's time from its rounds' Timer results (the median of their medians:
    :func:`timing.median_of_rounds`) and its TFLOP/s."""
    summary = timing.median_of_rounds(rounds)
    return {**summary, "tflops": tflops(case, summary["ms"])}


def comparisons(row: dict[str, Any], variants_run: Sequence[Variant]) -> list[dict[str, Any]]:
    """The speed ratios of one case's sage variants against cuDNN and flash, with the
    bar and its verdict on the headline shape at the default plan."""
    case = FlashCase(row["n"], row["d"], row["causal"], row["batch"], row["heads"])
    entries = row["providers"]
    out = []
    for variant in variants_run:
        if variant.provider != "sage" or variant.name not in entries:
            continue
        for other in COMPARE:
            if other not in entries:
                continue
            mine, theirs = entries[variant.name], entries[other]
            item: dict[str, Any] = {
                "case": row["case"], "sage": variant.name, "other": other,
                "ratio": timing.speed_ratio(mine.get("ms"), theirs.get("ms")),
                "headline": variant.tiles is None}
            if other == BAR_OTHER and case.headline and variant.tiles is None:
                correct = all((e.get("check") or {}).get("ok", True) for e in (mine, theirs))
                item.update(at_least=BAR_AT_LEAST,
                            verdict=timing.verdict(item["ratio"], BAR_AT_LEAST, correct))
            out.append(item)
    return out


# --------------------------------------------------------------------------- GPU side

def make_inputs(case: FlashCase) -> tuple[Any, Any, Any]:
    """q, k, v: standard normal bf16 (B, H, N, D), seeded by the case's name."""
    torch.manual_seed(zlib.crc32(case.name.encode()))
    shape = (case.batch, case.heads, case.n, case.d)
    return tuple(torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(3))


def provider_fn(variant: Variant, case: FlashCase, inputs: tuple[Any, Any, Any]
                ) -> Callable[[], Any]:
    """The callable that one timed repetition runs; it returns O."""
    q, k, v = inputs
    if variant.provider == "sage":
        from sage.kernels.flash.ops import FlashTiles, flash_attention  # noqa: PLC0415
        plan, device_maps = common.split_device_maps(variant.tiles or "")
        tiles = FlashTiles(**parse_tiles(plan)) if plan else None
        return common.with_tensor_maps(
            lambda: flash_attention(q, k, v, causal=case.causal, tiles=tiles), device_maps)
    from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: PLC0415
    from torch.nn.functional import scaled_dot_product_attention as sdpa  # noqa: PLC0415
    backend = getattr(SDPBackend, BACKENDS[variant.provider])

    def run() -> Any:
        with sdpa_kernel(backend):
            return sdpa(q, k, v, is_causal=case.causal)
    return run


def reference(inputs: tuple[Any, Any, Any], causal: bool) -> Any:
    """float64 attention on the GPU, :data:`REF_HEADS` (batch, head) slices at a time."""
    q, k, v = (x.flatten(0, 1) for x in inputs)
    n = q.shape[1]
    out = torch.empty(q.shape, dtype=torch.float64, device=q.device)
    hidden = (torch.ones(n, n, dtype=torch.bool, device=q.device).tril().logical_not()
              if causal else None)
    for start in range(0, q.shape[0], REF_HEADS):
        part = slice(start, start + REF_HEADS)
        s = q[part].double() @ k[part].double().transpose(1, 2) * q.shape[-1] ** -0.5
        if hidden is not None:
            s.masked_fill_(hidden, float("-inf"))
        out[part] = torch.softmax(s, dim=-1) @ v[part].double()
        del s
    return out.view(inputs[0].shape)


def run_case(case: FlashCase, variants_run: Sequence[Variant], options: argparse.Namespace,
             timer: timing.Timer, budget: common.Budget,
             history: dict[str, tuple[float, float]], log: Callable[[str], None]
             ) -> dict[str, Any]:
    """Every variant at one shape: check, then ``--rounds`` rounds of timings."""
    from sage.kernels.flash.ops import default_tiles  # noqa: PLC0415
    row: dict[str, Any] = {"case": case.name, **asdict(case), "providers": {}}
    inputs = make_inputs(case)
    ref = reference(inputs, case.causal) if options.check else None
    fns: dict[str, Callable[[], Any]] = {}
    default = tiles_spec(default_tiles(case.d).as_dict())
    for variant in variants_run:
        entry = row["providers"][variant.name] = {
            "provider": variant.provider,
            "tiles": variant.tiles or (default if variant.provider == "sage" else None)}
        try:
            fn = provider_fn(variant, case, inputs)
            if ref is not None:
                rel = timing.rel_l2(fn(), ref)
                entry["check"] = {"ok": rel <= CHECK_TOL, "rel_l2": rel, "tol": CHECK_TOL}
            fns[variant.name] = fn
        except Exception as exc:  # noqa: BLE001 - recorded, the run goes on
            entry["error"] = common.error_text(exc)
            torch.cuda.empty_cache()
        log(f"  {case.name} {variant.name}: " + (entry.get("error")
                                                 or f"check {entry.get('check')}"))
    del ref
    timing.time_in_rounds(case.name, case.flops, fns, row["providers"], options, timer, budget,
                          history, functools.partial(summarize, case=case),
                          ("tflops", "TFLOP/s"), log)
    del inputs, fns
    torch.cuda.empty_cache()
    return row


# --------------------------------------------------------------------------- report

def render(rows: Sequence[dict[str, Any]], ratios: Sequence[dict[str, Any]],
           bars: dict[str, Any], checked: bool) -> str:
    """The speed table, the ratio table with the bar's verdicts, and the notes
    (:func:`timing.render_rounds_report`)."""
    return timing.render_rounds_report(
        rows, ratios, bars, checked, tiles_header="tiles (BMxBN:stages:warps)",
        rate=("tflops", "TFLOP/s"), bars_title="Issue #11 bar",
        legend="TFLOP/s = 4·B·H·N²·D / t, halved when causal (bf16, B=4, H=32, inference "
               "forward, O only). Speed ratio = t_other / t_sage (above 1: sage faster). Bar "
               f"(default plan only): sage >= {BAR_AT_LEAST}x cuDNN at B4 H32 N8K D128, "
               "causal and not. Tiles: `:ws` a producer warpgroup issues the copies, `:pp` "
               "the consumer warpgroups take turns (ping-pong), `:ps` one program per SM walks the "
               "tiles (persistent), `:ts` O stored by the copy engine, `:dm` tensor maps built by "
               "every program. Check: rel-L2 of O <= "
               f"{CHECK_TOL:g} vs float64 attention.")


def header(results: dict[str, Any]) -> str:
    """The report's title line (date, device, versions, commit, time) and command."""
    return common.report_header(
        results, "FlashAttention forward speed, bf16, B=4 H=32", "flash_speed.py",
        command_note=f"(median of {results['rounds']} rounds)")


def main(argv: Sequence[str] | None = None) -> int:
    """Checks and times the selected cases, writes the JSON and the markdown; 1 if the
    run failed."""
    options = parse_args(argv)
    budget = common.Budget(options.budget_s)
    variants_run = variants(options.providers, options.sage_tiles)
    results: dict[str, Any] = {"argv": list(argv or sys.argv[1:]), "quick": options.quick,
                               "checked": options.check, "rounds": options.rounds,
                               "flop_convention": "4BHN^2D (causal /2)", "rows": []}

    def start(timer: timing.Timer) -> Callable[[FlashCase], dict[str, Any]]:
        """The runner of one case (the default plans recorded in ``results``)."""
        from sage.kernels.flash.ops import TILES  # noqa: PLC0415
        results["tiles"] = {str(d): tiles_spec(t.as_dict()) for d, t in TILES.items()}
        history: dict[str, tuple[float, float]] = {}
        return lambda case: run_case(case, variants_run, options, timer, budget, history,
                                     common.log)

    timing.run_cases(results, flash_cases(options.quick), options, start)
    results["ratios"] = [r for row in results["rows"] for r in comparisons(row, variants_run)]
    results["bars"] = timing.bars_summary(results["ratios"])
    body = render(results["rows"], results["ratios"], results["bars"], options.check)
    return common.write_report(results, options.json, options.markdown, budget, header, body)


if __name__ == "__main__":
    sys.exit(main())
