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

import functools
import math
import operator
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, NamedTuple

import torch

from sage.attention_checks import AttentionProblem, TensorInfo, check_attention_args
from sage.jit import jit
from sage.jit.function import Launcher
from sage.jit.knobs import KnobError, knobs
from sage.jit.launcher import grid_dims
from sage.kernels.device import sm_count
from sage.kernels.sagebwd import tuning
from sage.kernels.sagebwd.launch import (BACKWARD_SEQUENCE, KERNELS, BufferSpec, ForwardTiles,
                                         Shape, Strides, Tiles, backward_buffers, constexprs,
                                         default_tiles, direct_kv, forward_buffers,
                                         FORWARD_SEQUENCE, grids, runtime_args,
                                         runtime_params, scalar_args, stride_args,
                                         strided_params)

#: One JIT object per kernel (their in-memory caches persist across calls).
JIT_KERNELS = {name: jit(fn, strided=strided_params(name)) for name, fn in KERNELS.items()}
_TORCH_DTYPES = {"int8": torch.int8, "float32": torch.float32, "float16": torch.float16,
                 "bfloat16": torch.bfloat16}
#: The dtype names of the checks (a dict lookup, not str(dtype): torch.compile
#: traces it without a break).
_DTYPE_NAMES = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32"}
LN2 = math.log(2.0)

# What a call derives from its shapes, dtypes, strides and flags alone (its
# checks, its plan, its kernels' launchers, grids and scalar arguments) is
# kept per key below, so that a call like an earlier one only allocates and
# launches. Keys hold every input of what they keep, and the flags' types (a
# key holding True must not be found by 1). A process sees few keys: a cache
# that reaches _CACHE_LIMIT entries is emptied.
_CACHE_LIMIT = 256


def _remember(cache: dict, key: Any, value: Any) -> Any:
    """``cache[key] = value`` (emptying a full cache first); returns ``value``."""
    if len(cache) >= _CACHE_LIMIT:
        cache.clear()
    cache[key] = value
    return value


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
    1-element placeholder, 0, written by the forward kernel); ``k_q`` (B*Hkv,
    Nkv, D) int8 encodes K - k_mean (``k_mean`` (B*Hkv, D) f32, zeros without
    smooth_k); ``*_scale`` one f32 per block; ``v_qt`` the kernels' INT8 V,
    transposed and in sigma16 token order
    (:func:`~sage.kernels.sagebwd.launch.int8_v` gives the (B*Hkv, Nkv, D)
    INT8 V); ``v`` the 16-bit V and ``o`` the 16-bit O as (B, H, N, D)
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
        return _tensor_fields(cls)

    def tensors(self, for_backward: bool = False) -> tuple[torch.Tensor | None, ...]:
        """Every tensor, in :meth:`tensor_names` order; with ``for_backward``
        (for ``ctx.save_for_backward``) None for those the backward does not read."""
        return tuple(None if for_backward and name in FORWARD_ONLY else getattr(self, name)
                     for name in self.tensor_names())

    @classmethod
    def from_tensors(cls, plan: Plan, tensors: tuple[torch.Tensor, ...]) -> Saved:
        """The inverse of :meth:`tensors` (from ``ctx.saved_tensors``)."""
        return cls(plan, **dict(zip(cls.tensor_names(), tensors)))


@functools.lru_cache(maxsize=None)
def _tensor_fields(cls: type) -> tuple[str, ...]:
    """:meth:`Saved.tensor_names` (fields() walks the class: once per class)."""
    return tuple(f.name for f in fields(cls) if f.name != "plan")


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
    return _allocate(_torch_specs(specs), device)


#: A buffer as torch allocates it: name, shape, torch dtype, zeroed.
_TorchSpec = tuple[str, tuple[int, ...], torch.dtype, bool]


def _torch_specs(specs: dict[str, BufferSpec]) -> tuple[_TorchSpec, ...]:
    return tuple((name, spec.shape, _TORCH_DTYPES[spec.dtype], spec.zeroed)
                 for name, spec in specs.items())


def _allocate(specs: tuple[_TorchSpec, ...], device: torch.device) -> dict[str, torch.Tensor]:
    # One torch call per buffer: the forward's buffers are outputs of the
    # sage:: op, which may not alias one another (so no views of one block).
    return {name: (torch.zeros if zeroed else torch.empty)(shape, dtype=dtype, device=device)
            for name, shape, dtype, zeroed in specs}


class _Launch(NamedTuple):
    """One kernel of a plan, ready to launch: its launcher (constexprs and
    launch options fixed), its grid and the getter of its runtime arguments
    from the mapping of every value of a launch sequence, by name."""

    name: str
    launcher: Launcher
    grid: tuple[int, int, int]
    arguments: Callable[[Mapping[str, Any]], tuple]


def _per_plan(cache: dict, plan: Plan, key: tuple, make: Callable[[], Any]) -> Any:
    """``make()``, kept in ``cache`` per plan object and ``key`` (plan_of
    hands out one plan per key; an entry holds its plan, so the plan's id is
    not reused while the entry lives)."""
    entry = cache.get((id(plan), *key))
    if entry is None or entry[0] is not plan:
        entry = _remember(cache, (id(plan), *key), (plan, make()))
    return entry[1]


_LAUNCHES: dict[tuple, tuple[Plan, tuple[_Launch, ...]]] = {}


def _make_launches(sequence: tuple[str, ...], plan: Plan, store_p_ds: bool,
                   direct: bool, device: torch.device) -> tuple[_Launch, ...]:
    """The :class:`_Launch` of each kernel of ``sequence`` under ``plan`` on
    ``device``."""
    flags = dict(fine_scales=plan.fine, smooth_q=plan.smooth_q)
    all_grids = grids(plan.shape, plan.tiles, **flags, sms=_persistent_sms(plan, device))
    launches = []
    for name in sequence:
        kwargs = dict(plan.tiles.options(name, **flags, shape=plan.shape),
                      **constexprs(name, plan.shape, plan.tiles, causal=plan.causal,
                                   smooth_k=plan.smooth_k, smooth_q=plan.smooth_q,
                                   fine_scales=plan.fine, store_p_ds=store_p_ds,
                                   direct_kv=direct))
        grid = grid_dims(all_grids[name], {})  # three sizes: launches take it as it is
        params = runtime_params(name)
        getter = operator.itemgetter(*params) if len(params) > 1 \
            else (lambda values, param=params[0]: (values[param],))
        launches.append(_Launch(name, JIT_KERNELS[name].launcher(**kwargs), grid, getter))
    return tuple(launches)


def _persistent_sms(plan: Plan, device: torch.device) -> int:
    """The multiprocessors a persistent forward plan's grid fills: those of
    ``device``, where the kernels run (one for CPU tensors, which the
    interpreter runs), else 0."""
    if not plan.tiles.forward_tiles(plan.fine, plan.smooth_q).persistent:
        return 0
    if device.type != "cuda":
        return 1
    return sm_count(torch.cuda.current_device() if device.index is None else device.index)


def _launches(sequence: tuple[str, ...], plan: Plan, store_p_ds: bool,
              direct: bool, device: torch.device) -> tuple[_Launch, ...]:
    """:func:`_make_launches`, kept per plan and device."""
    return _per_plan(_LAUNCHES, plan, (sequence, store_p_ds, direct, device),
                     lambda: _make_launches(sequence, plan, store_p_ds, direct, device))


def _launch(sequence: tuple[str, ...], plan: Plan, values: Mapping[str, Any],
            device: torch.device, store_p_ds: bool = False, direct_kv: bool = False) -> None:
    """Launches ``sequence``: on the GPU for CUDA tensors; CPU tensors run in
    the interpreter (the CPU implementation of the ``sage::`` ops, for tests).

    Raises:
        KeyError: naming the kernel and the parameter ``values`` lacks.
    """
    cuda = device.type == "cuda"
    for launch in _launches(sequence, plan, store_p_ds, direct_kv, device):
        try:
            args = launch.arguments(values)
        except KeyError:
            runtime_args(launch.name, values)  # raises, naming what is missing
            raise
        if cuda:
            launch.launcher.launch(launch.grid, args)
        else:
            launch.launcher.interpret(launch.grid, *args)


_SCALARS: dict[tuple, tuple[Plan, dict[str, Any]]] = {}


def _scalar_values(plan: Plan, tokens: dict[str, torch.Tensor]) -> dict[str, Any]:
    """A new mapping of the scalar arguments of ``plan``'s kernels, the
    stride arguments of the token tensors ``tokens`` and those tensors (the
    scalars kept per plan and strides).

    Raises:
        ValueError: for a token tensor whose last dimension is not unit-stride.
    """
    def make() -> dict[str, Any]:
        scalars = scalar_args(plan.shape, plan.sm_scale)
        for name, x in tokens.items():
            scalars.update(stride_args(name, strides_of(x)))
        return scalars
    key = (*tokens, *[x.stride() for x in tokens.values()])
    values = dict(_per_plan(_SCALARS, plan, key, make))
    values.update(tokens)
    return values


_SPECS: dict[tuple, tuple[Plan, tuple[_TorchSpec, ...]]] = {}


def _plan_buffers(plan: Plan, make: Callable[[], dict[str, BufferSpec]], *key: Any
                  ) -> tuple[_TorchSpec, ...]:
    """The buffers ``make()`` describes for ``plan`` (kept per plan and ``key``)."""
    return _per_plan(_SPECS, plan, key, lambda: _torch_specs(make()))


def tensor_info(x: torch.Tensor) -> TensorInfo:
    """What the checks of :mod:`sage.attention_checks` read of a tensor."""
    dtype = _DTYPE_NAMES.get(x.dtype) or str(x.dtype).rsplit(".", 1)[-1]
    return TensorInfo(tuple(x.shape), dtype, str(x.device))


_PROBLEMS: dict[tuple, AttentionProblem] = {}


def check_tensors(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: Any,
                  sm_scale: Any, smooth_k: Any, smooth_q: Any, layout: Any = "bhsd",
                  scales: Any = "fine", interpret: bool = False,
                  cuda_available: bool | None = True, memo: bool = True) -> AttentionProblem:
    """:func:`~sage.attention_checks.check_attention_args` of three tensors.

    With ``memo`` a call whose shapes, dtypes, devices and arguments (with
    their types) are those of an earlier one that passed returns that one's
    problem without checking again (a call that fails is never kept, so it
    fails each time with the same error). ``cuda_available`` (None:
    ``torch.cuda.is_available()``, asked only when the checks run) only
    words the error of a CPU tensor.

    Raises:
        sage.attention_checks.AttentionArgumentError: naming the argument.
    """
    key = None
    if memo:
        key = (q.shape, k.shape, v.shape, q.dtype, k.dtype, v.dtype, q.device, k.device,
               v.device, causal, sm_scale, smooth_k, smooth_q, layout, scales, interpret,
               type(causal), type(sm_scale), type(smooth_k), type(smooth_q), type(layout),
               type(scales))
        try:
            problem = _PROBLEMS.get(key)
        except TypeError:  # symbolic sizes, an unhashable argument: checked each time
            problem = key = None
        if problem is not None:
            return problem
    if cuda_available is None:
        cuda_available = torch.cuda.is_available()
    problem = check_attention_args(tensor_info(q), tensor_info(k), tensor_info(v),
                                   causal=causal, sm_scale=sm_scale, smooth_k=smooth_k,
                                   smooth_q=smooth_q, layout=layout,
                                   cuda_available=cuda_available, scales=scales,
                                   interpret=interpret)
    if key is not None:
        _remember(_PROBLEMS, key, problem)
    return problem


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
        tiles: block sizes, warps and the forward's plan (default
            :func:`launch.default_tiles` with the forward's plan chosen by
            :mod:`tuning` on a problem's first call: ``plan_of``).
        scales: quantization granularity, "fine" or "block" (docs/sagebwd.md).

    Returns:
        O (B, H, N, D) in q's dtype; LSE (B, H, N) f32 in log2 units of the
        K-smoothed logits (:func:`natural_lse` converts it); :class:`Saved`.

    Raises:
        sage.attention_checks.AttentionArgumentError: for unsupported inputs.
    """
    problem = check_tensors(q, k, v, causal=causal, sm_scale=sm_scale, smooth_k=smooth_k,
                            smooth_q=smooth_q, layout="bhsd", scales=scales)
    plan = plan_of(q, k, causal=causal, sm_scale=problem.sm_scale, smooth_k=smooth_k,
                   smooth_q=smooth_q, scales=scales, tiles=tiles, v=v)
    return run_forward(plan, q, k, v, out)


_PLANS: dict[tuple, Plan] = {}


def plan_of(q: torch.Tensor, k: torch.Tensor, *, causal: bool, sm_scale: float,
            smooth_k: bool, smooth_q: bool, scales: str, tiles: Tiles | None = None,
            v: torch.Tensor | None = None) -> Plan:
    """The :class:`Plan` of checked (B, H, N, D) / (B, Hkv, Nkv, D) views (sizes
    may be symbolic: the fake implementations of the ``sage::`` ops use it).
    One object per key (device, sizes, dtype, arguments): what is derived
    from a plan is kept by it.

    Without ``tiles`` the forward's plan is the tuner's (:func:`_tuned`), asked
    when a key's plan is first made: where ``v`` is given and timing is
    possible, a problem met for the first time is tuned on ``q, k, v`` (a
    one-time pause), and every later call reuses the plan at no cost. A plan
    that a later call could still tune (made under capture or tracing, with
    no winner known) is not kept.
    """
    # The device too: a plan's launches (a persistent grid's size) and its
    # tuned forward plan are those of its device.
    key = (q.device, q.shape, k.shape[1], k.shape[2], q.dtype, causal, sm_scale, smooth_k,
           smooth_q, scales, tiles, type(causal), type(sm_scale), type(smooth_k),
           type(smooth_q))
    try:
        plan = _PLANS.get(key)
    except TypeError:  # symbolic sizes: planned each time
        plan = key = None
    if plan is None:
        batch, heads, n, d = q.shape
        shape = Shape(batch, heads, k.shape[1], n, k.shape[2], d)
        plan = Plan(shape, tiles or default_tiles(d, smooth_q, scales == "fine", causal,
                                                  n_kv=shape.n_kv),
                    causal, sm_scale, smooth_k, smooth_q, q.dtype, scales)
        final = True
        if tiles is None:
            plan, final = _tuned(plan, q, k, v)
        if key is not None and final:
            _remember(_PLANS, key, plan)
    return plan


def _tuned(plan: Plan, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor | None
           ) -> tuple[Plan, bool]:
    """``plan`` (the default tiles) with the forward's plan from
    :data:`tuning.TUNER`, and whether it is final (``plan_of`` may keep it
    for its key). Nothing is tuned with SAGE_TUNE_ATTENTION=0, nor where
    :func:`tuning.situation` says timing is impossible (there a winner in
    memory or on disk is taken, else the default, not final). An error while
    choosing leaves the default plan, with a warning, for the rest of the
    process; nothing of it is stored as a winner.

    Raises:
        KnobError: for a bad value of a knob the tuner reads.
    """
    if not knobs.tune_attention.get():
        return plan, True
    where = tuning.situation(q, k, v)
    if where is tuning.Situation.NEVER:
        return plan, True
    problem = tuning.problem_of(plan.shape, causal=plan.causal, scales=plan.scales,
                                smooth_q=plan.smooth_q, smooth_k=plan.smooth_k,
                                dtype=_DTYPE_NAMES.get(plan.dtype, str(plan.dtype)))
    device = q.get_device()
    try:
        if where is tuning.Situation.REMEMBERED:
            chosen = tuning.TUNER.remembered(problem, device)
        else:
            measure = (lambda: _forward_timer(plan, q, k, v)) \
                if where is tuning.Situation.TIME else None
            chosen = tuning.TUNER.choose(problem, device, measure)
    except KnobError:
        raise
    except Exception as error:  # noqa: BLE001 - the call goes on with the default plan
        warnings.warn(f"sage: choosing the SageBwd forward's plan for {problem} failed "
                      f"({type(error).__name__}: {error}); the default plan runs it in this "
                      "process", RuntimeWarning, stacklevel=3)
        return plan, True
    if chosen is None:
        return plan, False
    if chosen == plan.tiles.forward_tiles(plan.fine, plan.smooth_q):
        return plan, True
    return _with_forward(plan, chosen), True


def _with_forward(plan: Plan, forward_plan: ForwardTiles) -> Plan:
    """``plan`` with another forward plan (the pre-pass and backward tiles kept)."""
    return replace(plan, tiles=replace(plan.tiles, forward=forward_plan))


def _forward_timer(plan: Plan, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
                   ) -> Callable[[ForwardTiles], float]:
    """Runs ``plan``'s pre-pass on ``q, k, v`` once, into buffers of its own,
    and returns the timer (ms, :func:`tuning.time_launch`) of the forward
    kernel's launch at a candidate plan on them: the pre-pass is the same
    for every candidate, whose blocks its scales do not depend on."""
    q, k, v = unit_last_stride(q), unit_last_stride(k), unit_last_stride(v)
    o = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    values, _ = _forward_values(plan, q, k, v, o, q.device)
    _launch(FORWARD_SEQUENCE[:-1], plan, values, q.device)
    device = q.get_device()

    def time_candidate(candidate: ForwardTiles) -> float:
        (launch,) = _make_launches(FORWARD_SEQUENCE[-1:], _with_forward(plan, candidate),
                                   False, False, q.device)
        args = launch.arguments(values)
        return tuning.time_launch(lambda: launch.launcher.launch(launch.grid, args), device)
    return time_candidate


def _forward_values(plan: Plan, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                    o: torch.Tensor, device: torch.device
                    ) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """The mapping of every value the forward's kernels read (the token
    tensors, their strides, the scalars, new buffers of ``plan``), and those
    buffers."""
    buffers = _allocate(_plan_buffers(plan, lambda: forward_buffers(
        plan.shape, plan.tiles, plan.smooth_q, plan.fine, smooth_k=plan.smooth_k),
        "forward"), device)
    values = _scalar_values(plan, {"q": q, "k": k, "v": v, "o": o})
    values.update(buffers)
    return values, buffers


def run_forward(plan: Plan, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                out: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, Saved]:
    """:func:`forward` for checked arguments and their plan (no checks)."""
    q, k, v = unit_last_stride(q), unit_last_stride(k), unit_last_stride(v)
    device = q.device
    o = torch.empty(q.shape, dtype=q.dtype, device=device) if out is None else out
    if o.shape != q.shape or o.dtype != q.dtype or o.device != device:
        raise ValueError(f"out must be a {tuple(q.shape)} {q.dtype} tensor on {device}, "
                         f"got {tuple(o.shape)} {o.dtype} on {o.device}")
    values, buffers = _forward_values(plan, q, k, v, o, device)
    _launch(FORWARD_SEQUENCE, plan, values, device)
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
    buffers = _allocate(_plan_buffers(plan, lambda: backward_buffers(
        plan.shape, plan.tiles, store_p_ds, plan.fine, grad_dtype), "backward", store_p_ds),
        do.device)
    values = _scalar_values(plan, {"do": do, "v": saved.v, "o": saved.o})
    values.update(buffers)
    for name in Saved.tensor_names():
        values.setdefault(name, getattr(saved, name))
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


__all__ = ["FORWARD_ONLY", "JIT_KERNELS", "Plan", "Saved", "backward", "check_tensors",
           "forward", "natural_lse", "allocate", "plan_of", "run_forward", "strides_of",
           "tensor_info", "unit_last_stride"]
