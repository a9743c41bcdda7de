"""Causal self-attention backends for :mod:`sage.nn` models.

Every backend takes q, k, v of shape (B, N, H, D) (the "bshd" layout a
projection produces) and returns O in the same layout:

* ``"sdpa"``: ``torch.nn.functional.scaled_dot_product_attention`` in the
  16-bit autocast dtype (the full-precision reference of the training runs;
  float32 when autocast is off);
* ``"sdpa-math"``: the same call pinned to PyTorch's math backend, which
  computes in float32 from the 16-bit inputs (unless
  ``torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp`` is on): a second
  full-precision attention that rounds differently from the fused kernel, the
  "noise twin" that measures how far rounding alone moves a training run;
* ``"sage"``: :func:`sage.attention` (SageBwd INT8 forward and backward on the
  GPU);
* ``"sage-interpret"``: the same SageBwd kernels run by the CPU interpreter
  (:mod:`sage.kernels.sagebwd.interpreted`) on numpy copies, bfloat16 values;
* ``"sage-emulate"``: the float64 emulation of SageBwd
  (:func:`sage.reference.sagebwd.emulate_forward` / ``emulate_backward``),
  bfloat16 values.

The two CPU backends exist so that a training run can be checked without a
GPU (tests); they are slow and meant for tiny models.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

BACKENDS = ("sdpa", "sdpa-math", "sage", "sage-interpret", "sage-emulate")


@dataclass(frozen=True)
class AttentionOptions:
    """How a model's attention is computed.

    ``backend`` is one of :data:`BACKENDS`; ``smooth_k``/``smooth_q`` and
    ``scales`` are SageBwd's switches (ignored by ``"sdpa"`` and ``"sdpa-math"``).
    """

    backend: str = "sdpa"
    smooth_k: bool = True
    smooth_q: bool = False
    scales: str = "fine"

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"attention backend must be one of {list(BACKENDS)}, "
                             f"got {self.backend!r}")

    def sagebwd_config(self, d: int, causal: bool, n_kv: int | None = None) -> Any:
        """The :class:`sage.reference.sagebwd.SageBwdConfig` of these switches
        at head dim ``d`` and ``n_kv`` keys: softmax scale 1/sqrt(d), bfloat16
        output, and the blocks of the kernels' default plan
        (``launch.default_tiles``), so the CPU backends and the emulation
        follow the GPU's decisions."""
        from sage.kernels.sagebwd.launch import default_tiles, emulation_blocks
        from sage.reference.sagebwd import SageBwdConfig

        fine = self.scales == "fine"
        blocks = emulation_blocks(default_tiles(d, self.smooth_q, fine, causal, n_kv=n_kv),
                                  fine_scales=fine, smooth_q=self.smooth_q)
        return SageBwdConfig(sm_scale=1.0 / math.sqrt(d), causal=causal,
                             smooth_k=self.smooth_k, smooth_q=self.smooth_q, **blocks,
                             out_dtype="bfloat16", scales=self.scales)


def _to_numpy_bhsd(x: torch.Tensor) -> np.ndarray:
    """(B, N, H, D) tensor -> (B, H, N, D) float32 array of bfloat16-rounded values."""
    return x.detach().to(torch.bfloat16).float().transpose(1, 2).contiguous().cpu().numpy()


def _from_numpy_bhsd(x: np.ndarray, like: torch.Tensor) -> torch.Tensor:
    """(B, H, N, D) array -> (B, N, H, D) tensor with ``like``'s dtype and device."""
    return torch.from_numpy(np.ascontiguousarray(x, np.float32)).transpose(1, 2).to(
        dtype=like.dtype, device=like.device)


class _CpuSageBwd(torch.autograd.Function):
    """SageBwd on numpy through the interpreter or the float64 emulation."""

    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                options: AttentionOptions, causal: bool) -> torch.Tensor:
        # (B, N, H, D) tensors.
        cfg = options.sagebwd_config(q.shape[-1], causal, n_kv=k.shape[1])
        qn, kn, vn = (_to_numpy_bhsd(x) for x in (q, k, v))
        if options.backend == "sage-interpret":
            from sage.kernels.sagebwd import interpreted

            o, _, saved = interpreted.forward(qn, kn, vn, cfg, "bfloat16")
        else:
            from sage.reference.sagebwd import emulate_forward

            saved = emulate_forward(qn, kn, vn, cfg)
            o = saved.o
        ctx.state = (options, cfg, saved, vn)
        return _from_numpy_bhsd(o, q)

    @staticmethod
    def backward(ctx: Any, do: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        options, cfg, saved, vn = ctx.state
        don = _to_numpy_bhsd(do)
        if options.backend == "sage-interpret":
            from sage.kernels.sagebwd import interpreted

            grads = interpreted.backward(saved, don)
        else:
            from sage.reference.sagebwd import emulate_backward

            grads = emulate_backward(saved, don, vn, cfg, "bfloat16")
        ctx.state = None
        return (_from_numpy_bhsd(grads.dq, do), _from_numpy_bhsd(grads.dk, do),
                _from_numpy_bhsd(grads.dv, do), None, None)


def _autocast_dtype(device_type: str) -> torch.dtype | None:
    if torch.is_autocast_enabled(device_type):
        return torch.get_autocast_dtype(device_type)
    return None


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, options: AttentionOptions,
           causal: bool = True) -> torch.Tensor:
    """``softmax(q k^T / sqrt(D)) v`` over (B, N, H, D) tensors with the chosen backend.

    Under autocast the inputs are cast to the autocast dtype first (all
    backends see the same 16-bit values); the result has that dtype.
    """
    dtype = _autocast_dtype(q.device.type)
    if dtype is not None:
        q, k, v = (x.to(dtype) for x in (q, k, v))
    if options.backend == "sdpa":
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                           v.transpose(1, 2), is_causal=causal)
        return o.transpose(1, 2)
    if options.backend == "sdpa-math":
        from torch.nn.attention import SDPBackend, sdpa_kernel

        # Pinning the backend (rather than calling the math function directly)
        # keeps PyTorch's own dispatch and its float32 upcast of 16-bit inputs.
        with sdpa_kernel(SDPBackend.MATH):
            o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                               v.transpose(1, 2), is_causal=causal)
        return o.transpose(1, 2)
    if options.backend == "sage":
        import sage

        return sage.attention(q, k, v, causal=causal, smooth_k=options.smooth_k,
                              smooth_q=options.smooth_q, layout="bshd", scales=options.scales)
    return _CpuSageBwd.apply(q, k, v, options, causal)


__all__ = ["BACKENDS", "AttentionOptions", "attend"]
