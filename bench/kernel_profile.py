"""One SageBwd forward + backward at one benchmark shape, for Nsight Compute.

The speed benchmark says how fast; this says why: run it under ``ncu`` (the
``profile`` stage of ``scripts/gpu/run.sh`` does) to get the forward's and
the backward's stall reasons, issue rates and top stalling instructions::

    ncu --kernel-name regex:sagebwd_ --launch-count 2 --set full \\
        python3 bench/kernel_profile.py --d 64

A warm-up call compiles the kernels first (under ``--launch-skip``), so the
profiled launches are steady-state ones.
"""

from __future__ import annotations

import argparse
import sys

import torch


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--b", type=int, default=4)
    parser.add_argument("--h", type=int, default=32)
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--calls", type=int, default=2,
                        help="forward + backward calls (the first compiles)")
    args = parser.parse_args(argv)
    import sage  # noqa: PLC0415  (needs the SAGE_* set-up of scripts/gpu/run.sh)

    torch.manual_seed(0)
    shape = (args.b, args.h, args.n, args.d)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    do = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    for _ in range(args.calls):
        out = sage.attention(q, k, v, causal=args.causal)
        out.backward(do)
    torch.cuda.synchronize()
    print(f"profiled B{args.b} H{args.h} N{args.n} D{args.d} causal={args.causal}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
