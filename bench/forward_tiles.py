"""Forward plan study: the SageBwd forward at other plans vs cuDNN SDPA, bf16.

    python3 bench/forward_tiles.py OUT.json OUT.md [--d 128] [--causal no] [--n 4096]
        [--plans default skewed]

The default forward plan (launch.default_tiles: 64 query rows on one
warpgroup, 128 keys, in dependency order, O by the copy engine) and others
(:data:`PLANS`: two, three or four programs an SM, the loop skewed, 64 or 256
keys (S from a biased accumulator or not), 128 rows on two consumer
warpgroups beside a producer warpgroup, with ping-pong, skewed or not;
``persistent``: the default made persistent). This times the
forward (pre-pass included, as in bench/attention_speed.py) at each plan,
causal and not, in one process, next to cuDNN SDPA on the same inputs,
checks O against SDPA (relative L2) and splits one call's GPU time by kernel
(torch.profiler: the pre-pass kernels against the forward), with the SM
clock each timing ran at (bench/gpu_clocks.py: at D = 128 the H100's power
limit holds it down, so a plan's power counts as well). It is a study
for choosing the forward's plan: the backward, the accuracy report and
``sage.attention`` keep the default tiles.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402  (bench/common.py)
import gpu_clocks  # noqa: E402  (bench/gpu_clocks.py)

common.add_python_path()

import torch  # noqa: E402
import triton.testing  # noqa: E402

from sage.kernels.sagebwd.launch import ForwardTiles, default_tiles  # noqa: E402
from sage.kernels.sagebwd.torch_ops import forward  # noqa: E402

#: Forward plans beside the default (None), by name; a function maps the
#: case's default plan to the plan.
PLANS: dict[str, ForwardTiles | Callable[[ForwardTiles], ForwardTiles] | None] = {
    "default": None,
    "three-programs-an-sm": ForwardTiles(64, 4, maxnreg=168, block_n=128, skewed=False,
                                         tma_store=True),
    "two-programs-an-sm": ForwardTiles(64, 4, block_n=128, skewed=False, tma_store=True),
    "four-programs-an-sm": ForwardTiles(64, 4, maxnreg=128, block_n=64, skewed=False,
                                        tma_store=True),
    "skewed": ForwardTiles(64, 4, block_n=128, tma_store=True),
    "three-programs-skewed": ForwardTiles(64, 4, maxnreg=168, block_n=128,
                                          tma_store=True),
    "three-programs-persistent": ForwardTiles(64, 4, maxnreg=168, block_n=128,
                                              skewed=False, tma_store=True,
                                              persistent=True),
    "64-keys": ForwardTiles(64, 4, skewed=False, tma_store=True),
    "256-keys": ForwardTiles(64, 4, block_n=256, skewed=False, tma_store=True),
    # S from a biased accumulator (fine scales without Q-smoothing).
    "256-keys-biased": ForwardTiles(64, 4, block_n=256, skewed=False, tma_store=True,
                                    biased_scores=True),
    # Two warpgroups a program sharing the key blocks' copies (half the L2
    # reads a query row), no producer.
    "128-rows-256-keys-biased": ForwardTiles(128, 8, block_n=256, skewed=False,
                                             tma_store=True, biased_scores=True),
    "128-rows-64-keys": ForwardTiles(128, 8, maxnreg=128, skewed=False, tma_store=True),
    "producer-128x128": ForwardTiles(128, 8, warp_specialize=True, block_n=128,
                                     skewed=False, tma_store=True),
    "ping-pong-128x128": ForwardTiles(128, 8, warp_specialize=True, ping_pong=True,
                                      block_n=128, skewed=False, tma_store=True),
    "ping-pong-skewed-128x128": ForwardTiles(128, 8, warp_specialize=True,
                                             ping_pong=True, block_n=128, tma_store=True),
    # The head dim's and mask's default plan, its grid made persistent.
    "persistent": lambda default: replace(default, persistent=True)
}


def kernel_ms(fn, calls: int = 5) -> dict[str, float]:
    """GPU time per call of ``fn`` by kernel name (ms), from torch.profiler."""
    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    out: dict[str, float] = {}
    for event in prof.key_averages():
        if event.device_time_total > 0:
            out[event.key] = event.device_time_total / calls / 1e3
    return out


def median_ms(fn, clocks: gpu_clocks.ClockSampler | None,
              rep_ms: int = 100) -> tuple[float, dict | None]:
    """triton's median time of ``fn`` (ms; ``rep_ms`` of repetitions) and the
    SM clock and power while it ran (bench/gpu_clocks.py; None without a
    sampler or samples)."""
    began = time.perf_counter()
    ms = triton.testing.do_bench(fn, rep=rep_ms, return_mode="median")
    # An inactive sampler has no samples: its window is None.
    return ms, None if clocks is None else clocks.window(began, time.perf_counter())


def study(d: int, causal: bool, n: int = 4096, batch: int = 4, heads: int = 32,
          plans: Iterable[str] = tuple(PLANS),
          clocks: gpu_clocks.ClockSampler | None = None) -> list[dict[str, Any]]:
    """Median forward times (ms) of the named plans and of cuDNN at one shape,
    with the clock each ran at where ``clocks`` samples it."""
    gen = torch.Generator(device="cuda").manual_seed(d)
    q, k, v = (torch.randn(batch, heads, n, d, device="cuda", dtype=torch.bfloat16,
                           generator=gen) for _ in range(3))
    flops = 4 * batch * heads * n * n * d / (2 if causal else 1)
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
        ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        cudnn_ms, cudnn_clocks = median_ms(
            lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v,
                                                                     is_causal=causal),
            clocks)
    rows = []
    for name in plans:
        plan = PLANS[name]
        default = default_tiles(d, causal=causal, n_kv=n)
        if callable(plan):
            plan = plan(default.forward_tiles(True, False))
        tiles = None if plan is None else replace(default, forward=plan)
        row: dict[str, Any] = {"d": d, "n": n, "causal": causal, "plan": name,
                               "tiles": str(tiles or default),
                               "cudnn_ms": cudnn_ms, "cudnn_clocks": cudnn_clocks}
        try:
            o = forward(q, k, v, causal=causal, tiles=tiles)[0]
            row["rel_l2_vs_sdpa"] = float((o.float() - ref.float()).norm() / ref.float().norm())
            row["sage_ms"], row["sage_clocks"] = median_ms(
                lambda: forward(q, k, v, causal=causal, tiles=tiles), clocks)
            row["kernel_ms"] = kernel_ms(lambda: forward(q, k, v, causal=causal, tiles=tiles))
            row["tflops"] = flops / row["sage_ms"] / 1e9
            row["vs_cudnn"] = cudnn_ms / row["sage_ms"]
        except Exception as exc:  # noqa: BLE001 - a plan that fails is recorded
            row["error"] = common.error_text(exc)
        rows.append(row)
        print(row, flush=True)
    return rows


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", type=Path, nargs="?", help="where the JSON results go")
    parser.add_argument("markdown", type=Path, nargs="?", help="where the markdown table goes")
    parser.add_argument("--d", type=int, nargs="+", default=[64, 128], choices=(64, 128),
                        help="head dims to study (default: both)")
    parser.add_argument("--causal", choices=("both", "yes", "no"), default="both",
                        help="masks to study (default: both)")
    parser.add_argument("--n", type=int, default=4096, help="tokens (B4 H32; default 4096)")
    parser.add_argument("--plans", nargs="+", choices=tuple(PLANS), default=list(PLANS),
                        help="plans to time (default: all)")
    options = parser.parse_args(argv)
    masks = {"both": (False, True), "yes": (True,), "no": (False,)}[options.causal]
    with gpu_clocks.current_device_sampler(torch) as clocks:
        rows = [row for d in options.d for causal in masks
                for row in study(d, causal, n=options.n, plans=options.plans, clocks=clocks)]
    headers = ["D", "causal", "plan", "tiles", "sage ms", "cuDNN ms", "sage/cuDNN", "TFLOP/s",
               "sage MHz", "cuDNN MHz", "O rel-L2 vs SDPA", "kernels (ms per call)", "error"]
    table = [[r["d"], r["causal"], r["plan"], r["tiles"], common.fmt(r.get("sage_ms")),
              common.fmt(r["cudnn_ms"]), common.fmt(r.get("vs_cudnn")),
              common.fmt(r.get("tflops")), gpu_clocks.cell(r.get("sage_clocks")),
              gpu_clocks.cell(r.get("cudnn_clocks")), common.fmt(r.get("rel_l2_vs_sdpa")),
              ", ".join(f"{k} {v:.3f}" for k, v in r.get("kernel_ms", {}).items()),
              r.get("error", "")] for r in rows]
    results = {"environment": common.environment(), "rows": rows,
               "markdown": common.markdown_table(headers, table)}
    common.write_outputs(options.json, options.markdown, results,
                         f"Forward tile study, B4 H32 N{options.n} bf16\n\n"
                         + results["markdown"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
