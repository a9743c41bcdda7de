"""One sage FlashAttention forward and one cuDNN forward at a benchmark shape, for Nsight Compute.

bench/flash_speed.py says how fast; this says why (the ``flash-profile``
stage of ``scripts/gpu/run.sh`` runs it under ``ncu``): tensor-pipe
utilisation, issue slots, stall reasons and their source lines of the two
kernels side by side::

    ncu -k regex:"flash_forward|sdpa|fmha" --launch-skip 2 --launch-count 2 \\
        --section SpeedOfLight python3 bench/flash_profile.py --n 8192 --d 128

Each side runs twice (``--calls``); the first of each compiles or warms up,
so with ``--launch-skip 2`` (counting the attention kernels only) the
profiled launches are the second ones.
"""

from __future__ import annotations

import argparse

import torch


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--n", type=int, default=8192)
    parser.add_argument("--d", type=int, default=128)
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--calls", type=int, default=2)
    args = parser.parse_args(argv)
    from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: PLC0415

    from sage.kernels.flash.ops import flash_attention  # noqa: PLC0415  (needs run.sh's set-up)

    torch.manual_seed(0)
    q, k, v = (torch.randn(args.batch, args.heads, args.n, args.d, device="cuda",
                           dtype=torch.bfloat16) for _ in range(3))
    for _ in range(args.calls):  # sage first, then cuDNN: launches alternate
        flash_attention(q, k, v, causal=args.causal)
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=args.causal)
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
