"""Where the host time of one SageBwd forward goes at a small N (GPU machine).

    python3 bench/host_overhead.py [--n 1024] [--d 128] [--causal] [--grad] [--profile]

At N = 1K the forward's kernels take ~0.15 ms and cuDNN's attention ~0.1
ms, so a call is bound by the host: this times each layer of a
``sage.attention`` call, outermost first, in one process. For each row it
gives the host time per call (the loop of calls, not waiting for the GPU)
and the wall time per call (synchronised at the end): where the two agree,
the host sets the pace. ``--grad``: q, k and v require grad (as in
bench/attention_speed.py), so a call takes the autograd path and saves what
the backward needs. ``--profile``: then the Python functions that take the
host time of 200 ``sage.attention`` calls (cProfile, by own time). Rows:

- ``sage.attention``: the public op (checks; the op's implementation, with
  --grad through its autograd node, without the dispatcher);
- ``sage::attention_fwd op``: the torch custom op through the dispatcher
  (with --grad, its autograd wrappers);
- ``torch_ops.forward``: the checks, the plan, the buffers, two launches;
- ``run_forward``: the buffers and two launches of a checked call;
- ``allocate``: the pre-pass and forward buffers alone;
- ``launches``: the two kernel launches with their arguments built;
- ``kernel.run (forward)``: one JIT launch of the forward kernel.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402  (bench/common.py)

common.add_python_path()

import torch  # noqa: E402


def per_call_us(fn: Callable[[], object], calls: int = 200) -> tuple[float, float]:
    """(host, wall) microseconds per call of ``fn`` after a warm-up."""
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    host = (time.perf_counter() - start) / calls * 1e6
    torch.cuda.synchronize()
    return host, (time.perf_counter() - start) / calls * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--d", type=int, default=128)
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--grad", action="store_true", help="inputs that require grad")
    parser.add_argument("--profile", action="store_true",
                        help="cProfile 200 sage.attention calls (own time)")
    args = parser.parse_args(argv)
    import sage  # noqa: PLC0415
    from sage.kernels.sagebwd import torch_ops  # noqa: PLC0415
    from sage.kernels.sagebwd.launch import (constexprs, forward_buffers,  # noqa: PLC0415
                                             FORWARD_SEQUENCE, grids, runtime_args,
                                             scalar_args, stride_args)

    shape = (4, 32, args.n, args.d)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16).requires_grad_(args.grad)
               for _ in range(3))
    causal = args.causal
    plan = torch_ops.plan_of(q, k, causal=causal, sm_scale=args.d ** -0.5, smooth_k=True,
                             smooth_q=False, scales="fine")
    specs = forward_buffers(plan.shape, plan.tiles, plan.smooth_q, plan.fine,
                            smooth_k=plan.smooth_k)
    values = dict(torch_ops.allocate(specs, q.device), **scalar_args(plan.shape, plan.sm_scale),
                  q=q, k=k, v=v, o=torch.empty_like(q))
    for name in ("q", "k", "v", "o"):
        values.update(stride_args(name, torch_ops.strides_of(values[name])))
    flags = dict(fine_scales=plan.fine, smooth_q=plan.smooth_q)
    name = "sagebwd_forward"
    kernel = torch_ops.JIT_KERNELS[name]
    # Sized as the launches size it (a persistent plan: the device's multiprocessors).
    sms = torch_ops._persistent_sms(plan, q.device)
    launch = (grids(plan.shape, plan.tiles, **flags, sms=sms)[name],
              runtime_args(name, values),
              plan.tiles.options(name, **flags),
              constexprs(name, plan.shape, plan.tiles, causal=causal, smooth_k=True,
                         smooth_q=False, fine_scales=plan.fine))
    rows = {
        "sage.attention": lambda: sage.attention(q, k, v, causal=causal),
        # The custom op through the dispatcher (with --grad its autograd
        # wrappers), which sage.attention skips where nothing else sees it.
        "sage::attention_fwd op": lambda: torch.ops.sage.attention_fwd(
            q, k, v, causal, plan.sm_scale, True, False, "bhsd", "fine"),
        "torch_ops.forward": lambda: torch_ops.forward(q, k, v, causal=causal),
        "run_forward": lambda: torch_ops.run_forward(plan, q, k, v),
        "allocate": lambda: torch_ops.allocate(specs, q.device),
        "launches": lambda: torch_ops._launch(FORWARD_SEQUENCE, plan, values,
                                               q.device),
        "kernel.run (forward)": lambda: kernel.run(launch[0], *launch[1], **launch[2],
                                                   **launch[3]),
    }
    print(f"B4 H32 N{args.n} D{args.d} causal={causal} grad={args.grad}, bf16, "
          f"{torch.cuda.get_device_name()}")
    print("| layer | host us per call | wall us per call |")
    print("| --- | ---: | ---: |")
    for label, fn in rows.items():
        host, wall = per_call_us(fn)
        print(f"| {label} | {host:.1f} | {wall:.1f} |")
    if args.profile:
        import cProfile  # noqa: PLC0415
        import pstats  # noqa: PLC0415

        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(200):
            rows["sage.attention"]()
        profiler.disable()
        torch.cuda.synchronize()
        pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
