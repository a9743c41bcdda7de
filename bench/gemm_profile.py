"""One sage bf16 GEMM and one cuBLAS GEMM at a benchmark shape, for Nsight Compute.

bench/gemm_speed.py says how fast; this says why (the ``gemm-profile``
stage of ``scripts/gpu/run.sh`` runs it under ``ncu``): tensor-pipe
utilisation, L2 and DRAM throughput and stall reasons of the two kernels
side by side::

    ncu --launch-skip 2 --launch-count 2 --section SpeedOfLight \\
        python3 bench/gemm_profile.py --m 4096 --n 4096 --k 4096

Each side runs twice (``--calls``); the first of each compiles or warms up,
so with ``--launch-skip 2`` the profiled launches are the second ones.
"""

from __future__ import annotations

import argparse

import torch


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=4096)
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--k", type=int, default=4096)
    parser.add_argument("--calls", type=int, default=2)
    args = parser.parse_args(argv)
    from sage.kernels.gemm.ops import half_mm  # noqa: PLC0415  (needs run.sh's set-up)

    torch.manual_seed(0)
    a = torch.randn(args.m, args.k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(args.n, args.k, device="cuda", dtype=torch.bfloat16)
    for _ in range(args.calls):  # sage first, then cuBLAS: launches alternate
        half_mm(a, b)
        a @ b.t()
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
