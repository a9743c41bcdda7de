"""The sage FlashAttention forward (sage.kernels.flash.ops) on the GPU: every CPU
case of test_flash_kernels.py, a larger one (B2 H4 N1000 D128), trip counts of
the key loop below the pipeline's stages, V as it is and transposed, f16,
strided inputs, against float64 attention computed on the GPU (the CPU
tests' bound, with more room for the f32 arithmetic) and against torch SDPA.
Skipped without a GPU (conftest)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch sees no CUDA device", allow_module_level=True)

from sage.kernels.flash.ops import FlashTiles, default_tiles, flash_attention  # noqa: E402
from test_flash_kernels import CASES, PLANS, assert_attention, qkv  # noqa: E402

#: Room for the GPU's f32 arithmetic (tensor-core accumulation order, ex2/lg2
#: approximations), in units of P @ |V|: 1/200 of bf16's rounding, 1/25 of f16's.
SLACK = 2e-5
LSE_ATOL = 1e-4


def _cuda(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return tuple(x.cuda() for x in tensors)


def _sdpa(q, k, v, causal, scale=None):
    """torch SDPA (its default backend) with the kv heads repeated for GQA."""
    group = q.shape[1] // k.shape[1]
    k, v = (x.repeat_interleave(group, 1) for x in (k, v))
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                            scale=scale)


def _rel_l2(x: torch.Tensor, ref: torch.Tensor) -> float:
    x, ref = x.double(), ref.double()
    return ((x - ref).norm() / ref.norm()).item()


@pytest.mark.parametrize("name", sorted(CASES))
def test_cpu_cases(record, name):
    batch, heads, kv_heads, n, n_kv, d, causal, plan = CASES[name]
    q, k, v = _cuda(*qkv(batch, heads, kv_heads, n, n_kv, d, seed=len(name)))
    o, lse = flash_attention(q, k, v, causal=causal, tiles=PLANS[plan], return_lse=True)
    worst = assert_attention(o, lse, q, k, v, causal, d ** -0.5, SLACK, LSE_ATOL)
    record(f"flash_error_over_bound[{name}]", worst)


@pytest.mark.parametrize("ping_pong", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_larger(record, causal, ping_pong):
    """B2 H4 N1000 D128 at the default blocks, with and without the consumer
    warpgroups taking turns; also near SDPA (rel-L2 <= 1e-2, the benchmark's
    check: two bf16 results, each ~2e-3 from exact attention)."""
    q, k, v = _cuda(*qkv(2, 4, 4, 1000, 1000, 128, seed=11))
    plan = FlashTiles(**{**default_tiles(128).as_dict(), "ping_pong": ping_pong})
    o, lse = flash_attention(q, k, v, causal=causal, tiles=plan, return_lse=True)
    worst = assert_attention(o, lse, q, k, v, causal, 128 ** -0.5, SLACK, LSE_ATOL)
    error = _rel_l2(o, _sdpa(q, k, v, causal))
    assert error <= 1e-2, error
    record(f"flash_b2h4n1000d128[causal={causal},ping_pong={ping_pong}]",
           {"error_over_bound": worst, "rel_l2_vs_sdpa": error})


@pytest.mark.parametrize("causal", [False, True])
def test_tma_store_matches_register_stores(causal):
    """O written by the copy engine (tma_store) is the same bytes as O stored
    from registers, with a query tail (N = 1000) and in persistent plans."""
    q, k, v = _cuda(*qkv(2, 4, 2, 1000, 700, 128, seed=13))
    for persistent in (False, True):
        plan = FlashTiles(**{**default_tiles(128).as_dict(), "persistent": persistent})
        want = flash_attention(q, k, v, causal=causal, tiles=plan)
        got = flash_attention(q, k, v, causal=causal,
                              tiles=FlashTiles(**{**plan.as_dict(), "tma_store": True}))
        assert torch.equal(got, want)


@pytest.mark.parametrize("stages", [2, 3, 4])
@pytest.mark.parametrize("n_kv", [64, 100, 128, 200, 300, 520])
@pytest.mark.parametrize("causal", [False, True])
def test_trip_counts_below_the_stages(stages, n_kv, causal):
    """Key loops of 1 to 5 trips (some fewer than the STAGES - 1 copies issued
    ahead; a whole last block or a tail), both loops of the causal split."""
    q, k, v = _cuda(*qkv(1, 2, 1, 300, n_kv, 64, seed=n_kv + stages))
    for ws in (True, False):
        plan = FlashTiles(128, 128, stages, 8, warp_specialize=ws)
        o = flash_attention(q, k, v, causal=causal, tiles=plan)
        assert_attention(o, None, q, k, v, causal, 64 ** -0.5, SLACK)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [64, 128])
def test_float16_gqa_against_sdpa(record, d, causal):
    q, k, v = _cuda(*qkv(2, 8, 2, 333, 333, d, dtype=torch.float16, seed=d))
    o = flash_attention(q, k, v, causal=causal, sm_scale=0.1)
    assert o.dtype == torch.float16
    assert_attention(o, None, q, k, v, causal, 0.1, SLACK)
    error = _rel_l2(o, _sdpa(q, k, v, causal, scale=0.1))
    assert error <= 2e-3, error  # two f16 results, each ~3e-4 from exact attention
    record(f"flash_f16_rel_l2_vs_sdpa[d={d},causal={causal}]", error)


@pytest.mark.parametrize("causal", [False, True])
def test_persistent_matches_one_program_per_tile(causal):
    """One program per SM walking the tiles computes every tile as a program
    of its own does: the same O and LSE, bit for bit (B3 H6 N1000 D128, GQA:
    144 tiles, so on 132 SMs some programs take two)."""
    q, k, v = _cuda(*qkv(3, 6, 2, 1000, 900, 128, seed=21))
    plan = default_tiles(128)
    want = flash_attention(q, k, v, causal=causal, tiles=plan, return_lse=True)
    got = flash_attention(q, k, v, causal=causal, return_lse=True,
                          tiles=FlashTiles(**{**plan.as_dict(), "persistent": True}))
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_broadcast_batch_and_heads():
    """K and V broadcast over the batch and the kv heads (stride 0: the
    tensor maps' leading dimensions step by nothing; Vᵀ is a copy) are read
    in place, also by a persistent plan."""
    q, k, v = _cuda(*qkv(2, 4, 1, 300, 260, 64, seed=4))
    kb, vb = (x[:1].expand(2, 2, -1, -1) for x in (k, v))
    assert kb.stride(0) == kb.stride(1) == 0
    want = flash_attention(q, kb.contiguous(), vb.contiguous(), causal=True)
    for persistent in (False, True):
        plan = FlashTiles(**{**default_tiles(64).as_dict(), "persistent": persistent})
        assert torch.equal(flash_attention(q, kb, vb, causal=True, tiles=plan), want)


def test_strided_inputs():
    """(B, N, H, D) memory through transpose(1, 2), read in place: the same O."""
    q, k, v = _cuda(*qkv(2, 4, 2, 257, 190, 128, seed=5))
    want = flash_attention(q, k, v, causal=True)
    qs, ks, vs = (x.transpose(1, 2).contiguous().transpose(1, 2) for x in (q, k, v))
    assert not qs.is_contiguous()
    assert torch.equal(flash_attention(qs, ks, vs, causal=True), want)


def test_mixed_devices_are_rejected():
    q, k, v = qkv(1, 2, 1, 8, 8, 64)
    with pytest.raises(ValueError, match="q, k and v must be on one device, got cuda:0, cpu"):
        flash_attention(q.cuda(), k, v)
