"""Forward tile study: the SageBwd forward at other tile plans vs cuDNN SDPA, bf16.

    python3 bench/forward_tiles.py OUT.json OUT.md

The default tiles (64 query rows, 8 warps) select mma.sync; 128 query rows on
two warpgroups, or 64 rows on one, select wgmma for both matmuls. This times
the forward (pre-pass included, as in bench/attention_speed.py) at each plan
in one process, next to cuDNN SDPA on the same inputs, and checks O against
SDPA (relative L2). It is a study for choosing the next tile plan: the
backward, the accuracy report and ``sage.attention`` keep the default tiles.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402  (bench/common.py)

common.add_python_path()

import torch  # noqa: E402
import triton.testing  # noqa: E402

from sage.kernels.sagebwd.launch import Tiles, default_tiles  # noqa: E402
from sage.kernels.sagebwd.torch_ops import forward  # noqa: E402

PLANS = {"default": None, "wgmma-128x64x8": Tiles(128, 64, 8),
         "wgmma-64x64x4": Tiles(64, 64, 4),
         # The backward's D=128 blocks (64 x 32) with the forward on one
         # warpgroup.
         "wgmma-64x32x4": Tiles(64, 32, 4)}


def study(d: int, n: int = 4096, batch: int = 4, heads: int = 32) -> list[dict[str, Any]]:
    """Median forward times (ms) of every plan and of cuDNN at one shape."""
    gen = torch.Generator(device="cuda").manual_seed(d)
    q, k, v = (torch.randn(batch, heads, n, d, device="cuda", dtype=torch.bfloat16,
                           generator=gen) for _ in range(3))
    flops = 4 * batch * heads * n * n * d
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
        ref = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        cudnn_ms = triton.testing.do_bench(
            lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v),
            return_mode="median")
    rows = []
    for name, tiles in PLANS.items():
        row: dict[str, Any] = {"d": d, "n": n, "plan": name,
                               "tiles": str(tiles or default_tiles(d)), "cudnn_ms": cudnn_ms}
        try:
            o = forward(q, k, v, tiles=tiles)[0]
            row["rel_l2_vs_sdpa"] = float((o.float() - ref.float()).norm() / ref.float().norm())
            row["sage_ms"] = triton.testing.do_bench(lambda: forward(q, k, v, tiles=tiles),
                                                     return_mode="median")
            row["tflops"] = flops / row["sage_ms"] / 1e9
            row["vs_cudnn"] = cudnn_ms / row["sage_ms"]
        except Exception as exc:  # noqa: BLE001 - a plan that fails is recorded
            row["error"] = common.error_text(exc)
        rows.append(row)
        print(row, flush=True)
    return rows


def main(argv: list[str]) -> int:
    rows = study(64) + study(128)
    headers = ["D", "plan", "tiles", "sage ms", "cuDNN ms", "sage/cuDNN", "TFLOP/s",
               "O rel-L2 vs SDPA", "error"]
    table = [[r["d"], r["plan"], r["tiles"], common.fmt(r.get("sage_ms")),
              common.fmt(r["cudnn_ms"]), common.fmt(r.get("vs_cudnn")),
              common.fmt(r.get("tflops")), common.fmt(r.get("rel_l2_vs_sdpa")),
              r.get("error", "")] for r in rows]
    results = {"environment": common.environment(), "rows": rows,
               "markdown": common.markdown_table(headers, table)}
    common.write_outputs(Path(argv[0]) if argv else None,
                         Path(argv[1]) if len(argv) > 1 else None, results,
                         "Forward tile study, B4 H32 N4096 bf16, non-causal\n\n"
                         + results["markdown"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
