"""The float64 SageBwd emulation (sage.reference.sagebwd) against exact attention.

At sigma = 1 SageBwd is close to full precision (spec 5, Table 1: cosine
~0.9998); these bounds are looser, as N and D here are small. Also checks
what the emulation's pieces promise: smoothing keeps softmax unchanged,
quantization is what makes the difference, and the gradient constants.
"""

from __future__ import annotations

import numpy as np
import pytest

from sage.reference.sagebwd import (SageBwdConfig, attention_reference, cosine_similarity,
                                    emulate_backward, emulate_forward, relative_l1,
                                    relative_l2)


def _inputs(heads=4, kv_heads=2, n=128, n_kv=160, d=64, sigma=1.0, key_bias=0.0, seed=0):
    rng = np.random.default_rng(seed)
    q = (sigma * rng.standard_normal((1, heads, n, d))).astype(np.float16)
    k = (sigma * rng.standard_normal((1, kv_heads, n_kv, d))
         + key_bias * rng.standard_normal(d)).astype(np.float16)
    v = rng.standard_normal((1, kv_heads, n_kv, d)).astype(np.float16)
    do = rng.standard_normal((1, heads, n, d)).astype(np.float16)
    return q, k, v, do


def _errors(q, k, v, do, cfg):
    fwd = emulate_forward(q, k, v, cfg)
    grads = emulate_backward(fwd, do, v, cfg, "float16")
    ref = attention_reference(q, k, v, do, cfg.sm_scale, cfg.causal)
    pairs = {"o": (fwd.o, ref.o), "dq": (grads.dq, ref.dq), "dk": (grads.dk, ref.dk),
             "dv": (grads.dv, ref.dv), "p": (grads.p, ref.p), "ds": (grads.ds, ref.ds)}
    return {name: (cosine_similarity(*pair), relative_l2(*pair), relative_l1(*pair))
            for name, pair in pairs.items()}


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("smooth_q", [False, True])
def test_close_to_full_precision_at_sigma_1(causal, smooth_q):
    n_kv = 128 if causal else 160
    q, k, v, do = _inputs(n_kv=n_kv, key_bias=2.0)
    cfg = SageBwdConfig(sm_scale=64 ** -0.5, causal=causal, smooth_q=smooth_q)
    for name, (cos, rel_l2, _) in _errors(q, k, v, do, cfg).items():
        assert cos > 0.999 and rel_l2 < 0.06, (name, cos, rel_l2)


def test_k_smoothing_matters_for_biased_keys():
    """With a large shared key bias, smoothing K keeps the INT8 error small."""
    q, k, v, do = _inputs(key_bias=20.0, seed=3)
    on = _errors(q, k, v, do, SageBwdConfig(sm_scale=0.125, smooth_k=True))
    off = _errors(q, k, v, do, SageBwdConfig(sm_scale=0.125, smooth_k=False))
    for name in ("o", "dq", "dk"):
        assert on[name][1] < off[name][1], (name, on[name], off[name])


def test_error_grows_with_sigma():
    """Table 1's trend: dQ/dK degrade as sigma_Q = sigma_K grows."""
    rel = []
    for sigma in (1.0, 3.0):
        q, k, v, do = _inputs(sigma=sigma, n=64, n_kv=64)
        rel.append(_errors(q, k, v, do, SageBwdConfig(sm_scale=0.125))["dq"][1])
    assert rel[0] < rel[1]


def test_reference_gradients_are_the_derivative_of_the_forward():
    """attention_reference's dQ/dK/dV against central differences of <O, dO>."""
    q, k, v, do = (x.astype(np.float64) for x in _inputs(heads=2, kv_heads=1, n=5, n_kv=7,
                                                         d=4))
    ref = attention_reference(q, k, v, do, 0.5, causal=False)
    rng = np.random.default_rng(1)
    for name, x, grad in (("q", q, ref.dq), ("k", k, ref.dk), ("v", v, ref.dv)):
        direction = rng.standard_normal(x.shape)
        eps = 1e-6

        def loss(delta):
            args = {"q": q, "k": k, "v": v}
            args[name] = x + delta * direction
            return (attention_reference(args["q"], args["k"], args["v"], do, 0.5).o * do).sum()

        numeric = (loss(eps) - loss(-eps)) / (2 * eps)
        assert numeric == pytest.approx((grad * direction).sum(), rel=1e-6), name


def test_causal_masks_future_keys():
    q, k, v, do = _inputs(heads=2, kv_heads=2, n=70, n_kv=70)
    cfg = SageBwdConfig(sm_scale=0.125, causal=True)
    grads = emulate_backward(emulate_forward(q, k, v, cfg), do, v, cfg, "float16")
    upper = np.triu(np.ones((70, 70), bool), 1)
    assert not grads.p[..., upper].any() and not grads.ds[..., upper].any()
    np.testing.assert_allclose(grads.p.sum(axis=3), 1.0, atol=0.02)


def test_causal_with_fewer_queries_is_aligned_bottom_right():
    """Query i of N sees keys 0 .. i + Nkv - N (FlashAttention's alignment):
    each row equals non-causal attention over exactly those keys."""
    rng = np.random.default_rng(5)
    n, n_kv, d = 5, 12, 64
    q, k, v, do = (rng.standard_normal(s) for s in ((1, 1, n, d), (1, 1, n_kv, d),
                                                     (1, 1, n_kv, d), (1, 1, n, d)))
    causal = attention_reference(q, k, v, do, 0.125, causal=True)
    for i in range(n):
        last = i + n_kv - n + 1
        row = attention_reference(q[:, :, i:i + 1], k[:, :, :last], v[:, :, :last],
                                  do[:, :, i:i + 1], 0.125)
        np.testing.assert_allclose(causal.o[:, :, i:i + 1], row.o, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match=r"causal attention needs seq <= seq_kv, got 12 and 5"):
        attention_reference(k, q, q, k, 0.125, causal=True)
