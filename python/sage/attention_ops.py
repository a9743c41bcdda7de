"""The ``torch.library`` custom ops behind ``sage.attention``.

* ``sage::attention_fwd(q, k, v, causal, sm_scale, smooth_k, smooth_q, layout,
  scales) -> (o, lse, q_q, q_scale, q_mean, k_q, k_scale, k_mean)``
* ``sage::attention_bwd(do, q_q, q_scale, q_mean, k_q, k_scale, v, o, lse,
  causal, sm_scale, smooth_k, smooth_q, layout, scales) -> (dq, dk, dv)``

As opaque ops, ``torch.compile`` keeps them whole in its graph (no graph
break, nothing of the JIT traced), and CUDA graphs capture their launches.
``register_fake`` gives their output shapes (symbolic sizes work) and
``register_autograd`` connects the two. The ops take *checked* arguments:
``sage.attention`` (:mod:`sage.attention_api`) checks them and applies
autocast first. Both run the launch sequence of
:mod:`sage.kernels.sagebwd.torch_ops`: on CUDA tensors the GPU kernels, on
CPU tensors the same kernels in the interpreter (slow; it lets
``torch.library.opcheck`` and ``torch.compile(backend="aot_eager")`` run
without a GPU).

q, k, v, do, o and the gradients are in ``layout`` ("bhsd" or "bshd"); the
quantized tensors are the kernels' own (:class:`torch_ops.Saved`).

Eager calls that nothing but autograd would see skip the dispatcher:
:func:`op_unobserved` (no graph wanted: :func:`forward` directly) and
:func:`eager_autograd` (:class:`EagerAttention`, the op's autograd node as
a ``torch.autograd.Function``); the op's backward likewise runs
:func:`backward` directly where nothing else sees it.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from sage.kernels.sagebwd import torch_ops
from sage.kernels.sagebwd.launch import backward_buffers, forward_buffers

Tensor = torch.Tensor


def to_kernel_view(x: Tensor, layout: str) -> Tensor:
    """The (B, H, N, D) view of a tensor in ``layout`` (no copy)."""
    return x.transpose(1, 2) if layout == "bshd" else x


def _plan(q: Tensor, k: Tensor, causal: bool, sm_scale: float, smooth_k: bool,
          smooth_q: bool, layout: str, scales: str) -> torch_ops.Plan:
    return torch_ops.plan_of(to_kernel_view(q, layout), to_kernel_view(k, layout),
                             causal=causal, sm_scale=sm_scale, smooth_k=smooth_k,
                             smooth_q=smooth_q, scales=scales)


def _new_output(q: Tensor) -> Tensor:
    """O: contiguous in the user's layout (q's shape and dtype)."""
    return torch.empty(q.shape, dtype=q.dtype, device=q.device)


_FORWARD_SAVED = ("q_q", "q_scale", "q_mean", "k_q", "k_scale", "k_mean")


def forward(q: Tensor, k: Tensor, v: Tensor, causal: bool, sm_scale: float, smooth_k: bool,
            smooth_q: bool, layout: str, scales: str
            ) -> tuple[Tensor, Tensor, torch_ops.Saved]:
    """What ``sage::attention_fwd`` computes, as O (q's layout and dtype), LSE
    and the forward's :class:`~torch_ops.Saved` (checked arguments)."""
    views = to_kernel_view(q, layout), to_kernel_view(k, layout), to_kernel_view(v, layout)
    # With V, a problem's first call may tune the forward's plan on the inputs.
    plan = torch_ops.plan_of(views[0], views[1], causal=causal, sm_scale=sm_scale,
                             smooth_k=smooth_k, smooth_q=smooth_q, scales=scales, v=views[2])
    out = _new_output(q)
    _, lse, saved = torch_ops.run_forward(plan, *views, out=to_kernel_view(out, layout))
    return out, lse, saved


def _forward_outputs(q: Tensor, k: Tensor, v: Tensor, causal: bool, sm_scale: float,
                     smooth_k: bool, smooth_q: bool, layout: str, scales: str
                     ) -> tuple[Tensor, ...]:
    """``sage::attention_fwd``'s outputs (:func:`forward`'s, flattened)."""
    out, lse, saved = forward(q, k, v, causal, sm_scale, smooth_k, smooth_q, layout, scales)
    return (out, lse) + tuple(getattr(saved, name) for name in _FORWARD_SAVED)


@torch.library.custom_op("sage::attention_fwd", mutates_args=())
def attention_fwd(q: Tensor, k: Tensor, v: Tensor, causal: bool, sm_scale: float,
                  smooth_k: bool, smooth_q: bool, layout: str, scales: str
                  ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """SageBwd forward: O (q's layout and dtype), LSE (B, H, N) f32 (log2 units,
    K-smoothed logits) and the quantized tensors the backward reads."""
    return _forward_outputs(q, k, v, causal, sm_scale, smooth_k, smooth_q, layout, scales)


def _observers() -> tuple[Callable[[], Any], ...] | None:
    """The torch state queries of :func:`op_unobserved` (private torch APIs:
    None, so that the op is always taken, where one is missing)."""
    try:
        C = torch._C
        return (C._is_torch_function_mode_enabled, C._len_torch_dispatch_stack,
                C._are_functorch_transforms_active, C._get_tracing_state,
                C._autograd._profiler_enabled, torch.compiler.is_compiling)
    except AttributeError:  # pragma: no cover - another torch
        return None


_OBSERVERS = _observers()


def _plain_eager(*tensors: Tensor) -> bool:
    """Whether an op on ``tensors`` would be seen by nothing but autograd and
    its implementation: plain tensors (no subclass), and no torch.compile or
    export tracing, torch function or dispatch mode, functorch transform,
    JIT tracer or profiler (its event)."""
    if _OBSERVERS is None:
        return False
    modes, dispatch, functorch, tracing, profiling, compiling = _OBSERVERS
    return (all(type(x) is Tensor for x in tensors)
            and not compiling() and not modes() and dispatch() == 0 and not functorch()
            and tracing() is None and not profiling())


def _needs_graph(*tensors: Tensor) -> bool:
    return torch.is_grad_enabled() and any(x.requires_grad for x in tensors)


def op_unobserved(q: Tensor, k: Tensor, v: Tensor) -> bool:
    """Whether a ``sage::attention_fwd`` call on ``q, k, v`` would be seen by
    nothing but its implementation (:func:`_plain_eager`, and autograd needs
    no graph), so that calling :func:`forward` instead gives the same
    results and the same state, without the dispatcher's work (~40 us a
    call)."""
    return _plain_eager(q, k, v) and not _needs_graph(q, k, v)


def eager_autograd(q: Tensor, k: Tensor, v: Tensor) -> bool:
    """Whether a ``sage::attention_fwd`` call on ``q, k, v`` would be seen by
    nothing but autograd and its implementation (:func:`_plain_eager`), and
    autograd needs a graph: then :class:`EagerAttention` records the same
    node without the dispatcher and the op's autograd wrappers (70-240 us a
    call less host time on the H100,
    bench/results/2026-11-27-h100-host-eager-autograd.md)."""
    return _plain_eager(q, k, v) and _needs_graph(q, k, v)


@attention_fwd.register_fake
def _attention_fwd_fake(q: Tensor, k: Tensor, v: Tensor, causal: bool, sm_scale: float,
                        smooth_k: bool, smooth_q: bool, layout: str, scales: str
                        ) -> tuple[Tensor, ...]:
    plan = _plan(q, k, causal, sm_scale, smooth_k, smooth_q, layout, scales)
    buffers = torch_ops.allocate(forward_buffers(plan.shape, plan.tiles, smooth_q, plan.fine,
                                                 smooth_k=smooth_k),
                                 q.device)
    return (_new_output(q),) + tuple(buffers[name] for name in ("lse",) + _FORWARD_SAVED)


def _grads(plan: torch_ops.Plan, layout: str, device: torch.device) -> tuple[Tensor, ...]:
    """Fake dq, dk, dv as the backward returns them: contiguous (B, H, N, D) /
    (B, Hkv, Nkv, D) in the input dtype, viewed in ``layout``."""
    specs = backward_buffers(plan.shape, plan.tiles, False, plan.fine)
    return tuple(to_kernel_view(torch.empty(specs[name].shape, dtype=plan.dtype,
                                            device=device), layout)
                 for name in ("dq", "dk", "dv"))


def backward(do: Tensor, q_q: Tensor, q_scale: Tensor, q_mean: Tensor, k_q: Tensor,
             k_scale: Tensor, v: Tensor, o: Tensor, lse: Tensor, causal: bool,
             sm_scale: float, smooth_k: bool, smooth_q: bool, layout: str, scales: str
             ) -> tuple[Tensor, Tensor, Tensor]:
    """What ``sage::attention_bwd`` computes: dq, dk, dv in the input dtype
    and ``layout`` (dk, dv summed over each kv head's query heads). ``do``
    has o's dtype."""
    plan = _plan(o, v, causal, sm_scale, smooth_k, smooth_q, layout, scales)
    saved = torch_ops.Saved(plan, q_q=q_q, q_scale=q_scale, q_mean=q_mean, k_q=k_q,
                            k_scale=k_scale, k_mean=None, v_qt=None, v_scale=None,
                            v=to_kernel_view(v, layout), o=to_kernel_view(o, layout), lse=lse)
    dq, dk, dv, _ = torch_ops.backward(to_kernel_view(do, layout), saved)
    return tuple(to_kernel_view(g, layout) for g in (dq, dk, dv))


#: SageBwd backward (:func:`backward` as an opaque op).
attention_bwd = torch.library.custom_op("sage::attention_bwd", mutates_args=())(backward)


@attention_bwd.register_fake
def _attention_bwd_fake(do: Tensor, q_q: Tensor, q_scale: Tensor, q_mean: Tensor,
                        k_q: Tensor, k_scale: Tensor, v: Tensor, o: Tensor, lse: Tensor,
                        causal: bool, sm_scale: float, smooth_k: bool, smooth_q: bool,
                        layout: str, scales: str) -> tuple[Tensor, ...]:
    plan = _plan(o, v, causal, sm_scale, smooth_k, smooth_q, layout, scales)
    return _grads(plan, layout, do.device)


# The op's arguments after q, k, v, in order (the backward passes them on).
_FLAGS = ("causal", "sm_scale", "smooth_k", "smooth_q", "layout", "scales")


def _setup_context(ctx: Any, inputs: tuple, output: tuple) -> None:
    q, k, v, *flags = inputs
    o, lse, q_q, q_scale, q_mean, k_q, k_scale, _ = output
    # Not the 16-bit Q and K, nor the INT8 V: the backward reads the INT8
    # Q and K, the 16-bit V, O and the LSE.
    ctx.save_for_backward(q_q, q_scale, q_mean, k_q, k_scale, v, o, lse)
    ctx.flags = tuple(flags)
    # Only O's gradient is used: no zero tensors for the other outputs (they
    # would cost as much memory as the INT8 Q and K).
    ctx.set_materialize_grads(False)


def _backward(ctx: Any, do: Tensor, *_: Any) -> tuple[Tensor | None, ...]:
    q_q, q_scale, q_mean, k_q, k_scale, v, o, lse = ctx.saved_tensors
    # dO in the forward's dtype (autocast may hand a float32 one back).
    do = do.to(o.dtype)
    # The op where something may see it (or a graph of the backward is
    # asked for: the op then says it has none), else its implementation.
    run = backward if _plain_eager(do, v, o) and not torch.is_grad_enabled() else attention_bwd
    dq, dk, dv = run(do, q_q, q_scale, q_mean, k_q, k_scale, v, o, lse, *ctx.flags)
    return (dq, dk, dv) + (None,) * len(_FLAGS)


attention_fwd.register_autograd(_backward, setup_context=_setup_context)


class EagerAttention(torch.autograd.Function):
    """``sage::attention_fwd`` with its autograd node, for eager calls that
    nothing but autograd sees (:func:`eager_autograd`): the same
    implementation, saved tensors and backward (:func:`_setup_context`,
    :func:`_backward`), without the dispatcher's and the op's autograd
    wrappers' host time. ``apply(q, k, v, causal, sm_scale, smooth_k,
    smooth_q, layout, scales)`` returns the op's outputs. (A forward that
    takes ``ctx``, without a separate ``setup_context``: then ``apply`` does
    not bind the arguments to the forward's signature on every call.)"""

    @staticmethod
    def forward(ctx: Any, q: Tensor, k: Tensor, v: Tensor, causal: bool, sm_scale: float,
                smooth_k: bool, smooth_q: bool, layout: str, scales: str
                ) -> tuple[Tensor, ...]:
        inputs = (q, k, v, causal, sm_scale, smooth_k, smooth_q, layout, scales)
        outputs = _forward_outputs(*inputs)
        _setup_context(ctx, inputs, outputs)
        return outputs

    backward = staticmethod(_backward)


__all__ = ["EagerAttention", "attention_bwd", "attention_fwd", "backward", "eager_autograd",
           "forward", "op_unobserved", "to_kernel_view"]
