"""SageBwd on torch CUDA tensors: the six kernels launched through ``@sage.jit``.

The launch sequence of :mod:`sage.kernels.sagebwd.interpreted` (grids,
buffers, constexprs and argument names from :mod:`sage.kernels.sagebwd.launch`)
with torch tensors on the GPU. One JIT object per kernel lives at module level,
so its in-memory cache of compiled specialisations is shared by every call.

* :func:`forward` ``(q, k, v) -> (o, lse, saved)``;
* :func:`backward` ``(do, saved) -> (dq, dk, dv, extras)``.

Tensors are indexed (batch, heads, seq, head_dim): q, do (B, H, N, D); k, v
(B, Hkv, Nkv, D), H % Hkv == 0; float16 or bfloat16 on one CUDA device;
D = 64 or 128. Any strides with a unit last-dimension stride are read in
place (the kernels take batch/head/row strides); a tensor whose last
dimension is not unit-stride is copied first. ``sage.attention``
(:mod:`sage.attention_api`) is the autograd-aware user API over these.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

import torch

from sage.attention_checks import TensorInfo, check_attention_args
from sage.jit import jit
from sage.kernels.sagebwd.launch import (BACKWARD_SEQUENCE, KERNELS, BufferSpec, Shape,
                                         Strides, Tiles, backward_buffers, constexprs,
                                         default_tiles, direct_kv, forward_buffers,
                                         forward_sequence, grids, runtime_args, scalar_args,
                                         stride_args, strided_params)

#: One JIT object per kernel (their in-memory caches persist across calls).
JIT_KERNELS = {name: jit(fn, strided=strided_params(name)) for name, fn in KERNELS.items()}
_TORCH_DTYPES = {"int8": torch.int8, "float32": torch.float32, "float16": torch.float16,
                 "bfloat16": torch.bfloat16}
LN2 = math.log(2.0)


@dataclass(frozen=True)
class Plan:
    """The non-tensor facts of one call: problem shape, tiles, flags, dtype."""

    shape: Shape
    tiles: Tiles
    causal: bool
    sm_scale: float
    smooth_k: bool
    smooth_q: bool
    dtype: torch.dtype
    scales: str = "fine"

    @property
    def fine(self) -> bool:
        """Whether the fine quantization granularities are used."""
        return self.scales == "fine"


#: Saved tensors the backward does not read (the INT8 V and its scales).
FORWARD_ONLY = ("v_qt", "v_scale")


@dataclass
class Saved:
    """What the forward keeps for the backward.

    ``q_q`` (B*H, N, D) int8 encodes c*Q (c = sm_scale * log2 e; minus the
    per-block means ``q_mean`` (B*H, ceil(N/BM), D) f32 with smooth_q, else a
    1-element placeholder); ``k_q`` (B*Hkv, Nkv, D) int8 encodes K - k_mean
    (``k_mean`` (B*Hkv, D) f32, zeros without smooth_k); ``*_scale`` one f32
    per block; ``v_qt`` the kernels' INT8 V, transposed and in sigma16 token
    order (:func:`~sage.kernels.sagebwd.launch.int8_v` gives the
    (B*Hkv, Nkv, D) INT8 V); ``v`` the 16-bit V and ``o`` the 16-bit O as (B, H, N, D)
    views (any strides); ``lse`` (B, H, N) f32, log2 units, smoothed logits.
    ``v_qt``/``v_scale`` are kept for the accuracy report (the backward does not
    read them: :data:`FORWARD_ONLY`).
    """

    plan: Plan
    q_q: torch.Tensor
    q_scale: torch.Tensor
    q_mean: torch.Tensor
    k_q: torch.Tensor
    k_scale: torch.Tensor
    k_mean: torch.Tensor
    v_qt: torch.Tensor | None
    v_scale: torch.Tensor | None
    v: torch.Tensor
    o: torch.Tensor
    lse: torch.Tensor

    @classmethod
    def tensor_names(cls) -> tuple[str, ...]:
        """The tensor fields, in the order of :meth:`tensors`."""
        return tuple(f.name for f in fields(cls) if f.name != "plan")

    def tensors(self, for_backward: bool = False) -> tuple[torch.Tensor | None, ...]:
        """Every tensor, in :meth:`tensor_names` order; with ``for_backward``
        (for ``ctx.save_for_backward``) None for those the backward does not read."""
        return tuple(None if for_backward and name in FORWARD_ONLY else getattr(self, name)
                     for name in self.tensor_names())

    @classmethod
    def from_tensors(cls, plan: Plan, tensors: tuple[torch.Tensor, ...]) -> Saved:
        """The inverse of :meth:`tensors` (from ``ctx.saved_tensors``)."""
        return cls(plan, **dict(zip(cls.tensor_names(), tensors)))


def unit_last_stride(x: torch.Tensor) -> torch.Tensor:
    """``x`` itself when its last dimension has stride 1, else a contiguous copy."""
    return x if x.stride(-1) == 1 else x.contiguous()


def strides_of(x: torch.Tensor) -> Strides:
    """The (batch, head, row) element strides of a 4-D tensor with a unit last stride."""
    if x.stride(-1) != 1:
        raise ValueError(f"the last dimension must have stride 1, strides {x.stride()}")
    return Strides(x.stride(0), x.stride(1), x.stride(2))


def allocate(specs: dict[str, BufferSpec], device: torch.device) -> dict[str, torch.Tensor]:
    """The buffers ``specs`` describe (zeroed where the kernels add into them)."""
    return {name: (torch.zeros if spec.zeroed else torch.empty)(
        spec.shape, dtype=_TORCH_DTYPES[spec.dtype], device=device)
        for name, spec in specs.items()}


def _launch(sequence: tuple[str, ...], plan: Plan, values: dict[str, Any],
            device: torch.device, store_p_ds: bool = False, direct_kv: bool = False) -> None:
    """Launches ``sequence``: on the GPU for CUDA tensors; CPU tensors run in
    the interpreter (the CPU implementation of the ``sage::`` ops, for tests)."""
    flags = dict(fine_scales=plan.fine, smooth_q=plan.smooth_q)
    all_grids = grids(plan.shape, plan.tiles, **flags)
    for name in sequence:
        kernel = JIT_KERNELS[name]
        run = kernel.run if device.type == "cuda" else kernel.interpret
        run(all_grids[name],
            *runtime_args(name, values), **plan.tiles.options(name, **flags),
            **constexprs(name, plan.shape, plan.tiles, causal=plan.causal,
                         smooth_k=plan.smooth_k, smooth_q=plan.smooth_q, fine_scales=plan.fine,
                         store_p_ds=store_p_ds, direct_kv=direct_kv))


def _info(x: torch.Tensor) -> TensorInfo:
    return TensorInfo(tuple(x.shape), str(x.dtype).rsplit(".", 1)[-1], str(x.device))


def forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False,
            sm_scale: float | None = None, smooth_k: bool = True, smooth_q: bool = False,
            out: torch.Tensor | None = None, tiles: Tiles | None = None,
            scales: str = "fine") -> tuple[torch.Tensor, torch.Tensor, Saved]:
    """The SageBwd forward: pre-pass (K mean, smoothing, per-block INT8 of c*Q,
    K, V) and the INT8 attention kernel.

    Args:
        q: (B, H, N, D); k, v: (B, Hkv, Nkv, D); f16 or bf16 CUDA tensors.
        sm_scale: softmax scale (default 1/sqrt(D)).
        out: a (B, H, N, D) tensor of q's dtype (any strides, unit last
            stride) to write O into; default a new contiguous tensor.
        tiles: block sizes and warps (default :func:`launch.default_tiles`).
        scales: quantization granularity, "fine" or "block" (docs/sagebwd.md).

    Returns:
        O (B, H, N, D) in q's dtype; LSE (B, H, N) f32 in log2 units of the
        K-smoothed logits (:func:`natural_lse` converts it); :class:`Saved`.

    Raises:
        sage.attention_checks.AttentionArgumentError: for unsupported inputs.
    """
    problem = check_attention_args(_info(q), _info(k), _info(v), causal=causal,
                                   sm_scale=sm_scale, smooth_k=smooth_k, smooth_q=smooth_q,
                                   layout="bhsd", scales=scales)
    plan = plan_of(q, k, causal=causal, sm_scale=problem.sm_scale, smooth_k=smooth_k,
                   smooth_q=smooth_q, scales=scales, tiles=tiles)
    return run_forward(plan, q, k, v, out)


def plan_of(q: torch.Tensor, k: torch.Tensor, *, causal: bool, sm_scale: float,
            smooth_k: bool, smooth_q: bool, scales: str, tiles: Tiles | None = None) -> Plan:
    """The :class:`Plan` of checked (B, H, N, D) / (B, Hkv, Nkv, D) views (sizes
    may be symbolic: the fake implementations of the ``sage::`` ops use it)."""
    batch, heads, n, d = q.shape
    shape = Shape(batch, heads, k.shape[1], n, k.shape[2], d)
    return Plan(shape, tiles or default_tiles(d, smooth_q, scales == "fine", causal), causal,
                sm_scale, smooth_k, smooth_q, q.dtype, scales)


def run_forward(plan: Plan, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                out: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, Saved]:
    """:func:`forward` for checked arguments and their plan (no checks)."""
    q, k, v = (unit_last_stride(x) for x in (q, k, v))
    shape = plan.shape
    o = torch.empty(q.shape, dtype=q.dtype, device=q.device) if out is None else out
    if tuple(o.shape) != tuple(q.shape) or o.dtype != q.dtype or o.device != q.device:
        raise ValueError(f"out must be a {tuple(q.shape)} {q.dtype} tensor on {q.device}, "
                         f"got {tuple(o.shape)} {o.dtype} on {o.device}")
    buffers = allocate(forward_buffers(shape, plan.tiles, plan.smooth_q, plan.fine),
                        q.device)
    values: dict[str, Any] = dict(buffers, **scalar_args(shape, plan.sm_scale),
                                  q=q, k=k, v=v, o=o)
    for name in ("q", "k", "v", "o"):
        values.update(stride_args(name, strides_of(values[name])))
    _launch(forward_sequence(plan.smooth_k, plan.fine), plan, values, q.device)
    saved = Saved(plan, v=v, o=o,
                  **{name: buffers[name] for name in Saved.tensor_names() if name in buffers})
    return o, buffers["lse"], saved


def backward(do: torch.Tensor, saved: Saved, *, store_p_ds: bool = False
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """The SageBwd backward: pre-pass (delta, per-block INT8 dO) and the
    backward kernel (INT8 dV, dQ, dK; 16-bit dP; f32 dS).

    Args:
        do: (B, H, N, D) upstream gradient (cast to the forward's dtype;
            copied if its last dimension is not unit-stride).
        saved: the forward's :class:`Saved`.
        store_p_ds: also return P and dS (for accuracy reports; slow, big).

    Returns:
        dq (B, H, N, D), dk, dv (B, Hkv, Nkv, D) in the inputs' dtype (dk, dv
        summed over the query heads of each kv head), and ``extras``: a dict
        with ``"delta"`` (B, H, N) f32 always, and ``"p"``, ``"ds"``
        (B, H, N, Nkv) f32 (P = softmax and dS = dLoss/dlogits before
        quantization, 0 where masked) when ``store_p_ds``.
    """
    plan = saved.plan
    if tuple(do.shape) != tuple(saved.o.shape):
        raise ValueError(f"do must have O's shape {tuple(saved.o.shape)}, got "
                         f"{tuple(do.shape)}")
    do = unit_last_stride(do.to(plan.dtype))
    # dK, dV straight in 16 bits where no kv head is shared (peak memory).
    grad_dtype = str(plan.dtype).rsplit(".", 1)[-1]
    direct = direct_kv(plan.shape, grad_dtype)
    buffers = allocate(backward_buffers(plan.shape, plan.tiles, store_p_ds, plan.fine,
                                        grad_dtype), do.device)
    values: dict[str, Any] = dict(buffers, **scalar_args(plan.shape, plan.sm_scale), do=do,
                                  **{name: getattr(saved, name)
                                     for name in Saved.tensor_names()})
    for name in ("do", "v", "o"):
        values.update(stride_args(name, strides_of(values[name])))
    _launch(BACKWARD_SEQUENCE, plan, values, do.device, store_p_ds=store_p_ds,
            direct_kv=direct)
    del values  # drops its references to the workspaces
    extras = {"delta": buffers["delta"]}
    if store_p_ds:
        extras.update(p=buffers["p_out"], ds=buffers["ds_out"])
    # Peak memory: the INT8 dO goes first, then each f32 workspace as soon as
    # it is converted (a no-op for 16-bit dK, dV).
    del buffers["do_qt"], buffers["q_qt"]
    dq = buffers.pop("dq").to(plan.dtype)
    dk = buffers.pop("dk").to(plan.dtype)
    dv = buffers.pop("dv").to(plan.dtype)
    return dq, dk, dv, extras


def natural_lse(q: torch.Tensor, lse: torch.Tensor, saved: Saved) -> torch.Tensor:
    """The true log-sum-exp (natural log) of the logits ``sm_scale * q k^T`` per
    query row, (B, H, N) f32, from the forward's LSE (log2 units, K-smoothed):
    ``lse * ln 2 + sm_scale * q . k_mean`` (spec 3.1)."""
    shape = saved.plan.shape
    group = shape.heads // shape.kv_heads
    k_mean = saved.k_mean.view(shape.batch, shape.kv_heads, shape.d)
    k_mean = k_mean.repeat_interleave(group, dim=1)
    shift = torch.einsum("bhnd,bhd->bhn", q.float(), k_mean)
    return lse * LN2 + saved.plan.sm_scale * shift


__all__ = ["FORWARD_ONLY", "JIT_KERNELS", "Plan", "Saved", "backward", "forward", "natural_lse",
           "allocate", "plan_of", "run_forward", "strides_of", "unit_last_stride"]
