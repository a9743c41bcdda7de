"""``sage.attention``: SageBwd INT8 attention for torch.

Imported lazily by ``sage.attention`` (``import sage`` never imports torch).
The forward and the backward are the custom ops of :mod:`sage.attention_ops`
(``torch.ops.sage.attention_fwd`` / ``attention_bwd``, connected by
``register_autograd``), so ``torch.compile`` and CUDA graphs take them whole;
this wrapper checks the arguments (:mod:`sage.attention_checks`, torch-free)
and applies autocast before the op. docs/sagebwd.md "Attention API"
describes it.

Host time: an eager call keeps the checks of a good call by its shapes,
dtypes, devices and arguments, and where nothing but the op's
implementation would see the op (no gradient wanted, no compilation,
mode, transform, tracer or profiler: :func:`attention_ops.op_unobserved`)
it calls that implementation directly, without the dispatcher's work; where
only autograd would see it besides (:func:`attention_ops.eager_autograd`),
it records the op's autograd node through
:class:`attention_ops.EagerAttention` (the same implementation, saved
tensors and backward) instead of the dispatcher and the op's autograd
wrappers.
"""

from __future__ import annotations

import torch

from sage.attention_checks import AttentionArgumentError
from sage.attention_ops import (EagerAttention, attention_fwd, eager_autograd, forward,
                                op_unobserved)
from sage.jit.knobs import knobs
from sage.kernels.sagebwd.torch_ops import check_tensors


def _autocast_dtype() -> torch.dtype | None:
    """The CUDA autocast dtype when autocast is on for CUDA, else None."""
    try:  # torch >= 2.4: per-device-type queries
        return torch.get_autocast_dtype("cuda") if torch.is_autocast_enabled("cuda") else None
    except (TypeError, AttributeError):  # pragma: no cover - older torch
        return torch.get_autocast_gpu_dtype() if torch.is_autocast_enabled() else None


def _check_is_tensor(name: str, x: object) -> None:
    if not isinstance(x, torch.Tensor):
        raise AttentionArgumentError(f"sage.attention: argument {name}: must be a "
                                     f"torch.Tensor, got {type(x).__name__}")


def _autocast(x: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    """``x`` cast to the autocast dtype (a floating CUDA tensor under autocast)."""
    if dtype is None or not x.is_cuda or not x.is_floating_point() or x.dtype == dtype:
        return x
    return x.to(dtype)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
              sm_scale: float | None = None, smooth_k: bool = True, smooth_q: bool = False,
              layout: str = "bhsd", scales: str = "fine") -> torch.Tensor:
    """SageBwd attention ``softmax(sm_scale * q k^T) v`` with INT8 forward and backward.

    Args:
        q: (B, H, N, D) for ``layout="bhsd"``, (B, N, H, D) for ``"bshd"``.
        k, v: (B, Hkv, Nkv, D) / (B, Nkv, Hkv, D), one shape; H % Hkv == 0
            (GQA; Hkv = 1 is MQA): query head h reads kv head h // (H // Hkv).
            q, k, v: float16 or bfloat16 (one dtype) CUDA tensors on one
            device (CPU tensors only under ``SAGE_INTERPRET=1``, in the
            interpreter); D = 64 or 128; any N and Nkv >= 1 (tails are masked).
        causal: key j is visible to query i iff j <= i + Nkv - N: aligned
            bottom-right, as FlashAttention (decoding: the last query sees
            every key); needs N <= Nkv.
        sm_scale: softmax scale, finite and > 0; default 1 / sqrt(D).
        smooth_k: subtract the per-(batch, kv head) key mean before quantizing K
            (on by default; softmax is unchanged; no backward correction term).
        smooth_q: subtract per-block query means (their Q K^T term is added back
            in f32; the backward adds the dK bias term). Off by default.
        layout: "bhsd" or "bshd": the axis order of q, k, v and of the result.
        scales: the INT8 scale granularity. "fine" (default): Q per token, K
            per group of 16 keys (keys with equal (k // 2) % 4 in each block
            of 64), P per key column, dO per channel, dS per query row for dQ
            and per key column for dK (token scales folded into the f32 dS
            first);
            "block": one scale per tile for every operand, as the SageBwd
            papers write it. Both keep every scale constant along its
            matmul's contraction; "fine" meets the papers' accuracy
            (docs/sagebwd.md, bench/results).

    Returns:
        O in q's layout and dtype (contiguous in that layout). Differentiable
        with respect to q, k and v (the one fused backward computes all three;
        only those that require grad are returned to autograd).

    Strides and copies: inputs are read in place through their batch, head
    and row strides (``layout="bshd"`` and non-contiguous views such as
    slices or transposes of the batch/head/seq axes cost no copy), provided
    their last dimension has stride 1; a tensor whose last dimension is not
    unit-stride is copied (``.contiguous()``) first. The upstream gradient dO
    follows the same rule.

    Autocast: under ``torch.autocast("cuda")`` floating inputs of another dtype
    (float32 in particular) are cast to the autocast dtype (float16 or
    bfloat16) first, like torch's lower-precision ops; the backward runs in
    the same autocast state. Without autocast, float32 inputs are rejected.

    Precision contract (SageBwd, ``shared/spec/sagebwd.md``): six of the seven
    matmuls are INT8 with f32 scales: S = Q K^T (Q holds c*Q with
    c = sm_scale * log2 e; K is smoothed), O = P~ V (per-token P~ scales from
    the online-softmax maxima, per-block V), the recomputed S, dV = P^T dO,
    dQ = dS K and dK = dS^T Q (granularities: ``scales``). dP = dO V^T
    is a 16-bit matmul with f32 accumulation; dS stays f32 until quantized;
    softmax statistics, delta and all accumulations are f32; dQ, dK, dV are
    accumulated in f32 (atomic adds) and returned in the input dtype. Results
    match the float64 emulation of this algorithm
    (``sage.reference.sagebwd``) to relative L2 <= 1e-3; against exact
    attention they carry INT8 quantization error (cosine > 0.999 at unit
    Gaussian inputs; errors grow with |Q|, |K|: spec section 5, Table 1).
    GQA reductions and dQ use f32 atomics, so gradients are not bitwise
    deterministic run to run.

    Saved for the backward: INT8 Q and K with their scales (and the Q block
    means with smooth_q), the K mean, the 16-bit V, O and the f32 LSE; not the
    16-bit Q and K, nor the INT8 V. Nothing is saved when no input requires
    grad.

    Compilation: each kernel is specialised (dtype, D, tiles, flags, 16-byte
    alignment and divisibility by 16 of lengths and strides) and compiled on
    first use, then cached in memory and on disk (docs/jit.md).

    Raises:
        AttentionArgumentError (a ValueError and a TypeError): naming the
            argument: a non-tensor, wrong rank, a CPU tensor (or no CUDA),
            tensors on different devices, a dtype other than float16/bfloat16
            or differing dtypes, k and v of different shapes, batch or
            head_dim mismatch, head_dim not 64/128, empty tensors, heads not
            divisible by kv_heads, causal with N > Nkv, an unknown layout,
            sm_scale not a finite number > 0, flags that are not bools, an
            unknown ``scales``.
    """
    dtype = _autocast_dtype()
    if dtype is not None:
        q, k, v = (_autocast(x, dtype) if isinstance(x, torch.Tensor) else x
                   for x in (q, k, v))
    _check_is_tensor("q", q)
    _check_is_tensor("k", k)
    _check_is_tensor("v", v)
    # Eager calls keep the checks of a good call by its shapes, dtypes,
    # devices and arguments (torch.compile traces the checks themselves).
    problem = check_tensors(q, k, v, causal=causal, sm_scale=sm_scale, smooth_k=smooth_k,
                            smooth_q=smooth_q, layout=layout, scales=scales,
                            interpret=knobs.interpret.get(), cuda_available=None,
                            memo=not torch.compiler.is_compiling())
    q, k, v = _unit_last_stride(q), _unit_last_stride(k), _unit_last_stride(v)
    args = (q, k, v, causal, problem.sm_scale, smooth_k, smooth_q, layout, scales)
    # What the op would do, without the dispatcher's work, where nothing but
    # autograd would see it: no graph needed, or the same autograd node.
    if op_unobserved(q, k, v):
        return forward(*args)[0]
    if eager_autograd(q, k, v):
        return EagerAttention.apply(*args)[0]
    return attention_fwd(*args)[0]


def _unit_last_stride(x: torch.Tensor) -> torch.Tensor:
    """``x``, or a contiguous copy when its last dimension is not unit-stride
    (outside the op, so its gradient flows back through the copy)."""
    return x if x.stride(-1) == 1 else x.contiguous()


__all__ = ["AttentionArgumentError", "attention"]
