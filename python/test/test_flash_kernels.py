"""The sage FlashAttention forward (sage.kernels.flash) on the CPU: the kernel in
the interpreter (through ``flash_attention`` on CPU tensors, and once through
``sl.interpret`` on numpy arrays) against float64 attention, its IR (both loops
pipelined, the PV accumulator the matmul's own), its compilation for sm_90a
(ptxas: no spills at the default plans), and every error of the entry point.

Tolerance of O, from the kernel's two roundings to 16 bits (u = 2^-8 for
bf16, 2^-11 for f16, each rounding to nearest): P rounded before PV moves O
by at most ``u * (P @ |V|)`` (each term ``p_j v_j`` by ``u p_j |v_j|``), and
O's own rounding by ``u |O|``; the f32 arithmetic adds ~1e-6 of the former.
The LSE is f32 throughout (1e-5 absolute, logits of order 1).

Causal masks are aligned top-left, as SDPA's ``is_causal=True``: query i
sees keys j <= i whatever N and Nkv.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import sage.language as sl
from sage.kernels.flash.kernels import flash_forward
from sage.reference import to_bf16
from repo_files import load_bench

torch = pytest.importorskip("torch")

from sage.kernels.flash.ops import (FLASH, LOG2E, TILES, FlashTiles,  # noqa: E402
                                    default_tiles, flash_attention)

census = load_bench("sass_census")
PTXAS = os.environ.get("SAGE_PTXAS") or shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
UNIT_ROUNDOFF = {torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}
LSE_ATOL = 1e-5


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
              scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """float64 attention of (B, H, N, D) / (B, Hkv, Nkv, D) tensors: O, LSE (natural
    log) and P @ |V| (the scale of P's rounding error), causal aligned top-left."""
    group = q.shape[1] // k.shape[1]
    k, v = (x.double().repeat_interleave(group, 1) for x in (k, v))
    s = q.double() @ k.transpose(-1, -2) * scale
    if causal:
        sees = torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).tril()  # j <= i
        s = s.masked_fill(~sees, float("-inf"))
    p = torch.softmax(s, dim=-1)
    return p @ v, torch.logsumexp(s, dim=-1), p @ v.abs()


def assert_attention(o: torch.Tensor, lse: torch.Tensor | None, q, k, v, causal: bool,
                     scale: float, slack: float = 1e-6, lse_atol: float = LSE_ATOL) -> float:
    """O within the two 16-bit roundings' bound of float64 attention (plus ``slack``
    times P @ |V| for the f32 arithmetic); LSE within ``lse_atol``. Returns O's
    largest error relative to its bound."""
    ref, ref_lse, weight = reference(q, k, v, causal, scale)
    u = UNIT_ROUNDOFF[q.dtype]
    bound = u * (1 + u) * weight + u * ref.abs() + slack * weight + 1e-30
    error = (o.double() - ref).abs()
    worst = (error / bound).max().item()
    assert worst <= 1.0, f"max |error| / bound = {worst:.3f}, max |error| {error.max():.3e}"
    if lse is not None:
        assert lse.dtype == torch.float32 and lse.shape == ref_lse.shape
        torch.testing.assert_close(lse.double(), ref_lse, rtol=0, atol=lse_atol)
    return worst


def make(shape: tuple[int, ...], dtype=torch.bfloat16, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=gen).to(dtype)


def qkv(batch, heads, kv_heads, n, n_kv, d, dtype=torch.bfloat16, seed=0):
    return (make((batch, heads, n, d), dtype, seed), make((batch, kv_heads, n_kv, d), dtype,
                                                          seed + 1),
            make((batch, kv_heads, n_kv, d), dtype, seed + 2))


# The plans: the defaults (128 x 128, a producer warpgroup), the same with
# the consumer warpgroups taking turns (ping-pong), 128 x 64 (two masked
# diagonal blocks a causal query block; 2 and 3 stages), 128 x 128 without
# the producer, 64-row blocks on one warpgroup, and persistent programs
# (the interpreter runs 3, each walking several tiles; with and without
# the producer warpgroup).
DEFAULT = "default"
PLANS = {DEFAULT: None, "128x64": FlashTiles(128, 64, 2, 8),
         "ping-pong": FlashTiles(128, 128, 2, 8, warp_specialize=True, ping_pong=True),
         "persistent": FlashTiles(128, 128, 2, 8, warp_specialize=True, persistent=True),
         "persistent-64x64": FlashTiles(64, 64, 3, 4, persistent=True),
         "128x64-3": FlashTiles(128, 64, 3, 8),
         "128x128": FlashTiles(128, 128, 2, 8),
         "tma-store": FlashTiles(128, 128, 2, 8, warp_specialize=True, tma_store=True),
         "64x64": FlashTiles(64, 64, 2, 4)}

# (batch, heads, kv_heads, n, n_kv, d, causal, plan)
CASES = {
    "d64_tails": (1, 2, 2, 200, 200, 64, False, DEFAULT),
    "d64_causal_tails": (1, 2, 2, 200, 200, 64, True, DEFAULT),
    "d128_tails": (1, 2, 2, 130, 300, 128, False, "128x64-3"),
    "d128_causal_more_keys": (1, 2, 2, 100, 260, 128, True, DEFAULT),
    "d128_causal_more_queries": (1, 2, 2, 300, 130, 128, True, "128x64"),
    "d128_causal_whole_blocks": (1, 1, 1, 256, 256, 128, True, "128x128"),
    "d64_whole_blocks": (1, 1, 1, 256, 128, 64, False, "128x64"),
    "gqa_causal": (2, 4, 2, 150, 150, 64, True, "128x64-3"),
    "mqa": (1, 3, 1, 70, 90, 128, False, "64x64"),
    "mqa_causal_64_rows": (1, 3, 1, 150, 150, 64, True, "64x64"),
    "one_query": (1, 2, 1, 1, 77, 128, False, DEFAULT),
    "one_query_causal": (1, 2, 1, 1, 77, 64, True, DEFAULT),
    "one_key": (1, 2, 2, 40, 1, 64, True, "128x64-3"),
    "ping_pong_tails": (1, 2, 2, 200, 300, 128, False, "ping-pong"),
    "ping_pong_causal": (2, 2, 1, 300, 300, 64, True, "ping-pong"),
    "persistent_gqa_causal": (2, 4, 2, 300, 260, 128, True, "persistent"),
    "persistent_tails": (2, 3, 1, 130, 200, 64, False, "persistent-64x64"),
    "tma_store_tails": (1, 2, 1, 200, 150, 128, True, "tma-store"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_against_float64(name):
    batch, heads, kv_heads, n, n_kv, d, causal, plan = CASES[name]
    q, k, v = qkv(batch, heads, kv_heads, n, n_kv, d, seed=len(name))
    o, lse = flash_attention(q, k, v, causal=causal, tiles=PLANS[plan], return_lse=True)
    assert o.shape == q.shape and o.dtype == q.dtype and o.is_contiguous()
    assert_attention(o, lse, q, k, v, causal, d ** -0.5)


@pytest.mark.parametrize("causal", [False, True])
def test_float16_and_other_scales(causal):
    """f16 (its tighter bound), a scale of one's own, a negative one (masked
    after scaling: -inf stays -inf) and 0 (uniform weights)."""
    q, k, v = qkv(1, 2, 1, 90, 150, 64, dtype=torch.float16, seed=3)
    for scale in (0.3, -0.2, 0.0):
        o, lse = flash_attention(q, k, v, causal=causal, sm_scale=scale, return_lse=True)
        assert o.dtype == torch.float16
        assert_attention(o, lse, q, k, v, causal, scale)


def test_o_alone_and_sdpa_agreement():
    """Without ``return_lse`` only O comes back; causal is SDPA's is_causal=True
    (top-left) also when N != Nkv."""
    q, k, v = qkv(1, 2, 2, 100, 160, 64, dtype=torch.float16, seed=5)
    o = flash_attention(q, k, v, causal=True)
    assert isinstance(o, torch.Tensor)
    sdpa = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(),
                                                            is_causal=True)
    torch.testing.assert_close(o.float(), sdpa, rtol=2e-3, atol=2e-3)


def test_strided_inputs_are_read_in_place():
    """(B, N, H, D) memory seen as (B, H, N, D) (SDPA's usual transpose), and V
    with a non-unit last stride (copied), give the contiguous inputs' result."""
    q, k, v = qkv(2, 2, 1, 70, 90, 64, seed=7)
    want = flash_attention(q, k, v, causal=True)
    qs, ks = (x.transpose(1, 2).contiguous().transpose(1, 2) for x in (q, k))
    vs = v.transpose(2, 3).contiguous().transpose(2, 3)  # last stride Nkv
    assert not qs.is_contiguous() and vs.stride(-1) != 1
    for plan in (None, PLANS["128x64-3"]):
        got = flash_attention(qs, ks, vs, causal=True, tiles=plan)
        assert torch.equal(got, want if plan is None else flash_attention(q, k, v, True,
                                                                          tiles=plan))


def test_empty_queries():
    q, k, v = qkv(1, 2, 1, 0, 5, 64)
    o, lse = flash_attention(q, k, v, return_lse=True)
    assert o.shape == (1, 2, 0, 64) and lse.shape == (1, 2, 0)


def test_kernel_on_numpy_arrays():
    """The kernel itself in ``sl.interpret``, V as it is: lse untouched without
    STORE_LSE, O the same with it."""
    b, h, n, n_kv, d = 1, 2, 100, 140, 64
    rng = np.random.default_rng(11)
    q, k, v = (to_bf16(rng.standard_normal(s).astype(np.float32))
               for s in ((b, h, n, d), (b, h, n_kv, d), (b, h, n_kv, d)))
    scale = d ** -0.5
    results = {}
    for store_lse in (False, True):
        o = np.zeros((b, h, n, d), np.float32)
        lse = np.full((b, h, n), 7.0, np.float32)
        args = [sl.Buffer(q, sl.bfloat16), sl.Buffer(k, sl.bfloat16), sl.Buffer(v, sl.bfloat16),
                sl.Buffer(o, sl.bfloat16), lse, scale * LOG2E, n, n_kv, b, h,
                h * n * d, n * d, d, h * n_kv * d, n_kv * d, d, h * n_kv * d, n_kv * d, d,
                h * n * d, n * d, d]
        sl.interpret(flash_forward, (-(-n // 64), h, b), args,
                     dict(D=d, BLOCK_M=64, BLOCK_N=32, CAUSAL=True, STORE_LSE=store_lse))
        results[store_lse] = o, lse
    assert (results[False][1] == 7.0).all()
    np.testing.assert_array_equal(results[False][0], results[True][0])
    as_torch = (torch.from_numpy(x).bfloat16() for x in (q, k, v))  # exact: bf16 values
    assert_attention(torch.from_numpy(results[True][0]).bfloat16(),
                     torch.from_numpy(results[True][1]), *as_torch, True, scale)


def test_tile_plans():
    assert default_tiles(64) == TILES[64] == FlashTiles(128, 128, 2, 8, warp_specialize=True,
                                                        persistent=True)
    assert not default_tiles(128).persistent and default_tiles(128).tma_store
    assert default_tiles(128).maxnreg is None
    plan = FlashTiles(128, 64, 3, 8, maxnreg=200)
    assert plan.constexprs() == {"BLOCK_M": 128, "BLOCK_N": 64, "STAGES": 3,
                                 "WARP_SPECIALIZE": False, "PING_PONG": False,
                                 "PERSISTENT": False, "TMA_STORE": False}
    assert plan.options() == {"num_warps": 8, "maxnreg": 200}
    assert plan.grid(300, 4, 2) == (3, 4, 2)
    assert plan.as_dict() == {"block_m": 128, "block_n": 64, "stages": 3, "num_warps": 8,
                              "maxnreg": 200, "warp_specialize": False, "ping_pong": False,
                              "persistent": False, "tma_store": False}
    # Persistent: one program per SM (at most one per tile), on axis 0.
    persistent = FlashTiles(128, 64, 3, 8, persistent=True)
    assert persistent.constexprs()["PERSISTENT"]
    assert persistent.grid(300, 4, 2, 132) == (24, 1, 1)
    assert persistent.grid(8192, 32, 4, 132) == (132, 1, 1)
    with pytest.raises(ValueError, match="a persistent plan's grid needs a program count"):
        persistent.grid(300, 4, 2)
    with pytest.raises(ValueError, match="head_dim must be one of"):
        default_tiles(96)


@pytest.mark.parametrize("fields,message", [
    (dict(block_m=96), r"block_m must be a power of two >= 16, got 96"),
    (dict(block_n=8), r"block_n must be a power of two >= 16, got 8"),
    (dict(block_n=True), r"block_n must be a power of two"),
    (dict(stages=0), r"stages must be an int >= 1, got 0"),
    (dict(num_warps=2), r"num_warps must be 4 or 8, got 2"),
    (dict(maxnreg=300), r"maxnreg must be None or an int in \[24, 255\], got 300"),
    (dict(warp_specialize=1), r"warp_specialize must be a bool, got 1"),
    (dict(maxnreg=200), r"warp_specialize needs stages >= 2 and no maxnreg .* got stages=2, "
                        r"maxnreg=200"),
    (dict(stages=1), r"warp_specialize needs stages >= 2 .* got stages=1, maxnreg=None"),
    (dict(ping_pong=1), r"ping_pong must be a bool, got 1"),
    (dict(ping_pong=True, num_warps=4), r"ping_pong needs warp_specialize and num_warps=8 "
                                        r".* num_warps=4"),
    (dict(ping_pong=True, warp_specialize=False), r"ping_pong needs .* "
                                                  r"got warp_specialize=False"),
    (dict(persistent=1), r"persistent must be a bool, got 1"),
    (dict(tma_store=1), r"tma_store must be a bool, got 1"),
])
def test_tile_plan_errors(fields, message):
    with pytest.raises(ValueError, match=message):
        FlashTiles(**{**TILES[64].as_dict(), **fields})


def _bf16(*shape: int, device: str = "cpu") -> torch.Tensor:
    return torch.zeros(shape, dtype=torch.bfloat16, device=device)


def test_argument_errors():
    q, k = _bf16(1, 4, 8, 64), _bf16(1, 2, 8, 64)
    cases = [
        ((q.float().numpy(), k, k), {}, TypeError, "q must be a torch.Tensor, got ndarray"),
        ((q.float(), k, k), {}, TypeError, "q must be torch.float16 or torch.bfloat16, got "
                                           "torch.float32"),
        ((q, k, k.half()), {}, TypeError, "q, k and v must share a dtype"),
        ((q[0], k, k), {}, ValueError, r"q must be 4-D \(batch, heads, seq, head_dim\), got "
                                       r"shape \(4, 8, 64\)"),
        ((q, k, _bf16(1, 2, 9, 64)), {}, ValueError, "k and v must have one shape"),
        ((q, _bf16(2, 2, 8, 64), _bf16(2, 2, 8, 64)), {}, ValueError,
         r"k must be \(batch=1, kv_heads, seq_kv, head_dim=64\)"),
        ((q, _bf16(1, 2, 8, 128), _bf16(1, 2, 8, 128)), {}, ValueError,
         r"k must be \(batch=1, kv_heads, seq_kv, head_dim=64\)"),
        ((_bf16(1, 4, 8, 96), _bf16(1, 2, 8, 96), _bf16(1, 2, 8, 96)), {}, ValueError,
         r"head_dim must be one of \(64, 128\), got 96"),
        ((q, _bf16(1, 3, 8, 64), _bf16(1, 3, 8, 64)), {}, ValueError,
         r"heads \(4\) must be a multiple of kv_heads \(3\)"),
        ((q, _bf16(1, 0, 8, 64), _bf16(1, 0, 8, 64)), {}, ValueError,
         r"heads \(4\) must be a multiple of kv_heads \(0\)"),
        ((q, _bf16(1, 2, 0, 64), _bf16(1, 2, 0, 64)), {}, ValueError,
         r"at least one key \(seq_kv = 0\)"),
        ((q, k, k), dict(causal=1), TypeError, "causal must be a bool, got int"),
        ((q, k, k), dict(return_lse=None), TypeError, "return_lse must be a bool, got NoneType"),
        ((q, k, k), dict(tiles=(128, 128, 2, 8)), TypeError,
         "tiles must be a FlashTiles, got tuple"),
        ((q, k, k), dict(sm_scale="0.1"), TypeError, "sm_scale must be a real number or None, "
                                                     "got str"),
        ((q, k, k), dict(sm_scale=True), TypeError, "sm_scale must be a real number"),
        ((q, k, k), dict(sm_scale=float("nan")), ValueError, "sm_scale must be finite, got nan"),
        ((q, k, k), dict(sm_scale=math.inf), ValueError, "sm_scale must be finite, got inf"),
    ]
    for args, kwargs, error, message in cases:
        with pytest.raises(error, match=message):
            flash_attention(*args, **kwargs)


def test_device_errors():
    meta = _bf16(1, 2, 8, 64, device="meta")
    with pytest.raises(ValueError, match="q, k and v must be on one device, got meta, cpu"):
        flash_attention(meta, _bf16(1, 2, 8, 64), _bf16(1, 2, 8, 64))
    with pytest.raises(ValueError, match=r"must be CUDA tensors \(or CPU tensors, "
                                         r"interpreted\), got meta"):
        flash_attention(meta, meta, meta)


def test_grid_limits():
    many = _bf16(1, 65536, 1, 64)
    one = _bf16(1, 1, 1, 64)
    with pytest.raises(ValueError, match=r"batch \(1\) and heads \(65536\) must each be at "
                                         r"most 65535"):
        flash_attention(many, one, one)
    with pytest.raises(ValueError, match=r"batch \(65536\) and heads \(1\)"):
        flash_attention(_bf16(65536, 1, 1, 64), _bf16(65536, 1, 1, 64),
                        _bf16(65536, 1, 1, 64))


# --------------------------------------------------------------------------- IR and PTX

def _ir(d: int, causal: bool, plan: FlashTiles, dtype=sl.bfloat16, n: int = 1000) -> str:
    """The IR the JIT compiles for a (1, 2, n, d) problem (its specialisation:
    16-byte aligned tensors, strides divisible by 16), kv heads 1."""
    storage = np.float16 if dtype is sl.float16 else np.float32

    def buf(*shape: int) -> sl.Buffer:
        return sl.Buffer(np.zeros(shape, storage), dtype)
    return FLASH.ir(buf(1, 2, n, d), buf(1, 1, n, d), buf(1, 1, n, d), buf(1, 2, n, d),
                    np.zeros(1, np.float32), 0.1, n, n, 1, 2, 2 * n * d, n * d, d, n * d, n * d, d,
                    n * d, n * d, d, 2 * n * d, n * d, d, arch="sm_90a", D=d, **plan.constexprs(),
                    CAUSAL=causal, GROUP=2, **plan.options())


def test_ir_loops_are_pipelined_and_accumulate_in_place():
    plan = FlashTiles(128, 128, 2, 8)
    ir = _ir(128, True, plan)
    assert ir.count("sage.num_stages = 2 : i32") == 2  # the mask-free loop and the masked one
    f32_tile = "tensor<128x128xf32>"
    # Skewed by one key block: QKᵀ and the softmax of block 0 open, each loop
    # has one of each, and the last P·V closes.
    assert len(re.findall(rf"sage\.matmul [^\n]*contract\(1, 1\) : [^\n]*-> {f32_tile}",
                          ir)) == 3
    # PV: P (bf16) times V onto the O accumulator, the tensor cores' own.
    pv = re.findall(rf"sage\.matmul [^\n]* acc [^\n]*-> {f32_tile}", ir)
    assert len(pv) == 3, ir
    assert ir.count("sage.softmax_update") == 3
    divisions = re.findall(r"arith\.divf [^\n]*", ir)  # 1 / l per row, not per element
    assert divisions and all("tensor<128x1xf32>" in line for line in divisions), divisions


def test_compiles_without_spills(library, tmp_path):
    """Every default variant (D 64/128, causal or not), the same with
    ping-pong and persistent, and without the producer: accepted by ptxas
    for sm_90a, no spills."""
    disassembler = census.find_disassembler()
    for d in (64, 128):
        for causal in (False, True):
            for ws, persistent in ((True, False), (True, True), (False, False)):
                plan = FlashTiles(**{**TILES[d].as_dict(), "warp_specialize": ws,
                                     "ping_pong": ws, "persistent": persistent})
                ptx = library.compile(_ir(d, causal, plan), arch="sm_90a")
                # A producer warpgroup beside the 8 consumer warps by default.
                threads = 384 if plan.warp_specialize else 256
                assert f"// sage.kernel name=flash_forward threads={threads}" in ptx
                assert "cp.async.bulk.tensor" in ptx  # K and V by TMA
                # In each loop the softmax waits for QKᵀ(j+1) only, P(j)·V(j)
                # stays in flight under it (then a complete wait rescales O);
                # a persistent causal program runs two tiles (a pair) a trip.
                loops = 4 if persistent and causal else 2
                assert ptx.count("wgmma.wait_group.sync.aligned 1;") == loops, ptx
                if not Path(PTXAS).exists():
                    continue  # only this step needs the CUDA toolkit
                path = tmp_path / f"flash-{d}-{causal}-{ws}-{persistent}.ptx"
                path.write_text(ptx)
                log = subprocess.run([PTXAS, "-arch=sm_90a", "-v", str(path), "-o",
                                      str(path.with_suffix(".cubin"))],
                                     capture_output=True, text=True, timeout=300)
                assert log.returncode == 0, log.stderr
                spills = [int(x) for x in re.findall(r"(\d+) bytes spill (?:stores|loads)",
                                                     log.stderr)]
                # One program per tile never spills. The persistent plan
                # spills some of the values that live across its loop over
                # tiles (up to 64 bytes at D = 128 causal, two tiles a
                # trip), never inside the key loops.
                if persistent:
                    if disassembler is not None:
                        sass = census.disassemble(path.with_suffix(".cubin"), disassembler)
                        assert census.local_memory_in_loops(sass) == 0, (d, causal)
                else:
                    assert spills and max(spills) == 0, (d, causal, ws, log.stderr)
                assert "serialized" not in log.stderr, log.stderr
