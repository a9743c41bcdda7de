"""The SageBwd kernels (sage.kernels.sagebwd) in the CPU interpreter against the
float64 emulation of the algorithm (sage.reference.sagebwd): same quantization
decisions, so every tensor must agree to relative L2 <= 1e-3 (issue 5, 3).

Stage by stage: the forward against the emulated forward, and the backward
against the emulated backward *from the kernels' stored O and LSE*. Chaining
the emulations instead lets a 1-ulp difference in a stored bf16 O (f32 vs f64
rounding before the cast) move delta, hence a dS value at the start of a
causal row (one key, dS = dP - delta is a small difference), hence the
absmax scale of a whole dS tile: ~1e-3 on dQ/dK from 4 flipped bf16 values.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from sage.kernels.sagebwd import interpreted
from sage.kernels.sagebwd.common import key_groups
from sage.kernels.sagebwd.launch import ForwardTiles, Shape, Tiles, grids, token_scales
from sage.reference import to_bf16
from sage.reference.sagebwd import (K_SCALE_GROUPS, ForwardResult, SageBwdConfig,
                                    attention_reference, emulate_backward, emulate_forward,
                                    relative_l2)

TOLERANCE = 1e-3

# (batch, heads, kv_heads, n, n_kv, d, dtype, causal, smooth_k, smooth_q, block_m, block_n
#  [, forward_block_n: the forward's key block, fine scales only])
CASES = {
    "gqa_tails_f16": (1, 4, 2, 100, 129, 64, "float16", False, True, False, 64, 64),
    "mqa_causal_bf16_d128": (1, 2, 1, 129, 129, 128, "bfloat16", True, True, False, 64, 32),
    "batch2_no_smoothing": (2, 2, 2, 64, 64, 64, "float16", False, False, False, 64, 64),
    "smooth_q_tails": (1, 2, 2, 129, 70, 64, "float16", False, True, True, 64, 64),
    "causal_smooth_q_gqa_d128": (1, 4, 2, 100, 100, 128, "bfloat16", True, True, True, 64, 32),
    "d128_f16_tails": (2, 2, 2, 64, 97, 128, "float16", False, True, False, 64, 64),
    "causal_block_m_128": (1, 2, 2, 129, 129, 64, "float16", True, True, False, 128, 64),
    # Causal with fewer queries than keys: aligned bottom-right (chunked prefill, decode).
    "causal_bottom_right_gqa": (1, 4, 2, 70, 150, 64, "float16", True, True, True, 64, 64),
    "causal_decode_d128": (1, 2, 1, 1, 77, 128, "bfloat16", True, True, False, 64, 32),
    # The default plan's forward: 128-key blocks beside the backward's 64.
    "forward_keys_128_causal_tails": (1, 2, 1, 150, 200, 64, "float16", True, True, False, 64,
                                      64, 128),
    "forward_keys_128_d128": (1, 2, 2, 70, 300, 128, "bfloat16", False, True, False, 64, 64,
                              128),
    "forward_keys_256_d64_tails": (1, 2, 1, 70, 600, 64, "bfloat16", False, True, False, 64,
                                   64, 256),
}


def _inputs(case: tuple, seed: int = 0, key_bias: float = 2.0):
    batch, heads, kv_heads, n, n_kv, d, dtype = case[:7]
    rng = np.random.default_rng(seed)

    def make(shape, offset=0.0):
        x = rng.standard_normal(shape) + offset
        return x.astype(np.float16) if dtype == "float16" else to_bf16(x.astype(np.float32))

    # Keys get a shared channel bias: the case K-smoothing exists for.
    bias = key_bias * rng.standard_normal(d)
    return (make((batch, heads, n, d)), make((batch, kv_heads, n_kv, d), bias),
            make((batch, kv_heads, n_kv, d)), make((batch, heads, n, d)))


def _config(case: tuple, scales: str = "fine") -> SageBwdConfig:
    d, dtype, causal, smooth_k, smooth_q, block_m, block_n = case[5:12]
    forward = case[12] if len(case) > 12 and scales == "fine" else None
    return SageBwdConfig(sm_scale=d ** -0.5, causal=causal, smooth_k=smooth_k,
                         smooth_q=smooth_q, block_m=block_m, block_n=block_n,
                         forward_block_n=forward, out_dtype=dtype, scales=scales)


@pytest.mark.parametrize("scales", ["fine", "block"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_kernels_match_the_emulation(name, scales):
    case = CASES[name]
    q, k, v, do = _inputs(case)
    cfg, dtype = _config(case, scales), case[6]
    o, lse, saved = interpreted.forward(q, k, v, cfg, dtype)
    grads = interpreted.backward(saved, do, store_p_ds=True)
    fwd = emulate_forward(q, k, v, cfg)
    stored = ForwardResult(o.astype(np.float64), lse.astype(np.float64), fwd.saved)
    ref = emulate_backward(stored, do, v, cfg, dtype)
    errors = {
        "o": relative_l2(o, fwd.o), "lse": relative_l2(lse, fwd.lse),
        "delta": relative_l2(grads.delta, ref.delta), "p": relative_l2(grads.p, ref.p),
        "ds": relative_l2(grads.ds, ref.ds), "dq": relative_l2(grads.dq, ref.dq),
        "dk": relative_l2(grads.dk, ref.dk), "dv": relative_l2(grads.dv, ref.dv),
    }
    assert max(errors.values()) <= TOLERANCE, errors
    assert np.isfinite(o).all() and np.isfinite(grads.dq).all()
    if not cfg.smooth_q:
        # The one-element stand-in is an op output: the forward kernel writes
        # it (the interpreter leaves unwritten buffers NaN).
        np.testing.assert_array_equal(saved.q_mean, [0.0])


@pytest.mark.parametrize("scales", ["fine", "block"])
@pytest.mark.parametrize("big_keys", ["first", "last"])
def test_key_blocks_far_below_the_running_max(scales, big_keys):
    """Logits hundreds (log2) apart between key blocks: the forward's units
    floor UNIT_RANGE below the running max (first: later blocks' P^ round to
    0, O is not scaled out of range), or the running max jumps (last: O so
    far vanishes). O matches the emulation and exact attention, finite."""
    case = (1, 2, 1, 64, 300, 64, "bfloat16", False, True, False, 64, 64, 128)
    q, k, v, _ = _inputs(case, seed=3, key_bias=0.0)
    q = np.full_like(q, 8.0)
    big = slice(0, 64) if big_keys == "first" else slice(236, 300)
    k[:, :, big] = 8.0
    cfg = _config(case, scales)
    o, lse, _ = interpreted.forward(q, k, v, cfg, "bfloat16")
    fwd = emulate_forward(q, k, v, cfg)
    exact = attention_reference(q, k, v, np.zeros_like(q), cfg.sm_scale).o
    assert np.isfinite(o).all() and np.isfinite(lse).all()
    assert relative_l2(o, fwd.o) <= TOLERANCE and relative_l2(lse, fwd.lse) <= TOLERANCE
    assert relative_l2(o, exact) <= 0.02


@pytest.mark.parametrize("name", ["forward_keys_128_causal_tails", "gqa_tails_f16",
                                  "causal_block_m_128"])
def test_the_persistent_forward_gives_the_same_o_and_lse(name):
    """A persistent plan (two programs in the interpreter, each walking
    several tiles, longest first when causal) runs each tile as one program
    of the grid plan does: O and LSE are equal bit for bit."""
    case = CASES[name]
    q, k, v, _ = _inputs(case)
    cfg = _config(case)
    o, lse, _ = interpreted.forward(q, k, v, cfg, case[6])
    o_p, lse_p, saved = interpreted.forward(q, k, v, cfg, case[6], persistent=True)
    assert saved.tiles.forward.persistent
    np.testing.assert_array_equal(saved.q_mean, [0.0])
    np.testing.assert_array_equal(o_p, o)
    np.testing.assert_array_equal(lse_p, lse)


def test_a_persistent_grid_holds_what_the_multiprocessors_do():
    tiles = Tiles(64, 64, forward=ForwardTiles(64, 4, maxnreg=168, block_n=128,
                                               persistent=True))
    shape = Shape(4, 32, 32, 4096, 4096, 128)
    assert tiles.forward.programs_per_sm() == 3  # 65536 registers / (128 x 168)
    assert grids(shape, tiles, fine_scales=True, smooth_q=False,
                 sms=132)["sagebwd_forward"] == (396,)
    # Fewer tiles than slots: one program a tile.
    small = Shape(1, 2, 2, 100, 100, 128)
    assert grids(small, tiles, fine_scales=True, smooth_q=False,
                 sms=132)["sagebwd_forward"] == (4,)
    with pytest.raises(ValueError, match="needs the multiprocessors"):
        grids(shape, tiles, fine_scales=True, smooth_q=False)


def test_prepass_quantization_is_bit_exact():
    """The interpreter runs the dialect's quantizer: same int8 values and scales."""
    case = CASES["causal_smooth_q_gqa_d128"]
    q, k, v, _ = _inputs(case, seed=1)
    cfg = _config(case)
    # Fine: Q per token, K per key group (stored per token, each its group's).
    _, _, saved = interpreted.forward(q, k, v, cfg, case[6])
    ref = emulate_forward(q, k, v, cfg).saved
    for name in ("q_q", "q_scale", "q_mean", "k_q", "k_scale", "v_q", "v_scale", "k_mean"):
        got, want = getattr(saved, name), getattr(ref, name)
        if name in ("q_scale", "k_scale"):  # rows padded to 16 tokens (0 past the end)
            assert not got[:, want.shape[-1]:].any()
            got = token_scales(got, want.shape[-1])
        np.testing.assert_array_equal(got.reshape(want.shape), want, err_msg=name)


def test_key_group_masks_follow_the_blocks():
    """The forward's groups mask: K_SCALE_GROUPS' bits, and the bits that pick
    the pre-pass block where a forward block spans several."""
    assert key_groups(64, 64) == K_SCALE_GROUPS == 0b110
    assert key_groups(32, 64) == 0b110
    assert key_groups(128, 64) == 0b1000110
    assert key_groups(256, 64) == 0b11000110
    for block_n, kv_block in ((4, 64), (96, 64), (128, 48)):
        with pytest.raises(ValueError, match="power-of-two blocks of at least 8 keys"):
            key_groups(block_n, kv_block)


def test_tail_rows_do_not_move_the_scales():
    """Smoothed tail rows are 0, not -mean: a block's scale ignores rows past the end."""
    case = (1, 1, 1, 70, 70, 64, "float16", False, True, True, 64, 64)
    q, k, v, _ = _inputs(case, key_bias=8.0)
    _, _, saved = interpreted.forward(q, k, v, _config(case, "block"), "float16")
    tail_k = k[0, 0, 64:].astype(np.float32) - saved.k_mean[0]
    assert saved.k_scale[0, 1] == np.float32(np.abs(tail_k).max()) / np.float32(127)


def test_f32_output_and_mqa_four_heads():
    """O stored as f32 (the element type of the output pointer); 4 query heads on 1 kv head."""
    case = (1, 4, 1, 80, 120, 64, "float16", False, True, False, 64, 64)
    q, k, v, do = _inputs(case, seed=2)
    cfg = SageBwdConfig(sm_scale=0.125, out_dtype="float32")
    o, lse, saved = interpreted.forward(q, k, v, cfg, "float16")
    fwd = emulate_forward(q, k, v, cfg)
    assert o.dtype == np.float32 and relative_l2(o, fwd.o) <= TOLERANCE
    grads = interpreted.backward(saved, do)
    ref = emulate_backward(ForwardResult(o.astype(np.float64), lse.astype(np.float64),
                                         fwd.saved), do, v, cfg, "float16")
    for name in ("dq", "dk", "dv"):
        assert relative_l2(getattr(grads, name), getattr(ref, name)) <= TOLERANCE, name


def test_causal_with_more_queries_than_keys_is_an_error():
    q, k, v, _ = _inputs((1, 1, 1, 70, 40, 64, "float16"))
    with pytest.raises(ValueError, match=r"causal needs seq <= seq_kv, got 70 and 40"):
        interpreted.forward(q, k, v, SageBwdConfig(sm_scale=0.125, causal=True))


@pytest.mark.parametrize("name", ["forward_keys_256_d64_tails", "forward_keys_128_d128",
                                  "forward_keys_128_causal_tails", "gqa_tails_f16",
                                  "causal_decode_d128"])
def test_biased_scores_match_the_emulation(name):
    """The forward with S from a biased accumulator (sage.reference.sagebwd.
    SCORE_BIAS: truncated factors, snapped units) against the emulation that
    makes the same decisions, and against the forward without it."""
    case = CASES[name]
    q, k, v, _ = _inputs(case)
    cfg = replace(_config(case), biased_scores=True)
    o, lse, _ = interpreted.forward(q, k, v, cfg, case[6])
    fwd = emulate_forward(q, k, v, cfg)
    assert relative_l2(o, fwd.o) <= TOLERANCE
    assert relative_l2(lse, fwd.lse) <= TOLERANCE
    # The snapped units move P^'s rounding, not O beyond it.
    plain = emulate_forward(q, k, v, _config(case))
    assert relative_l2(fwd.o, plain.o) <= 5e-3


@pytest.mark.parametrize("biased", [False, True], ids=["plain", "biased"])
@pytest.mark.parametrize("name", ["forward_keys_256_d64_tails", "forward_keys_128_d128"])
def test_zero_query_rows_and_key_groups(name, biased):
    """Zero scales in the mask-free key loop, which multiplies T by the
    factors as they are (no raise to the smallest normal there): Q rows of
    zeros (their scale 0) and K equal at every token (smoothed to 0: every
    group scale 0). O and the LSE are finite, match the emulation (which
    raises each factor), and O is V's mean where S is 0."""
    case = CASES[name]
    q, k, v, _ = _inputs(case)
    q[:, :, :5] = 0
    k[...] = k[:, :, :1]
    cfg = replace(_config(case), biased_scores=biased)
    o, lse, _ = interpreted.forward(q, k, v, cfg, case[6])
    fwd = emulate_forward(q, k, v, cfg)
    assert np.isfinite(o).all() and np.isfinite(lse).all()
    assert relative_l2(o, fwd.o) <= TOLERANCE
    assert relative_l2(lse, fwd.lse) <= TOLERANCE
    group = 2 if case[1] != case[2] else 1
    mean_v = np.repeat(v.astype(np.float64).mean(axis=2, keepdims=True), group, axis=1)
    np.testing.assert_allclose(o[:, :, :5], np.broadcast_to(mean_v, o[:, :, :5].shape),
                               atol=0.02)
