"""SageBwd end to end on the CPU: every kernel run by ``sl.interpret`` on numpy arrays.

The same launch sequence as the GPU driver (:mod:`sage.kernels.sagebwd.torch_ops`):
grids, buffers, constexprs and argument names from
:mod:`sage.kernels.sagebwd.launch`, for tests and for the accuracy report.
With ``layout="bshd"`` the 16-bit tensors (Q, K, V, dO and O) are held in
(B, N, H, D) memory and the kernels address them through their strides, as
``sage.attention(..., layout="bshd")`` does on the GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import sage.language as sl
from sage.kernels.sagebwd.launch import (BACKWARD_SEQUENCE, KERNELS, BufferSpec, Shape,
                                         ForwardTiles, Strides, Tiles, backward_buffers,
                                         constexprs, forward_buffers, FORWARD_SEQUENCE,
                                         grids, int8_v, runtime_args, scalar_args,
                                         stride_args)
from sage.reference.sagebwd import SageBwdConfig

_DTYPES = {"float16": (sl.float16, np.float16), "bfloat16": (sl.bfloat16, np.float32),
           "float32": (sl.float32, np.float32)}
#: Axis order of the memory of a (B, H, N, D) tensor in each layout.
_MEMORY_ORDER = {"bhsd": (0, 1, 2, 3), "bshd": (0, 2, 1, 3)}


@dataclass
class TokenTensor:
    """A 16-bit token tensor as the kernels see it: its memory (a contiguous
    buffer in the layout's axis order) and its (batch, head, row) strides."""

    buffer: sl.Buffer
    strides: Strides
    layout: str

    @property
    def array(self) -> np.ndarray:
        """The values as a (B, H, N, D) array (a view of the memory)."""
        order = _MEMORY_ORDER[self.layout]
        return self.buffer.array.transpose(np.argsort(order))


def token_tensor(array: np.ndarray, dtype: str, layout: str = "bhsd") -> TokenTensor:
    """Stores a (B, H, N, D) array in ``layout`` memory as ``dtype`` (bf16 values
    held in float32)."""
    kind, storage = _DTYPES[dtype]
    order = _MEMORY_ORDER[layout]
    memory = np.ascontiguousarray(np.asarray(array).transpose(order), dtype=storage)
    view = memory.transpose(np.argsort(order))
    strides = Strides(*(s // memory.itemsize for s in view.strides[:3]))
    return TokenTensor(sl.Buffer(memory, kind), strides, layout)


def _allocate(specs: dict[str, BufferSpec]) -> dict[str, np.ndarray]:
    """The buffers ``specs`` describe: zeroed where the kernels add into
    them, else poisoned (NaN, or 0x5A bytes), as the GPU path leaves them
    uninitialised: a kernel that reads what no kernel wrote fails the tests."""
    def buffer(spec: BufferSpec) -> np.ndarray:
        if spec.zeroed:
            return np.zeros(spec.shape, spec.dtype)
        poison = np.nan if np.dtype(spec.dtype).kind == "f" else 0x5A
        return np.full(spec.shape, poison, spec.dtype)
    return {name: buffer(spec) for name, spec in specs.items()}


def _run(sequence: tuple[str, ...], shape: Shape, tiles: Tiles, cfg: SageBwdConfig,
         values: dict, store_p_ds: bool = False) -> None:
    # A persistent plan sized for one multiprocessor: its few programs each
    # walk several tiles.
    all_grids = grids(shape, tiles, fine_scales=cfg.fine, smooth_q=cfg.smooth_q, sms=1)
    for name in sequence:
        ctas = tiles.options(name, fine_scales=cfg.fine, smooth_q=cfg.smooth_q,
                             shape=shape)["num_ctas"]
        sl.interpret(KERNELS[name], all_grids[name], runtime_args(name, values),
                     constexprs(name, shape, tiles, causal=cfg.causal, smooth_k=cfg.smooth_k,
                                smooth_q=cfg.smooth_q, store_p_ds=store_p_ds,
                                fine_scales=cfg.fine), num_ctas=ctas)


@dataclass
class Saved:
    """What the forward keeps for the backward (the kernels' flat numpy buffers
    and the strided 16-bit V and O)."""

    shape: Shape
    tiles: Tiles
    cfg: SageBwdConfig
    dtype: str
    layout: str
    q_q: np.ndarray
    q_scale: np.ndarray
    q_mean: np.ndarray
    k_q: np.ndarray
    k_scale: np.ndarray
    k_mean: np.ndarray
    v_q: np.ndarray
    v_scale: np.ndarray
    v: TokenTensor
    o: TokenTensor
    lse: np.ndarray


def forward(q: np.ndarray, k: np.ndarray, v: np.ndarray, cfg: SageBwdConfig,
            dtype: str = "float16", layout: str = "bhsd", persistent: bool = False
            ) -> tuple[np.ndarray, np.ndarray, Saved]:
    """Pre-pass and forward kernels on (B, H, N, D) / (B, Hkv, Nkv, D) arrays
    (``persistent``: the forward's persistent plan, a few programs walking
    the tiles).

    Returns O (B, H, N, D) in ``cfg.out_dtype`` (bf16 as float32 values), LSE
    (B, H, N) f32 (log2 units, smoothed logits) and what the backward needs.
    ``layout`` is the memory the 16-bit tensors are stored in for the kernels.
    """
    batch, heads, n, d = q.shape
    shape = Shape(batch, heads, k.shape[1], n, k.shape[2], d)
    tiles = Tiles(cfg.block_m, cfg.block_n,
                  forward=ForwardTiles(cfg.block_m, 4, block_n=cfg.forward_keys,
                                       persistent=persistent,
                                       biased_scores=cfg.biased_scores))
    if cfg.causal and n > shape.n_kv:
        raise ValueError(f"causal needs seq <= seq_kv, got {n} and {shape.n_kv}")
    tensors = {"q": token_tensor(q, dtype, layout), "k": token_tensor(k, dtype, layout),
               "v": token_tensor(v, dtype, layout),
               "o": token_tensor(np.zeros(q.shape), cfg.out_dtype, layout)}
    buffers = _allocate(forward_buffers(shape, tiles, cfg.smooth_q, cfg.fine,
                                        smooth_k=cfg.smooth_k))
    values = dict(buffers, **scalar_args(shape, cfg.sm_scale))
    for name, tensor in tensors.items():
        values[name] = tensor.buffer
        values.update(stride_args(name, tensor.strides))
    _run(FORWARD_SEQUENCE, shape, tiles, cfg, values)
    # The INT8 V as (B*Hkv, Nkv, D): a view of the kernels' transposed copy.
    v_q = int8_v(buffers["v_qt"], shape.n_kv)
    saved = Saved(shape, tiles, cfg, dtype, layout, v=tensors["v"], o=tensors["o"], v_q=v_q,
                  **{name: buffers[name] for name in ("q_q", "q_scale", "q_mean", "k_q",
                                                      "k_scale", "k_mean", "v_scale",
                                                      "lse")})
    return np.ascontiguousarray(tensors["o"].array), buffers["lse"], saved


@dataclass
class InterpretedGradients:
    """dQ (B,H,N,D), dK, dV (B,Hkv,Nkv,D) f32; P and dS (B,H,N,Nkv) f32 when
    requested; delta (B,H,N) f32."""

    dq: np.ndarray
    dk: np.ndarray
    dv: np.ndarray
    p: np.ndarray | None
    ds: np.ndarray | None
    delta: np.ndarray


def backward(saved: Saved, do: np.ndarray, store_p_ds: bool = False) -> InterpretedGradients:
    """Backward pre-pass and backward kernels for upstream gradient ``do`` (B, H, N, D)."""
    shape, tiles, cfg = saved.shape, saved.tiles, saved.cfg
    buffers = _allocate(backward_buffers(shape, tiles, store_p_ds, cfg.fine))
    do_tensor = token_tensor(do, saved.dtype, saved.layout)
    values = dict(buffers, **scalar_args(shape, cfg.sm_scale), do=do_tensor.buffer,
                  v=saved.v.buffer, o=saved.o.buffer,
                  **{name: getattr(saved, name) for name in ("q_q", "q_scale", "q_mean", "k_q",
                                                             "k_scale", "lse")})
    for name, tensor in (("do", do_tensor), ("v", saved.v), ("o", saved.o)):
        values.update(stride_args(name, tensor.strides))
    _run(BACKWARD_SEQUENCE, shape, tiles, cfg, values, store_p_ds=store_p_ds)
    return InterpretedGradients(buffers["dq"], buffers["dk"], buffers["dv"],
                                buffers["p_out"] if store_p_ds else None,
                                buffers["ds_out"] if store_p_ds else None, buffers["delta"])
