"""The ``sage::attention_fwd``/``attention_bwd`` custom ops on the CPU (their
implementation runs the kernels in the interpreter): ``torch.library.opcheck``,
``torch.compile(backend="aot_eager", fullgraph=True)`` of forward and
backward, results against SDPA with an explicit mask, and the errors of
``sage.attention`` around them. The GPU side is python/test/gpu/."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import sage  # noqa: E402
from sage.attention_checks import AttentionArgumentError  # noqa: E402
import sage.attention_ops  # noqa: E402,F401  (registers the ops)


@pytest.fixture(autouse=True)
def _interpret(monkeypatch):
    """CPU tensors reach the ops only with SAGE_INTERPRET=1."""
    monkeypatch.setenv("SAGE_INTERPRET", "1")


def _inputs(n=20, n_kv=30, heads=2, kv_heads=1, d=64, layout="bshd", dtype=torch.bfloat16,
            seed=0):
    gen = torch.Generator().manual_seed(seed)

    def make(h, s):
        shape = (1, s, h, d) if layout == "bshd" else (1, h, s, d)
        return torch.randn(shape, generator=gen, dtype=torch.float32).to(dtype) \
            .requires_grad_()
    return make(heads, n), make(kv_heads, n_kv), make(kv_heads, n_kv)


def _sdpa(q, k, v, causal, layout):
    """float64 SDPA with an explicit bottom-right causal mask, in (B, H, N, D)."""
    if layout == "bshd":
        q, k, v = (x.transpose(1, 2) for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = (x.double().repeat_interleave(group, 1) for x in (k, v))
    n, n_kv = q.shape[2], k.shape[2]
    mask = torch.ones(n, n_kv, dtype=torch.bool).tril(n_kv - n) if causal else None
    o = torch.nn.functional.scaled_dot_product_attention(q.double(), k, v, attn_mask=mask)
    return o.transpose(1, 2) if layout == "bshd" else o


def _rel(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
def test_opcheck_forward_and_backward(layout):
    q, k, v = _inputs(layout=layout)
    flags = (True, 0.125, True, False, layout, "fine")
    torch.library.opcheck(torch.ops.sage.attention_fwd.default, (q, k, v) + flags)
    out = torch.ops.sage.attention_fwd(q, k, v, *flags)
    do = torch.randn_like(out[0])
    saved = tuple(x.detach() for x in out[2:7])
    torch.library.opcheck(torch.ops.sage.attention_bwd.default,
                          (do,) + saved + (v.detach(), out[0].detach(), out[1].detach())
                          + flags)


@pytest.mark.parametrize("causal, heads, kv_heads", [(False, 4, 2), (True, 4, 2),
                                                     (True, 2, 2)])
def test_matches_sdpa_with_an_explicit_mask(causal, heads, kv_heads):
    """Fewer queries than keys: causal is aligned bottom-right. Without GQA the
    backward stores dK, dV in 16 bits directly (no f32 workspace)."""
    q, k, v = _inputs(n=20, n_kv=70, heads=heads, kv_heads=kv_heads, d=128)
    o = sage.attention(q, k, v, causal=causal, layout="bshd")
    do = torch.randn_like(o)
    o.backward(do)
    grads = [x.grad for x in (q, k, v)]
    ref_inputs = [x.detach().double().requires_grad_() for x in (q, k, v)]
    ref = _sdpa(*ref_inputs, causal, "bshd")
    ref.backward(do.double())
    assert o.shape == q.shape and o.dtype == q.dtype and o.is_contiguous()
    assert _rel(o, ref) < 0.02
    for got, want in zip(grads, ref_inputs):
        assert got.shape == want.shape and _rel(got, want.grad) < 0.03


def test_compiled_full_graph_equals_eager():
    """aot_eager, fullgraph: the ops stay opaque (no graph break), and with the
    same kernels the results are bitwise those of eager mode."""
    def f(q, k, v):
        return sage.attention(q, k, v, causal=True, layout="bshd")

    results = []
    for fn in (f, torch.compile(f, backend="aot_eager", fullgraph=True)):
        q, k, v = _inputs(seed=3)
        o = fn(q, k, v)
        o.float().square().sum().backward()
        results.append([o, q.grad, k.grad, v.grad])
    for eager, compiled in zip(*results):
        assert torch.equal(eager, compiled)


def test_compiles_with_dynamic_shapes():
    """Symbolic batch and sequence sizes: the fake implementations' shapes."""
    compiled = torch.compile(lambda q, k, v: sage.attention(q, k, v, layout="bshd"),
                             backend="aot_eager", fullgraph=True, dynamic=True)
    for n, n_kv in ((20, 30), (33, 65)):
        q, k, v = _inputs(n=n, n_kv=n_kv, seed=n)
        o = compiled(q, k, v)
        o.sum().backward()
        assert torch.equal(o, sage.attention(q, k, v, layout="bshd"))
        assert q.grad.shape == q.shape and k.grad.shape == k.shape


def test_explain_one_graph_no_break():
    q, k, v = _inputs()
    explanation = torch._dynamo.explain(lambda q, k, v: sage.attention(q, k, v))(
        *(x.transpose(1, 2) for x in (q, k, v)))
    assert explanation.graph_count == 1 and explanation.graph_break_count == 0


def test_no_grad_saves_nothing_and_returns_o():
    q, k, v = _inputs()
    with torch.no_grad():
        o = sage.attention(q, k, v, layout="bshd")
    assert o.grad_fn is None and o.shape == q.shape


def test_cpu_tensors_need_the_interpreter(monkeypatch):
    monkeypatch.setenv("SAGE_INTERPRET", "0")
    q, k, v = _inputs()
    with pytest.raises(AttentionArgumentError,
                       match=r"argument q: is on cpu; sage.attention runs on CUDA tensors "
                             r"only.*SAGE_INTERPRET=1 runs CPU tensors in the interpreter"):
        sage.attention(q, k, v, layout="bshd")


def test_causal_with_more_queries_than_keys_is_rejected():
    q, k, v = _inputs(n=40, n_kv=30)
    with pytest.raises(AttentionArgumentError,
                       match=r"argument causal: causal attention needs seq <= seq_kv"):
        sage.attention(q, k, v, causal=True, layout="bshd")
