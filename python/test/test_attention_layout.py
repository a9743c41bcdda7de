"""The SageBwd kernels' stride arguments, in the CPU interpreter: Q, K, V, dO and O
held in (B, N, H, D) memory ("bshd", what sage.attention(layout="bshd") passes
without copies) give bit-identical results to contiguous (B, H, N, D) memory;
and the launch helpers the GPU driver (torch_ops) shares with the interpreter."""

from __future__ import annotations

import numpy as np
import pytest

from sage.kernels.sagebwd import interpreted
from sage.kernels.sagebwd.launch import (BACKWARD_SEQUENCE, FORWARD_SEQUENCE, KERNELS, UNUSED,
                                         ForwardTiles, Shape, Tiles, backward_buffers,
                                         constexprs, default_tiles, emulation_blocks,
                                         forward_buffers, grids, runtime_args, runtime_params,
                                         scalar_args, stride_args, strided_params)
from sage.kernels.sagebwd.prepass import KV_CLUSTER, kv_cluster
from sage.reference import to_bf16
from sage.reference.sagebwd import SageBwdConfig


def _inputs(batch, heads, kv_heads, n, n_kv, d, dtype, seed=0):
    rng = np.random.default_rng(seed)

    def make(shape, bias=0.0):
        x = rng.standard_normal(shape) + bias
        return x.astype(np.float16) if dtype == "float16" else to_bf16(x.astype(np.float32))
    return (make((batch, heads, n, d)), make((batch, kv_heads, n_kv, d), rng.standard_normal(d)),
            make((batch, kv_heads, n_kv, d)), make((batch, heads, n, d)))


@pytest.mark.parametrize("case", [
    # batch, heads, kv_heads, n, n_kv, d, dtype, causal, smooth_q, block_n
    (2, 4, 2, 70, 100, 64, "float16", False, False, 64),
    (1, 2, 1, 90, 90, 128, "bfloat16", True, True, 32),
], ids=["gqa_tails_f16", "mqa_causal_smooth_q_bf16_d128"])
def test_bshd_memory_matches_bhsd_bit_for_bit(case):
    batch, heads, kv_heads, n, n_kv, d, dtype, causal, smooth_q, block_n = case
    q, k, v, do = _inputs(batch, heads, kv_heads, n, n_kv, d, dtype)
    cfg = SageBwdConfig(sm_scale=d ** -0.5, causal=causal, smooth_q=smooth_q, block_n=block_n,
                        out_dtype=dtype)
    results = {}
    for layout in ("bhsd", "bshd"):
        o, lse, saved = interpreted.forward(q, k, v, cfg, dtype, layout=layout)
        grads = interpreted.backward(saved, do)
        results[layout] = dict(o=o, lse=lse, dq=grads.dq, dk=grads.dk, dv=grads.dv,
                               delta=grads.delta, k_q=saved.k_q, q_q=saved.q_q)
    assert saved.o.buffer.array.shape == (batch, n, heads, d)  # really (B, N, H, D) memory
    for name, want in results["bhsd"].items():
        np.testing.assert_array_equal(results["bshd"][name], want, err_msg=name)
    assert np.abs(results["bhsd"]["dq"]).max() > 0


def test_token_tensor_strides():
    x = np.zeros((2, 3, 5, 64), np.float16)
    assert interpreted.token_tensor(x, "float16").strides == (3 * 5 * 64, 5 * 64, 64)
    bshd = interpreted.token_tensor(x, "float16", "bshd")
    assert bshd.strides == (5 * 3 * 64, 64, 3 * 64)
    assert bshd.array.shape == x.shape


def test_every_kernel_argument_has_a_source():
    """The drivers' value mappings cover every runtime parameter (by name)."""
    shape, tiles = Shape(1, 2, 1, 10, 12, 64), Tiles(64, 64, 8)
    names = set(forward_buffers(shape, tiles, True, smooth_k=True))
    names |= set(backward_buffers(shape, tiles, True))
    names |= {"q", "k", "v", "o", "do"} | set(scalar_args(shape, 0.125))
    for tensor in ("q", "k", "v", "o", "do"):
        names |= set(stride_args(tensor, (1, 2, 3)))
    for name in FORWARD_SEQUENCE + BACKWARD_SEQUENCE:
        assert set(runtime_params(name)) <= names, (name, set(runtime_params(name)) - names)
    assert set(FORWARD_SEQUENCE + BACKWARD_SEQUENCE) == set(KERNELS)
    # K's and V's statistics are quantize_kv_kernel's own (its clusters);
    # the forward quantizes Q itself.
    assert FORWARD_SEQUENCE == ("quantize_kv_kernel", "sagebwd_forward")
    assert tiles.options("quantize_kv_kernel", fine_scales=True, smooth_q=False,
                         shape=shape)["num_ctas"] == KV_CLUSTER
    assert grids(shape, tiles, fine_scales=True, smooth_q=False)["quantize_kv_kernel"] \
        == (KV_CLUSTER, 1, 1)
    with pytest.raises(ValueError, match="need the problem's shape"):
        tiles.options("quantize_kv_kernel", fine_scales=True, smooth_q=False)


@pytest.mark.parametrize("d, n_kv, cluster", [(128, 4095, KV_CLUSTER), (128, 4096, 8),
                                              (128, 16384, 8), (64, 16384, KV_CLUSTER)])
def test_the_kv_cluster_follows_the_head_dim_and_the_keys(d, n_kv, cluster):
    """quantize_kv_kernel's cluster: 8 programs a (batch, kv head) at D=128
    from 4K keys, else KV_CLUSTER; the launch, the grid, the constexpr and
    the partials' scratch agree."""
    shape, tiles = Shape(2, 4, 2, 1000, n_kv, d), Tiles(64, 64, 8)
    assert kv_cluster(d, n_kv) == cluster
    assert tiles.options("quantize_kv_kernel", fine_scales=True, smooth_q=False,
                         shape=shape)["num_ctas"] == cluster
    assert grids(shape, tiles, fine_scales=True, smooth_q=False)["quantize_kv_kernel"] \
        == (cluster, 2, 2)
    assert constexprs("quantize_kv_kernel", shape, tiles)["CLUSTER"] == cluster
    assert forward_buffers(shape, tiles, False, True, smooth_k=True)["kv_partials"].shape == \
        (2 * 2 * 2 * cluster, d)


@pytest.mark.parametrize("smooth_k", [True, False])
def test_k_mean_is_filled_only_without_smoothing(smooth_k):
    """With K-smoothing the pre-pass writes every row of k_mean, so it needs
    no fill (no launch); without, it must read as zeros."""
    shape, tiles = Shape(2, 4, 2, 1000, 1000, 64), Tiles(64, 64, 4)
    specs = forward_buffers(shape, tiles, False, True, smooth_k=smooth_k)
    assert specs["k_mean"].zeroed is not smooth_k


def test_stand_ins_need_no_fill():
    """Pointers a variant does not read get a one-element stand-in that no
    launch fills: q_mean without smooth_q (the forward kernel writes it, as
    an op output) and quantize_kv_kernel's partials when it takes no
    statistics (no K-smoothing, block scales)."""
    shape, tiles = Shape(2, 4, 2, 1000, 1000, 64), Tiles(64, 64, 4)
    specs = forward_buffers(shape, tiles, False, False, smooth_k=False)
    assert specs["q_mean"] == specs["kv_partials"] == UNUSED
    assert not UNUSED.zeroed
    with_stats = forward_buffers(shape, tiles, True, False, smooth_k=True)
    assert with_stats["q_mean"].shape == (8, 16, 64)
    assert with_stats["kv_partials"].shape == (2 * 2 * 2 * kv_cluster(64, 1000), 64)


def test_strided_params_are_the_16_bit_token_tensors():
    assert strided_params("sagebwd_backward") == ("v", "do")
    assert strided_params("quantize_kv_kernel") == ("k", "v")
    assert strided_params("sagebwd_forward") == ("q", "o")


def test_runtime_args_names_what_is_missing():
    with pytest.raises(KeyError, match="quantize_kv_kernel: no value for k_mean"):
        runtime_args("quantize_kv_kernel", {"k": 0, "v": 0, "N_KV": 1, "H_KV": 1,
                                            "stride_kb": 0, "stride_kh": 0, "stride_kn": 0})


def test_default_forward_plans():
    """The measured defaults (launch.default_tiles), with fine scales: at
    D=128 128-key blocks and three programs an SM (168 registers); at D=64
    256-key blocks, or 64 when causal at up to 2048 keys, then four programs
    an SM (128 registers). The emulation's blocks follow."""
    def plan(d, **kwargs):
        return default_tiles(d, **kwargs).forward_tiles(kwargs.get("fine_scales", True),
                                                        kwargs.get("smooth_q", False))
    assert (plan(128).block_n, plan(128).maxnreg) == (128, 168)
    assert (plan(64).block_n, plan(64).maxnreg) == (256, None)
    assert (plan(64, causal=True).block_n, plan(64, causal=True).maxnreg) == (64, 128)
    assert plan(128, causal=True).block_n == 128
    assert plan(128, smooth_q=True).block_n == 64
    assert plan(128, fine_scales=False).block_n == 64
    assert emulation_blocks(default_tiles(64, causal=True), fine_scales=True,
                            smooth_q=False)["forward_block_n"] == 64
    # S from a biased accumulator where it pays: the 256-key plan (D = 64,
    # fine scales, no mask); the emulation follows.
    assert plan(64).biased_scores
    assert not any(p.biased_scores for p in (plan(128), plan(64, causal=True),
                                             plan(64, smooth_q=True),
                                             plan(64, fine_scales=False)))
    assert emulation_blocks(default_tiles(64), fine_scales=True,
                            smooth_q=False)["biased_scores"]
    # Causal at D = 64 the keys decide: 64-key blocks up to 2048 keys (and
    # where the keys are not given), the unmasked case's biased 256-key plan
    # above, so that every length of a tuning bucket takes one plan.
    assert plan(64, causal=True, n_kv=2048) == plan(64, causal=True)
    long = plan(64, causal=True, n_kv=2049)
    assert (long.block_n, long.maxnreg, long.biased_scores) == (256, None, True)
    assert long == plan(64, causal=True, n_kv=16384) == plan(64, n_kv=1024)
    assert plan(128, causal=True, n_kv=16384) == plan(128, causal=True)
    assert emulation_blocks(default_tiles(64, causal=True, n_kv=4096), fine_scales=True,
                            smooth_q=False)["forward_block_n"] == 256


def test_forward_plan_follows_the_quantization():
    """The forward's blocks may differ from the backward's only where no
    scale is per block: its rows with fine scales and no Q-smoothing, its
    keys with fine scales; the emulation's blocks follow the plan."""
    tiles = Tiles(64, 64, 4, forward=ForwardTiles(128, 8, block_n=128))
    plan = tiles.forward_tiles(True, False)
    assert (plan.block_m, plan.block_n) == (128, 128)
    assert emulation_blocks(tiles, fine_scales=True, smooth_q=False) == \
        {"block_m": 64, "block_n": 64, "forward_block_n": 128, "biased_scores": False}
    with pytest.raises(ValueError, match="block_m .128. must be block_m .64."):
        tiles.forward_tiles(True, True)
    keys = Tiles(64, 64, 4, forward=ForwardTiles(64, 4, block_n=128))
    with pytest.raises(ValueError, match="block_n .128. must be block_n .64. with block"):
        keys.forward_tiles(False, False)
    assert Tiles(64, 32).forward_tiles(False, False).block_n == 32
    with pytest.raises(ValueError, match="ping_pong needs warp_specialize"):
        ForwardTiles(64, 4, ping_pong=True)
    with pytest.raises(ValueError, match="warp_specialize needs stages >= 2 and no maxnreg"):
        ForwardTiles(128, 8, stages=1, warp_specialize=True)
    with pytest.raises(ValueError, match="warp_specialize needs stages >= 2 and no maxnreg"):
        ForwardTiles(128, 8, maxnreg=200, warp_specialize=True)
    with pytest.raises(ValueError, match="forward_block_n .128. must be block_n"):
        SageBwdConfig(sm_scale=0.1, forward_block_n=128, scales="block")
    assert SageBwdConfig(sm_scale=0.1, forward_block_n=128).forward_keys == 128
