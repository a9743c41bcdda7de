"""sage.attention on the GPU against SDPA with an explicit mask: causal with
fewer queries than keys (aligned bottom-right, as FlashAttention; decoding
has one query), with and without GQA (without it the backward stores dK, dV
in 16 bits directly), and compiled with torch.compile vs eager."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch sees no CUDA device", allow_module_level=True)

import sage  # noqa: E402


def _cosines(n, n_kv, heads, kv_heads, d, causal=True, seed=0):
    gen = torch.Generator(device="cuda").manual_seed(seed)

    def make(h, s):
        return torch.randn(2, s, h, d, generator=gen, device="cuda", dtype=torch.bfloat16)
    q, k, v, do = make(heads, n), make(kv_heads, n_kv), make(kv_heads, n_kv), make(heads, n)
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    o = sage.attention(*leaves, causal=causal, layout="bshd")
    o.backward(do)
    ref_leaves = [x.double().requires_grad_() for x in (q, k, v)]
    group = heads // kv_heads
    qt, kt, vt = (x.transpose(1, 2) for x in ref_leaves)
    kt, vt = (x.repeat_interleave(group, 1) for x in (kt, vt))
    mask = torch.ones(n, n_kv, dtype=torch.bool, device="cuda").tril(n_kv - n) \
        if causal else None
    ref = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask)
    ref = ref.transpose(1, 2)
    ref.backward(do.double())

    def cos(a, b):
        return torch.nn.functional.cosine_similarity(a.double().flatten(), b.flatten(),
                                                     dim=0).item()
    return [cos(o, ref)] + [cos(x.grad, r.grad) for x, r in zip(leaves, ref_leaves)]


@pytest.mark.parametrize("n, n_kv, heads, kv_heads, d", [
    (1, 300, 8, 2, 128),     # decoding: one query sees every key
    (100, 333, 4, 4, 64),    # chunked prefill, no GQA: 16-bit dK, dV stores
    (257, 1024, 8, 1, 128),  # MQA
    (512, 512, 4, 4, 128),   # square: bottom-right == top-left
])
def test_causal_bottom_right_matches_sdpa(n, n_kv, heads, kv_heads, d):
    cosines = _cosines(n, n_kv, heads, kv_heads, d)
    assert min(cosines) > 0.99, cosines


def test_compiled_equals_eager():
    gen = torch.Generator(device="cuda").manual_seed(1)
    q, k, v = (torch.randn(2, 200, 4, 64, generator=gen, device="cuda",
                           dtype=torch.bfloat16).requires_grad_() for _ in range(3))

    def f(q, k, v):
        return sage.attention(q, k, v, causal=True, layout="bshd")
    eager = f(q, k, v)
    compiled = torch.compile(f, fullgraph=True)(q, k, v)
    assert torch.equal(eager, compiled)
