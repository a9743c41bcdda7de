"""Pre-flight check of the training runs: sage.attention's output and gradients at the
model's attention shape against exact float64 attention, on the GPU.

The first H100 run (2026-11-23, 00:18 UTC) trained far worse with sage than with
SDPA while its forward matched SDPA on the same weights, i.e. the gradients
were wrong. This check runs before any training arm and names the input form
that fails: q, k, v as the model's fused qkv projection produces them (strided
views of one tensor, ``layout="bshd"``), the same made contiguous, and the
smoothing variants the arms use; SDPA in bf16 is the control. Inputs are unit
Gaussian (sigma 1), where SageBwd's relative L2 error is ~0.015-0.02.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

#: A relative L2 error above this on any tensor fails the check (sage's is ~0.02).
LIMIT = 0.1


def _exact(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, do: torch.Tensor
           ) -> tuple[torch.Tensor, ...]:
    """O, dQ, dK, dV of causal softmax(q k^T / sqrt(D)) v in float64; (B, N, H, D) inputs."""
    q, k, v = (x.detach().double().transpose(1, 2).requires_grad_() for x in (q, k, v))
    n, d = q.shape[2], q.shape[3]
    logits = (q @ k.transpose(-1, -2)) / math.sqrt(d)
    mask = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()
    o = torch.softmax(logits.masked_fill(~mask, float("-inf")), dim=-1) @ v
    grads = torch.autograd.grad(o, (q, k, v), do.double().transpose(1, 2))
    return tuple(x.transpose(1, 2) for x in (o.detach(),) + grads)


def _rel(x: torch.Tensor, ref: torch.Tensor) -> float:
    x, ref = x.detach().double(), ref.detach().double()
    return float((x - ref).norm() / ref.norm())


def grad_check(batch: int = 16, heads: int = 6, n: int = 512, d: int = 64, seed: int = 0,
               device: str = "cuda", backend: str = "sage") -> dict[str, Any]:
    """Relative L2 of O, dQ, dK, dV per input form; ``ok`` per row (all <= LIMIT).

    ``backend`` "sage" calls :func:`sage.attention` directly (GPU); another
    :mod:`sage.nn.attention` backend (e.g. "sage-emulate" on a CPU) goes
    through :func:`sage.nn.attention.attend` (tests).
    """
    import sage
    from sage.nn.attention import AttentionOptions, attend

    gen = torch.Generator(device=device).manual_seed(seed)
    qkv = torch.randn(batch, n, 3, heads, d, device=device, generator=gen).bfloat16()
    do = torch.randn(batch, n, heads, d, device=device, generator=gen).bfloat16()
    q, k, v = qkv.unbind(2)
    exact = _exact(q, k, v, do)

    def sage_fn(smooth_k: bool = True, smooth_q: bool = False) -> Any:
        if backend == "sage":
            return lambda q, k, v: sage.attention(q, k, v, causal=True, layout="bshd",
                                                  smooth_k=smooth_k, smooth_q=smooth_q)
        options = AttentionOptions(backend, smooth_k, smooth_q)
        return lambda q, k, v: attend(q, k, v, options, causal=True)

    def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                              v.transpose(1, 2), is_causal=True).transpose(1, 2)

    def make(form: str) -> list[torch.Tensor]:
        """Fresh inputs that require grad: "contiguous", "views" (q, k, v views of
        one qkv tensor, as the model's fused projection makes them) or "v-view"."""
        views = qkv.detach().clone().requires_grad_().unbind(2)
        own = [x.detach().contiguous().requires_grad_() for x in (q, k, v)]
        if form == "views":
            return list(views)
        if form == "v-view":
            return [own[0], own[1], views[2]]
        return own

    variants = [
        ("sdpa bf16 (control)", sdpa, "contiguous"),
        ("sage, contiguous q, k, v", sage_fn(), "contiguous"),
        ("sage, q k v strided views of one qkv tensor", sage_fn(), "views"),
        ("sage, contiguous q k, strided v view", sage_fn(), "v-view"),
        ("sage, contiguous, K-smoothing off", sage_fn(smooth_k=False), "contiguous"),
        ("sage, contiguous, Q-smoothing on", sage_fn(smooth_q=True), "contiguous"),
    ]
    rows = []
    for name, fn, form in variants:
        try:
            args = make(form)
            o = fn(*args)
            grads = torch.autograd.grad(o, args, do)
            errors = {"o": _rel(o, exact[0])}
            errors.update({key: _rel(g, ref) for key, g, ref in
                           zip(("dq", "dk", "dv"), grads, exact[1:])})
            rows.append({"variant": name, **errors,
                         "ok": all(math.isfinite(e) and e <= LIMIT for e in errors.values())})
        except Exception as exc:  # noqa: BLE001 - record and go on
            rows.append({"variant": name, "error": f"{type(exc).__name__}: {exc}"[:300],
                         "ok": False})
    return {"shape": {"batch": batch, "heads": heads, "n": n, "d": d}, "limit": LIMIT,
            "rows": rows}


def harness_ok(check: dict[str, Any]) -> bool:
    """Whether the input forms the training harness uses (contiguous q, k, v, and the
    smoothing variants) pass."""
    return all(r["ok"] for r in check["rows"] if "strided" not in r["variant"])


def table(check: dict[str, Any]) -> str:
    """A plain-text table of the check."""
    lines = [f"grad check {check['shape']} (rel-L2 vs float64; limit {check['limit']}):"]
    for r in check["rows"]:
        if "error" in r:
            lines.append(f"  {r['variant']:<48} ERROR {r['error']}")
        else:
            lines.append(f"  {r['variant']:<48} O {r['o']:.4f} dQ {r['dq']:.4f} "
                         f"dK {r['dk']:.4f} dV {r['dv']:.4f} {'ok' if r['ok'] else 'FAIL'}")
    return "\n".join(lines)


__all__ = ["LIMIT", "grad_check", "harness_ok", "table"]
