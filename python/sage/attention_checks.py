"""Argument checks of ``sage.attention``, without torch (tested on the CPU in CI).

``sage.attention`` describes each tensor argument by a :class:`TensorInfo`
(shape, dtype name, device) and calls :func:`check_attention_args`, which
either returns the problem (:class:`AttentionProblem`) or raises
:class:`AttentionArgumentError` with a message that names the offending
argument (``sage.attention: argument k: ...``).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from sage.kernels.sagebwd.launch import Shape
from sage.reference.sagebwd import SCALES

SUPPORTED_DTYPES = ("float16", "bfloat16")
HEAD_DIMS = (64, 128)
#: The memory layouts ``sage.attention`` accepts and the axis names of each.
LAYOUTS = {"bhsd": "(batch, heads, seq, head_dim)", "bshd": "(batch, seq, heads, head_dim)"}


class AttentionArgumentError(ValueError, TypeError):
    """An argument ``sage.attention`` does not support; the message names it.

    A ``ValueError`` and a ``TypeError``: wrong dtypes and wrong values are
    both reported through it, so either ``except`` clause catches it.
    """


@dataclass(frozen=True)
class TensorInfo:
    """What the checks need to know about a tensor argument.

    ``dtype`` is the torch dtype's name without ``torch.`` ("float16");
    ``device`` is the device's string ("cuda:0", "cpu").
    """

    shape: tuple[int, ...]
    dtype: str
    device: str


@dataclass(frozen=True)
class AttentionProblem:
    """A checked call: its :class:`~sage.kernels.sagebwd.launch.Shape` (q
    (batch, heads, n, d); k, v (batch, kv_heads, n_kv, d), whatever the
    layout), the dtype name and the resolved softmax scale."""

    shape: Shape
    dtype: str
    sm_scale: float
    causal: bool
    layout: str


def _fail(argument: str, message: str) -> AttentionArgumentError:
    return AttentionArgumentError(f"sage.attention: argument {argument}: {message}")


def check_layout(layout: object) -> str:
    """``layout`` if it is one of :data:`LAYOUTS`."""
    if not isinstance(layout, str) or layout not in LAYOUTS:
        raise _fail("layout", f"must be one of {sorted(LAYOUTS)} ({LAYOUTS}), got {layout!r}")
    return layout


def check_scales(scales: object) -> str:
    """``scales`` if it is one of :data:`SCALES`."""
    if not isinstance(scales, str) or scales not in SCALES:
        raise _fail("scales", f"must be one of {list(SCALES)}, got {scales!r}")
    return scales


def check_flag(name: str, value: object) -> bool:
    """``value`` if it is a bool (``causal``, ``smooth_k``, ``smooth_q``)."""
    if not isinstance(value, bool):
        raise _fail(name, f"must be a bool, got {type(value).__name__} {value!r}")
    return value


def resolve_sm_scale(sm_scale: object, head_dim: int) -> float:
    """The softmax scale: ``1 / sqrt(head_dim)`` for None, else a finite number > 0."""
    if sm_scale is None:
        return head_dim ** -0.5
    if isinstance(sm_scale, bool) or not isinstance(sm_scale, numbers.Real):
        raise _fail("sm_scale", f"must be a positive float or None, got "
                                f"{type(sm_scale).__name__} {sm_scale!r}")
    value = float(sm_scale)
    if not math.isfinite(value) or value <= 0:
        raise _fail("sm_scale", f"must be finite and > 0, got {value!r}")
    return value


def _check_tensor(name: str, info: TensorInfo, layout: str, cuda_available: bool,
                  interpret: bool) -> None:
    if len(info.shape) != 4:
        raise _fail(name, f"must be 4-D {LAYOUTS[layout]} for layout {layout!r}, got "
                          f"{len(info.shape)}-D shape {tuple(info.shape)}")
    if not info.device.startswith("cuda") and not (interpret and info.device == "cpu"):
        hint = "" if cuda_available else " (and no CUDA device is available to torch here)"
        raise _fail(name, f"is on {info.device}; sage.attention runs on CUDA tensors "
                          f"only{hint}; SAGE_INTERPRET=1 runs CPU tensors in the "
                          "interpreter (slow, for tests)")
    if info.dtype not in SUPPORTED_DTYPES:
        raise _fail(name, f"has dtype {info.dtype}; sage.attention takes float16 or "
                          "bfloat16 (float32 inputs are cast under torch.autocast)")


def _bhsd(shape: tuple[int, ...], layout: str) -> tuple[int, int, int, int]:
    """(batch, heads, seq, head_dim) of a 4-D shape in ``layout``."""
    b, x, y, d = shape
    return (b, x, y, d) if layout == "bhsd" else (b, y, x, d)


def check_attention_args(q: TensorInfo, k: TensorInfo, v: TensorInfo, *, causal: object,
                         sm_scale: object, smooth_k: object, smooth_q: object,
                         layout: object, cuda_available: bool = True,
                         scales: object = "fine", interpret: bool = False) -> AttentionProblem:
    """Checks a ``sage.attention`` call; returns its problem.

    ``interpret`` (``SAGE_INTERPRET=1``) accepts CPU tensors: they run in
    the interpreter.

    Raises:
        AttentionArgumentError: naming the argument: layout, a flag that is no
            bool, sm_scale (not a number, <= 0 or not finite), a tensor's rank,
            device (not CUDA, or not q's), dtype (not f16/bf16, or not q's),
            k and v of different shapes, batch or head_dim differing from
            q's, head_dim not 64 or 128, an empty dimension, heads not a
            multiple of kv_heads, causal with seq > seq_kv, scales not one of
            :data:`SCALES`.
    """
    layout = check_layout(layout)
    check_scales(scales)
    for name, value in (("causal", causal), ("smooth_k", smooth_k), ("smooth_q", smooth_q)):
        check_flag(name, value)
    tensors = {"q": q, "k": k, "v": v}
    for name, info in tensors.items():
        _check_tensor(name, info, layout, cuda_available, interpret)
    for name in ("k", "v"):
        if tensors[name].device != q.device:
            raise _fail(name, f"is on {tensors[name].device}, q on {q.device}")
        if tensors[name].dtype != q.dtype:
            raise _fail(name, f"has dtype {tensors[name].dtype}, q {q.dtype}; q, k and v "
                              "must have one dtype")
    if tuple(v.shape) != tuple(k.shape):
        raise _fail("v", f"must have k's shape {tuple(k.shape)}, got {tuple(v.shape)}")
    batch, heads, n, d = _bhsd(tuple(q.shape), layout)
    k_batch, kv_heads, n_kv, k_d = _bhsd(tuple(k.shape), layout)
    axes = LAYOUTS[layout]
    if k_batch != batch:
        raise _fail("k", f"batch {k_batch} differs from q's {batch} (shapes {axes}: q "
                         f"{tuple(q.shape)}, k {tuple(k.shape)})")
    if k_d != d:
        raise _fail("k", f"head_dim {k_d} differs from q's {d}")
    if d not in HEAD_DIMS:
        raise _fail("q", f"head_dim (last dimension) must be one of {HEAD_DIMS}, got {d}")
    for name, info in tensors.items():
        if 0 in info.shape:
            raise _fail(name, f"is empty (shape {tuple(info.shape)}, {axes})")
    if heads % kv_heads:
        raise _fail("k", f"kv_heads {kv_heads} must divide q's heads {heads} (GQA/MQA: "
                         f"each kv head serves heads / kv_heads query heads)")
    if causal and n > n_kv:
        raise _fail("causal", f"causal attention needs seq <= seq_kv (it is aligned "
                              f"bottom-right: query i sees keys j <= i + seq_kv - seq), "
                              f"got q seq {n} and k/v seq {n_kv}")
    return AttentionProblem(Shape(batch, heads, kv_heads, n, n_kv, d), q.dtype,
                            resolve_sm_scale(sm_scale, d), bool(causal), layout)


__all__ = ["AttentionArgumentError", "AttentionProblem", "HEAD_DIMS", "LAYOUTS",
           "SUPPORTED_DTYPES", "TensorInfo", "check_attention_args", "check_flag",
           "check_layout", "check_scales", "resolve_sm_scale", "SCALES"]
