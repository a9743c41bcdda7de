"""SageBwd attention, forward and backward, checked against float64 attention.

With torch and a CUDA GPU this calls the user API::

    o = sage.attention(q, k, v, causal=True)     # INT8 QK^T and PV, smoothed K
    o.backward(do)                               # INT8 dV, dQ, dK; 16-bit dP

Without a GPU (or with ``SAGE_INTERPRET=1``) the very same DSL kernels run on
the CPU interpreter, on a smaller problem. Either way it prints the paper's
metrics against full-precision attention computed in float64.

    python3 python/examples/attention.py
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sage.reference.sagebwd import (SageBwdConfig, attention_reference,  # noqa: E402
                                    cosine_similarity, relative_l2)


def on_gpu(q, k, v, do, causal: bool) -> dict[str, np.ndarray]:
    """sage.attention with torch autograd on the GPU."""
    import torch

    import sage
    tensors = [torch.from_numpy(x).to("cuda", torch.bfloat16).requires_grad_()
               for x in (q, k, v)]
    o = sage.attention(*tensors, causal=causal)
    o.backward(torch.from_numpy(do).to("cuda", torch.bfloat16))
    out = {"O": o, "dQ": tensors[0].grad, "dK": tensors[1].grad, "dV": tensors[2].grad}
    return {name: x.detach().double().cpu().numpy() for name, x in out.items()}


def in_interpreter(q, k, v, do, causal: bool) -> dict[str, np.ndarray]:
    """The same kernels through the CPU interpreter."""
    from sage.kernels.sagebwd import interpreted
    cfg = SageBwdConfig(sm_scale=1 / math.sqrt(q.shape[-1]), causal=causal,
                        out_dtype="bfloat16")
    o, _, saved = interpreted.forward(q, k, v, cfg, dtype="bfloat16")
    grads = interpreted.backward(saved, do)
    return {"O": o, "dQ": grads.dq, "dK": grads.dk, "dV": grads.dv}


def main() -> int:
    gpu = os.environ.get("SAGE_INTERPRET") != "1" and _cuda_available()
    # (batch, heads, kv_heads, seq, head_dim): GQA, a sequence tail, causal.
    b, h, hkv, n, d = (2, 8, 2, 1000, 128) if gpu else (1, 2, 1, 100, 64)
    rng = np.random.default_rng(0)
    q = rng.standard_normal((b, h, n, d))
    k = rng.standard_normal((b, hkv, n, d))
    v = rng.standard_normal((b, hkv, n, d))
    do = rng.standard_normal((b, h, n, d))
    got = (on_gpu if gpu else in_interpreter)(q, k, v, do, causal=True)
    ref = attention_reference(q, k, v, do, 1 / math.sqrt(d), causal=True)
    exact = {"O": ref.o, "dQ": ref.dq, "dK": ref.dk, "dV": ref.dv}
    print(f"SageBwd ({'H100' if gpu else 'CPU interpreter'}), B={b} H={h} Hkv={hkv} N={n} "
          f"D={d}, causal, bf16, vs float64 attention:")
    worst = 1.0
    for name, x in got.items():
        cos = cosine_similarity(x, exact[name])
        worst = min(worst, cos)
        print(f"  {name}: cosine {cos:.5f}, relative L2 {relative_l2(x, exact[name]):.4f}")
    return 0 if worst > 0.99 else 1


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


if __name__ == "__main__":
    sys.exit(main())
