"""CPU tests of bench/granularity_study.py: its quantizer is the dialect's, its vectorised
per-block emulation is the float64 loop emulation of sage.reference.sagebwd, and its finer
granularities are legal factorizations (scales factor out of tile-wise INT8 products)."""

from __future__ import annotations

import numpy as np
import pytest
from repo_files import load_bench

from sage.reference import int8_dot, quantize
from sage.reference.sagebwd import (LN2, SageBwdConfig, emulate_backward, emulate_forward,
                                    k_mean, qk_scale, relative_l2)

study = load_bench("granularity_study")
accuracy = study.accuracy


def _dequant(x32, granularity):
    q, scale = quantize(np.ascontiguousarray(x32, np.float32), granularity)
    return q.astype(np.float64) * scale.astype(np.float64)


@pytest.mark.parametrize("kind,granularity", [("block", "per_block"), ("row", "per_token"),
                                              ("col", "per_channel")])
def test_quant_dequant_is_the_dialect_quantizer_tile_by_tile(kind, granularity):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((96, 80)) * np.exp(rng.uniform(-30, 3, (96, 1)))).astype(np.float32)
    x[5] = 0.0                                # an all-zero row: scale 0
    x[7, :] = np.float32(1e-42)               # subnormal scale: 1/scale is inf in f32
    x[7, 3] = 0.0                             # ... and 0 * inf must give level 0
    tr, tc = 32, 16
    got = study.quant_dequant(x, study.granule(kind, tr, tc, x.shape[0]))
    want = np.zeros_like(got)
    for r in range(0, 96, tr):
        for c in range(0, 80, tc):
            want[r:r + tr, c:c + tc] = _dequant(x[r:r + tr, c:c + tc], granularity)
    assert np.array_equal(got, want)
    # per channel over the whole sequence = the dialect's per_channel on the whole matrix
    assert np.array_equal(study.quant_dequant(x, study.granule("col_seq", tr, tc, 96)),
                          _dequant(x, "per_channel"))


@pytest.mark.parametrize("n,sigma,dtype", [(192, 1.0, "bfloat16"), (160, 8.0, "float16")])
def test_vectorised_per_block_equals_the_reference_emulation(n, sigma, dtype):
    spec = accuracy.Inputs(n=n, d=128, heads=2, sigma=sigma, dtype=dtype)
    x = accuracy.make_inputs(spec, 0)
    cfg = SageBwdConfig(sm_scale=128 ** -0.5, block_m=64, block_n=32, out_dtype=dtype,
                        scales="block")
    fwd = emulate_forward(x["q"], x["k"], x["v"], cfg)
    grads = emulate_backward(fwd, x["do"], x["v"], cfg, dtype)
    got = study.emulate(x["q"], x["k"], x["v"], x["do"], study.Scheme("A", 64, 32), dtype,
                        keep=True)
    ref = {"o": fwd.o, "dq": grads.dq, "dk": grads.dk, "dv": grads.dv, "p": grads.p,
           "ds": grads.ds}
    for name, want in ref.items():
        assert relative_l2(got[name], want) <= study.VALIDATION_TOLERANCE, name


def test_fine_granularities_factor_out_of_tilewise_int8_products():
    """dQ, dK, dV of a scheme with per-row/column dS, per-column P, per-channel dO and
    per-channel Q/K copies, recomputed tile by tile with INT8 products and the scales
    applied outside them, equal the vectorised dequantize-then-matmul emulation."""
    bm, bn, n, d = 32, 16, 64, 128
    x = accuracy.make_inputs(accuracy.Inputs(n=n, d=d, heads=1, sigma=2.0), 3)
    scheme = study.Scheme("fine", bm, bn, q_s="row", k_s="row", v_pv="col", p_dv="col",
                          do_dv="col", ds_dq="row", ds_dk="col", k_dq="col", q_dk="col")
    got = study.emulate(x["q"], x["k"], x["v"], x["do"], scheme, "bfloat16", keep=True)
    sm_scale = d ** -0.5
    q32 = (x["q"][0, 0].astype(np.float32) * qk_scale(sm_scale)).astype(np.float32)
    k32 = (x["k"][0, 0] - k_mean(x["k"], bn)[0, 0]).astype(np.float32)
    p32, ds32 = got["p"][0, 0].astype(np.float32), got["ds"][0, 0].astype(np.float32)
    do32 = x["do"][0, 0].astype(np.float32)
    dq, dk, dv = np.zeros((n, d)), np.zeros((n, d)), np.zeros((n, d))
    f64 = np.float64
    for i in range(0, n, bm):
        qs = slice(i, i + bm)
        q_q, q_s = quantize(q32[qs], "per_channel")         # (1, D): constant along rows
        do_q, do_s = quantize(do32[qs], "per_channel")
        for j in range(0, n, bn):
            ks = slice(j, j + bn)
            k_q, k_s = quantize(k32[ks], "per_channel")
            p_q, p_s = quantize(p32[qs, ks], "per_channel")     # per key column
            dsr_q, dsr_s = quantize(ds32[qs, ks], "per_token")  # per query row, for dQ
            dsc_q, dsc_s = quantize(ds32[qs, ks], "per_channel")  # per key column, for dK
            dv[ks] += p_s.T.astype(f64) * int8_dot(p_q, do_q, 0, 0) * do_s.astype(f64)
            dq[qs] += sm_scale * dsr_s.astype(f64) * int8_dot(dsr_q, k_q, 1, 0) \
                * k_s.astype(f64)
            dk[ks] += LN2 * dsc_s.T.astype(f64) * int8_dot(dsc_q, q_q, 0, 0) * q_s.astype(f64)
    for name, want in (("dq", dq), ("dk", dk), ("dv", dv)):
        assert relative_l2(got[name][0, 0], want) < 1e-12, name


def test_folded_token_scales_factor_out():
    """Q, K per token for S; s_Q (s_K) multiplied into the f32 dS before its per-column
    (per-row) quantization for dK (dQ); the INT8 products reuse the per-token Q^, K^."""
    bm, bn, n, d = 32, 16, 64, 128
    x = accuracy.make_inputs(accuracy.Inputs(n=n, d=d, heads=1, sigma=4.0), 5)
    scheme = study.Scheme("fold", bm, bn, q_s="row", k_s="row", ds_dq="row", ds_dk="col",
                          q_dk="fold", k_dq="fold")
    assert scheme.copies() == {"Q": 1, "K": 1, "dS": 2}
    got = study.emulate(x["q"], x["k"], x["v"], x["do"], scheme, "bfloat16", keep=True)
    sm_scale = d ** -0.5
    q32 = (x["q"][0, 0].astype(np.float32) * qk_scale(sm_scale)).astype(np.float32)
    k32 = (x["k"][0, 0] - k_mean(x["k"], bn)[0, 0]).astype(np.float32)
    ds32 = got["ds"][0, 0].astype(np.float32)
    dq, dk = np.zeros((n, d)), np.zeros((n, d))
    for i in range(0, n, bm):
        qs = slice(i, i + bm)
        q_q, q_s = quantize(q32[qs], "per_token")            # the S copy, (bm, 1) scales
        for j in range(0, n, bn):
            ks = slice(j, j + bn)
            k_q, k_s = quantize(k32[ks], "per_token")        # (bn, 1)
            tile = ds32[qs, ks]
            r_q, r_s = quantize((tile * k_s.T).astype(np.float32), "per_token")
            c_q, c_s = quantize((tile * q_s).astype(np.float32), "per_channel")
            dq[qs] += sm_scale * r_s.astype(np.float64) * int8_dot(r_q, k_q, 1, 0)
            dk[ks] += LN2 * c_s.T.astype(np.float64) * int8_dot(c_q, q_q, 0, 0)
    assert relative_l2(got["dq"][0, 0], dq) < 1e-12
    assert relative_l2(got["dk"][0, 0], dk) < 1e-12


def test_scheme_legality_copies_and_cost():
    study.Scheme("ok", q_s="row", q_dk="col_seq", ds_dq="row", ds_dk="col").check()
    with pytest.raises(ValueError):
        study.Scheme("fold needs per-token Q", q_dk="fold").check()
    for bad in ({"q_s": "col"}, {"ds_dq": "col"}, {"ds_dk": "row"}, {"p_dv": "row"},
                {"k_dq": "row"}, {"do_dv": "row"}, {"v_pv": "row"}, {"p_dv": "col_seq"}):
        with pytest.raises(ValueError):
            study.Scheme("bad", **bad).check()
    two = study.Scheme("x", q_s="row", ds_dq="row", ds_dk="col")
    assert two.copies() == {"Q": 2, "K": 1, "dS": 2}
    assert "dS quantized twice" in study.cost(two) and "Q x2" in study.cost(two)
    folded = study.Scheme("f", q_s="row", q_dk="fold", ds_dq="row", ds_dk="col")
    assert "no 2nd copy" in study.cost(folded) and folded.copies()["Q"] == 1
    assert study.cost(study.Scheme("A")).startswith("none")
    for s in study.schemes():
        s.check()


def test_token_group_granules_of_q_and_k_in_s():
    """gG: one scale per G consecutive tokens of Q or K in S (constant along D),
    folded into dS like a per-token one; not a granule of operands contracted
    over tokens."""
    assert study.granule("g16", 64, 128, 4096) == (16, 128)
    assert study.granule("g32", 32, 128, 4096) == (32, 128)
    study.Scheme("k groups", k_s="g16", k_dq="fold", q_s="g32").check()
    for bad in ({"v_pv": "g16"}, {"k_dq": "g16"}, {"do_dv": "g32"}):
        with pytest.raises(ValueError):
            study.Scheme("bad", **bad).check()
    x = np.random.default_rng(3).standard_normal((64, 128)).astype(np.float32)
    levels, scale = study.quantize_levels(x, study.granule("g16", 64, 128, 64))
    # One scale per 16 rows: its absmax / 127.
    for g in range(4):
        block = slice(16 * g, 16 * g + 16)
        assert np.all(scale[block] == np.abs(x[block]).max() / np.float32(127))
    assert np.abs(levels).max() == 127
    # The backward's own K copy: a second INT8 copy of K, a granule of K in S.
    second = study.Scheme("b", k_s="g16", k_dq="fold", k_s_bwd="row")
    second.check()
    assert second.copies()["K"] == 2 and "k_s_bwd=row" in second.describe()
    with pytest.raises(ValueError):
        study.Scheme("bad", k_s_bwd="col").check()
