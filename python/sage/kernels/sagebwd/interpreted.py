"""SageBwd end to end on the CPU: every kernel run by ``sl.interpret`` on numpy arrays.

The same launch sequence the GPU API will use (grids and constexprs from
:mod:`sage.kernels.sagebwd.launch`), for tests and for the accuracy report.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import sage.language as sl
from sage.kernels.sagebwd.launch import KERNELS, Shape, Tiles, cdiv, constexprs, grids
from sage.reference.sagebwd import SageBwdConfig, qk_scale

_DTYPES = {"float16": (sl.float16, np.float16), "bfloat16": (sl.bfloat16, np.float32),
           "float32": (sl.float32, np.float32)}


def _buffer(array: np.ndarray, dtype: str) -> sl.Buffer:
    kind, storage = _DTYPES[dtype]
    return sl.Buffer(np.ascontiguousarray(array, dtype=storage), kind)


@dataclass
class Saved:
    """What the forward keeps for the backward (all flat numpy arrays)."""

    shape: Shape
    tiles: Tiles
    cfg: SageBwdConfig
    dtype: str
    q_q: np.ndarray
    q_scale: np.ndarray
    q_mean: np.ndarray
    k_q: np.ndarray
    k_scale: np.ndarray
    k_mean: np.ndarray
    v_q: np.ndarray
    v_scale: np.ndarray
    v: sl.Buffer
    o: sl.Buffer
    lse: np.ndarray


def _run(name: str, shape: Shape, tiles: Tiles, cfg: SageBwdConfig, args: list,
         store_p_ds: bool = False) -> None:
    sl.interpret(KERNELS[name], grids(shape, tiles)[name], args,
                 constexprs(name, shape, tiles, causal=cfg.causal, smooth_k=cfg.smooth_k,
                            smooth_q=cfg.smooth_q, store_p_ds=store_p_ds))


def forward(q: np.ndarray, k: np.ndarray, v: np.ndarray, cfg: SageBwdConfig,
            dtype: str = "float16") -> tuple[np.ndarray, np.ndarray, Saved]:
    """Pre-pass and forward kernels: returns O (B, H, N, D) in ``cfg.out_dtype``
    (bf16 as float32 values), LSE (B, H, N) f32 and what the backward needs."""
    batch, heads, n, d = q.shape
    shape = Shape(batch, heads, k.shape[1], n, k.shape[2], d)
    tiles = Tiles(cfg.block_m, cfg.block_n)
    if cfg.causal and n != shape.n_kv:
        raise ValueError(f"causal needs seq == seq_kv, got {n} and {shape.n_kv}")
    bh, bhkv = batch * heads, batch * shape.kv_heads
    nq, nk = cdiv(n, tiles.block_m), cdiv(shape.n_kv, tiles.block_n)
    q_q, k_q, v_q = (np.zeros(x.shape, np.int8) for x in (q, k, v))
    q_scale = np.zeros((bh, nq), np.float32)
    q_mean = np.zeros((bh, nq, d), np.float32)
    k_scale, v_scale = np.zeros((bhkv, nk), np.float32), np.zeros((bhkv, nk), np.float32)
    k_mean = np.zeros((bhkv, d), np.float32)
    kb, vb = _buffer(k, dtype), _buffer(v, dtype)
    if cfg.smooth_k:
        _run("k_mean_kernel", shape, tiles, cfg, [kb, k_mean, shape.n_kv])
    _run("quantize_q_kernel", shape, tiles, cfg,
         [_buffer(q, dtype), q_q, q_scale, q_mean, float(qk_scale(cfg.sm_scale)), n])
    _run("quantize_kv_kernel", shape, tiles, cfg,
         [kb, vb, k_mean, k_q, k_scale, v_q, v_scale, shape.n_kv])
    o = _buffer(np.zeros(q.shape), cfg.out_dtype)
    lse = np.zeros((batch, heads, n), np.float32)
    _run("sagebwd_forward", shape, tiles, cfg,
         [q_q, q_scale, q_mean, k_q, k_scale, v_q, v_scale, o, lse, n, shape.n_kv, heads,
          shape.kv_heads])
    saved = Saved(shape, tiles, cfg, dtype, q_q, q_scale, q_mean, k_q, k_scale, k_mean, v_q,
                  v_scale, vb, o, lse)
    return o.array, lse, saved


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
    """Backward pre-pass and backward kernels for upstream gradient ``do``."""
    shape, tiles, cfg = saved.shape, saved.tiles, saved.cfg
    batch, heads, n, d = do.shape
    nq = cdiv(n, tiles.block_m)
    dob = _buffer(do, saved.dtype)
    delta = np.zeros((batch, heads, n), np.float32)
    do_q = np.zeros(do.shape, np.int8)
    do_scale = np.zeros((batch * heads, nq), np.float32)
    _run("sagebwd_backward_prepass", shape, tiles, cfg, [saved.o, dob, delta, do_q, do_scale, n])
    dq = np.zeros(do.shape, np.float32)
    dk = np.zeros((batch, shape.kv_heads, shape.n_kv, d), np.float32)
    dv = np.zeros_like(dk)
    pds_shape = (batch, heads, n, shape.n_kv) if store_p_ds else (1,)
    p, ds = np.zeros(pds_shape, np.float32), np.zeros(pds_shape, np.float32)
    _run("sagebwd_backward", shape, tiles, cfg,
         [saved.q_q, saved.q_scale, saved.q_mean, saved.k_q, saved.k_scale, saved.v, dob, do_q,
          do_scale, saved.lse, delta, dq, dk, dv, p, ds, float(np.float32(cfg.sm_scale)), n,
          shape.n_kv, heads, shape.kv_heads], store_p_ds=store_p_ds)
    return InterpretedGradients(dq, dk, dv, p if store_p_ds else None,
                                ds if store_p_ds else None, delta)
