"""CPU tests of bench/integer_o_study.py: the integer-O forward equals the float emulation
where their units coincide, its shifts round as documented, its guards keep the int32
accumulator in range, its slow-path counts are right, and the command line runs."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from repo_files import load_bench

from sage.reference import MAX_UINT8_CONTRACTION
from sage.reference.sagebwd import (LOG2E, SageBwdConfig, emulate_forward, prepass, qk_scale,
                                    relative_l2)

study = load_bench("integer_o_study")

KEYS = 128


def _integer_logit_inputs(row_x: np.ndarray, key_t: np.ndarray) -> tuple[np.ndarray, ...]:
    """q, k, v (float16) and a config whose logits are exactly S = x_i t_j / 128.

    c = sm_scale log2(e) is 1/8, so c Q's row (1016, 0, 8 x, 0...) is (127, 0, x, 0...):
    per-token scale 1, Q^ = (127, 0, x). K's rows (0, 127/128, t/128, 0...) have scale
    2^-7 and K^ = (0, 127, t). Without K-smoothing S = x t 2^-7, exactly.
    """
    d, n, n_kv = 128, row_x.size, key_t.size
    sm_scale = 0.125 / LOG2E
    assert qk_scale(sm_scale) == np.float32(0.125)
    q = np.zeros((1, 1, n, d))
    q[0, 0, :, 0] = 1016.0
    q[0, 0, :, 2] = 8.0 * row_x
    k = np.zeros((1, 1, n_kv, d))
    k[0, 0, :, 1] = 127 / 128
    k[0, 0, :, 2] = key_t / 128
    v = np.random.default_rng(0).standard_normal((1, 1, n_kv, d))
    cfg = SageBwdConfig(sm_scale=sm_scale, smooth_k=False, block_m=64, forward_block_n=KEYS,
                        out_dtype="float32", scales="fine")
    return q.astype(np.float16), k.astype(np.float16), v.astype(np.float16), cfg


def _block_maxima(q, k, v, cfg) -> np.ndarray:
    """S's row max per key block, from the emulation's pre-pass (checks the construction)."""
    saved = prepass(q, k, v, cfg)
    s = (saved.q_q[0, 0].astype(np.float64) * saved.q_scale[0, 0, :, None]) @ (
        saved.k_q[0, 0].astype(np.float64) * saved.k_scale[0, 0, :, None]).T
    return s.reshape(s.shape[0], -1, KEYS).max(axis=2)


def _keys(rng: np.random.Generator, block_tops: list[int]) -> np.ndarray:
    """Per key block one key at t = top and the others below it."""
    t = []
    for top in block_tops:
        block = rng.integers(-60, top, KEYS)
        block[rng.integers(KEYS)] = top
        t.append(block)
    return np.concatenate(t).astype(np.float64)


def test_integer_o_equals_the_float_emulation_where_the_units_coincide():
    """Every block's row max is the same integer: today's units (the block max) and the
    integer units (ceil(b), H = 0) coincide, no shift happens, and O is bit-identical."""
    rng = np.random.default_rng(1)
    row_x = rng.choice([32.0, 64.0, 96.0], 128)   # row maxima 5, 10, 15
    q, k, v, cfg = _integer_logit_inputs(row_x, _keys(rng, [20] * 4))
    maxima = _block_maxima(q, k, v, cfg)
    assert np.array_equal(maxima, np.repeat(row_x[:, None] * 20 / 128, 4, axis=1))
    today = emulate_forward(q, k, v, cfg).o
    chosen = [study.Variant(0, math.inf), study.Variant(0, 2.0), study.Variant(0, 0.0),
              study.Variant(0, math.inf, "floor", guard="l"), study.Variant(1, math.inf)]
    found = study.integer_o_forward(q, k, v, cfg, chosen)
    for variant, (o, counts) in zip(chosen[:4], found[:4]):
        assert np.array_equal(o, today), variant.name
        assert counts.row_changes == counts.rises == counts.reanchors == 0
        assert counts.fractions() == {"row": 0.0, "warp": 0.0, "warpgroup": 0.0}
    # The control: H = 1 halves P^'s resolution, so it must differ.
    assert not np.array_equal(found[4][0], today)


def test_slow_path_counts_warps_and_warpgroups():
    """Rows 0-15 (warp 0 of the first tile) see block maxima rising by 2 every block; the
    others see flat maxima: every later block is slow for that warp and its warpgroup only."""
    rng = np.random.default_rng(2)
    row_x = np.full(128, 64.0)
    row_x[16:] = 0.0                               # S = 0 everywhere: the unit never moves
    q, k, v, cfg = _integer_logit_inputs(row_x, _keys(rng, [20, 24, 28, 32]))
    maxima = _block_maxima(q, k, v, cfg)
    assert np.array_equal(maxima[0], [10.0, 12.0, 14.0, 16.0])
    (_, counts), = study.integer_o_forward(q, k, v, cfg, [study.Variant(0, math.inf)])
    # 3 later blocks x 128 rows, 2 tiles x 4 warps, 2 tiles
    assert (counts.row_blocks, counts.warp_blocks, counts.group_blocks) == (384, 24, 6)
    assert counts.row_changes == counts.rises == 3 * 16
    assert counts.fractions() == pytest.approx({"row": 48 / 384, "warp": 3 / 24,
                                                "warpgroup": 3 / 6})


def test_shift_right_rounds_as_documented():
    rng = np.random.default_rng(3)
    acc = rng.integers(-2 ** 31, 2 ** 31, (200, 8)).astype(np.int64)
    acc[0, :4] = [5, -5, 6, -6]
    for k in range(0, 24):
        got_round = study.shift_right(acc, np.full((200, 1), k), "round")
        got_floor = study.shift_right(acc, np.full((200, 1), k), "floor")
        # exact in float64: |acc| < 2^32
        assert np.array_equal(got_round, np.floor(acc / 2.0 ** k + 0.5).astype(np.int64))
        assert np.array_equal(got_floor, np.floor(acc / 2.0 ** k).astype(np.int64))
    one = study.shift_right(acc[:1, :4], np.ones((1, 1), np.int64), "round")
    assert one.tolist() == [[3, -2, 3, -3]]        # ties toward +inf
    assert study.shift_right(acc[:1, :4], np.ones((1, 1)), "floor").tolist() == [[2, -3, 3, -3]]
    huge = study.shift_right(acc, np.full((200, 1), 100), "round")
    assert not huge.any()                          # clamped to 62: everything rounds to 0
    assert set(study.shift_right(acc, np.full((200, 1), 100), "floor").ravel()) <= {0, -1}
    with pytest.raises(ValueError):
        study.shift_right(acc, np.ones((200, 1)), "up")


def _state(unit: float, acc: list[int], l: float) -> object:
    state = study.RowState.empty(1, len(acc))
    state.unit[:] = unit
    state.acc[:] = acc
    state.l[:] = l
    return state


@pytest.mark.parametrize("shift,want", [("round", [1, -1, 2]), ("floor", [1, -2, 1])])
def test_a_rise_shifts_the_accumulator_and_rescales_l(shift, want):
    state = _state(3.0, [5, -5, 7], 10.0)
    changed = study.update_units(state, np.array([[4.2]]), study.Variant(0, math.inf, shift),
                                 100.0)
    assert changed.tolist() == [True]
    assert state.unit[0, 0] == 5.0 and state.l[0, 0] == 2.5
    assert state.acc[0].tolist() == want
    assert state.slack[0, 0] == study.SHIFT_SLACK[shift]
    # with headroom the unit goes one higher
    state = _state(3.0, [5, -5, 7], 10.0)
    study.update_units(state, np.array([[4.2]]), study.Variant(1, math.inf, shift), 100.0)
    assert state.unit[0, 0] == 6.0 and state.l[0, 0] == 1.25
    # a block at or below the unit changes nothing
    state = _state(3.0, [5, -5, 7], 10.0)
    assert not study.update_units(state, np.array([[3.0]]), study.Variant(0, 0.0, shift),
                                  100.0).any()
    assert state.acc[0].tolist() == [5, -5, 7]


def test_a_reanchor_is_an_exact_left_shift_within_the_guard():
    variant = study.Variant(0, 2.0, limit=256)
    state = _state(10.0, [3, -2], 4.0)
    assert study.update_units(state, np.array([[4.5]]), variant, 100.0).tolist() == [True]
    assert state.unit[0, 0] == 5.0 and state.acc[0].tolist() == [96, -64]
    assert state.l[0, 0] == 128.0 and state.counts.reanchors == 1
    # 3 * 32 + 100 >= 192: refused, the unit stays
    state = _state(10.0, [3, -2], 4.0)
    assert not study.update_units(state, np.array([[4.5]]), study.Variant(0, 2.0, limit=192),
                                  100.0).any()
    assert state.unit[0, 0] == 10.0 and state.acc[0].tolist() == [3, -2]
    assert state.counts.refused == 1
    # within R of the unit: no re-anchor
    state = _state(10.0, [3, -2], 4.0)
    assert not study.update_units(state, np.array([[8.5]]), variant, 100.0).any()
    # the l guard bounds |acc| by 254 l instead of 3: 254 * 0.05 * 32 + 100 >= 256, refused
    state = _state(10.0, [3, -2], 0.05)
    assert not study.update_units(state, np.array([[4.5]]),
                                  study.Variant(0, 2.0, guard="l", limit=256), 100.0).any()
    assert state.unit[0, 0] == 10.0 and state.counts.refused == 1
    state = _state(10.0, [3, -2], 0.01)            # 254 * 0.01 * 32 + 100 < 256
    study.update_units(state, np.array([[4.5]]), study.Variant(0, 2.0, guard="l", limit=256),
                       100.0)
    assert state.unit[0, 0] == 5.0 and state.acc[0].tolist() == [96, -64]


def test_the_overflow_guard_forces_the_smallest_sufficient_rise():
    state = _state(0.0, [1100, -7], 5.0)
    changed = study.update_units(state, np.array([[-3.0]]), study.Variant(0, limit=2048),
                                 1000.0)
    # 1100 + 1000 >= 2048; 1100 / 2 + 0.5 + 1000 < 2048: one bit
    assert changed.tolist() == [True] and state.unit[0, 0] == 1.0
    assert state.acc[0].tolist() == [550, -3] and state.counts.forced == 1
    state = _state(0.0, [1100, -7], 5.0)
    assert not study.update_units(state, np.array([[-3.0]]),
                                  study.Variant(0, overflow_guard=False, limit=2048),
                                  1000.0).any()


def test_the_int32_worst_case_bound():
    h0, h1 = study.overflow_bound(0), study.overflow_bound(1)
    assert (h0["p_max"], h1["p_max"]) == (255, 128)
    assert h0["max_keys"] == (2 ** 31 - 1) // (255 * 127) == 66311
    assert MAX_UINT8_CONTRACTION <= h0["max_keys"] < 2 * MAX_UINT8_CONTRACTION
    assert h1["max_keys"] == (2 ** 31 - 1) // (128 * 127)


def test_the_guards_keep_a_flat_softmax_in_a_small_accumulator():
    """A uniform softmax over a constant V channel (the int32 worst case: 255 * 127 per key)
    with the limit scaled down to 2^26 (2^31 needs 66K keys): without the guard |acc|
    passes it; with either guard it stays below, by forced rises, and O stays accurate."""
    case = study.Case("flat", 64, 128, 0.0, n_kv=4096)
    x = study.make_inputs(case, 0)
    cfg = case.config()
    limit = 2 ** 26
    chosen = [study.Variant(0, overflow_guard=False, limit=limit),
              study.Variant(0, limit=limit), study.Variant(0, guard="l", limit=limit),
              study.Variant(0, 2.0, guard="l", limit=limit)]
    found = study.integer_o_forward(x["q"], x["k"], x["v"], cfg, chosen)
    assert found[0][1].max_acc == 4096 * 255 * 127 > limit and found[0][1].forced == 0
    exact = np.repeat(x["v"][0, 0].astype(np.float64).mean(axis=0)[None], 64, axis=0)
    assert relative_l2(emulate_forward(x["q"], x["k"], x["v"], cfg).o[0, 0], exact) < 0.003
    for variant, (o, counts) in zip(chosen[1:], found[1:]):
        assert counts.max_acc < limit and counts.forced > 0, variant.name
        assert counts.bound_violations == 0
        assert relative_l2(o[0, 0], exact) < 0.01, variant.name


def test_the_l_bound_holds_on_gaussian_inputs_with_reanchoring():
    case = study.Case("sweep", 1024, 64, 8.0)
    x = study.make_inputs(case, 0)
    (_, counts), = study.integer_o_forward(x["q"], x["k"], x["v"], case.config(),
                                           [study.Variant(0, 0.0, guard="l")])
    assert counts.reanchors > 0 and counts.bound_violations == 0


def test_adversarial_inputs_are_what_they_say():
    sink = study.make_inputs(study.Case("sink", 128, 128, 1.0, sink=10.0), 0)
    c = float(qk_scale(128 ** -0.5))
    logit = c * sink["q"][0, 0].astype(np.float64) @ sink["k"][0, 0, 0].astype(np.float64)
    assert np.allclose(logit, 10.0, atol=0.1)
    bulk = c * sink["q"][0, 0].astype(np.float64) @ sink["k"][0, 0, 1:].astype(np.float64).T
    assert abs(bulk.mean()) < 0.5
    srt = study.make_inputs(study.Case("sorted", 512, 128, 1.0, query_bias=4.0), 0)
    s = srt["q"][0, 0].astype(np.float64) @ srt["k"][0, 0].astype(np.float64).T
    block_max = s.reshape(512, 4, 128).max(axis=2)
    assert (np.diff(block_max, axis=1) > 0).mean() > 0.9


def test_the_command_line_runs_quick_on_a_tiny_shape(tmp_path):
    md, js = tmp_path / "o.md", tmp_path / "o.json"
    assert study.main([str(md), "--quick", "--json", str(js), "--n", "256", "--sigmas", "1",
                       "--flat-keys", "512", "--groups", "sweep,flat,sink"]) == 0
    text = md.read_text()
    assert "### Summary over the sweep" in text and "int32 worst case" in text
    saved = json.loads(js.read_text())
    assert [r["group"] for r in saved["rows"]].count("sweep") == 4
    assert [r["group"] for r in saved["rows"]].count("sink") == 12
    row = saved["rows"][0]
    assert set(row["variants"]) == {v.name for v in study.variants()}
    assert all(0 < v["rel_l2"] < 0.1 for v in row["variants"].values())
    assert saved["summary"][0]["variant"] == study.variants()[0].name
    again = tmp_path / "again.md"
    assert study.main([str(again), "--from-json", str(js)]) == 0
    assert again.read_text() == text
    assert study.Variant.from_json(saved["variant_fields"]["H0 R- round"]) == study.Variant()
