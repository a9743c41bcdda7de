"""CPU tests of the training-parity harness (issue 14): sage.nn's model, the dataset
build, the data order and schedule, and a few training steps of a tiny model whose
attention is SageBwd run by the interpreter, against the float64 emulation."""

from __future__ import annotations

import math
import sys
import sysconfig
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from repo_files import ROOT  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))

from training import arms, data, report, run, table2  # noqa: E402
from training.train import Batches, TrainConfig, lr_at, train, val_windows  # noqa: E402

from sage.nn import AttentionOptions, Llama, LlamaConfig, attend  # noqa: E402
from sage.nn.llama import apply_rope, rope_tables  # noqa: E402

TINY = LlamaConfig(vocab_size=257, dim=128, n_layers=2, n_heads=2, max_seq_len=64)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[np.ndarray, np.ndarray]:
    """A byte-level dataset from ~300 KB of this interpreter's standard library."""
    out = tmp_path_factory.mktemp("corpus")
    roots = {"stdlib": Path(sysconfig.get_paths()["stdlib"])}
    data.build(out, roots=roots, max_mb=0.3, val_percent=10, tokenizer="byte", log=False)
    train_stream, val_stream, meta = data.load(out)
    assert meta["tokens"]["train"] == train_stream.size > 50_000
    return train_stream, val_stream


def test_model_parameters_and_qk_norm():
    on, off = Llama(TINY), Llama(replace(TINY, qk_norm=False))
    assert on.num_parameters() - off.num_parameters() == 2 * TINY.n_layers * TINY.head_dim
    assert TINY.hidden == 384 and arms.MODEL.head_dim == 64
    tokens = torch.randint(0, 257, (2, 64))
    assert on(tokens).shape == (2, 64, 257)
    q_norm = on.blocks[0].attn.q_norm
    x = torch.randn(2, 64, 2, 64) * 7
    assert torch.allclose(q_norm(x).pow(2).mean(-1), torch.ones(2, 64, 2), atol=1e-3)


def test_rope_depends_on_relative_position_only():
    cos, sin = rope_tables(32, 64, 10000.0)
    q, k = torch.randn(1, 1, 1, 64), torch.randn(1, 1, 1, 64)
    qs, ks = apply_rope(q.expand(1, 32, 1, 64), cos, sin), apply_rope(k.expand(1, 32, 1, 64),
                                                                     cos, sin)
    dots = qs[0, :, 0] @ ks[0, :, 0].T
    assert torch.allclose(dots[5, 2], dots[20, 17], atol=1e-4)
    assert not torch.allclose(dots[5, 2], dots[5, 3], atol=1e-4)
    assert torch.allclose(qs[0, 0, 0], q[0, 0, 0])  # position 0 is not rotated


def test_lr_schedule_warmup_and_cosine():
    cfg = TrainConfig("x", TINY, batch_size=1, tokens=64 * 200)
    lrs = [lr_at(s, cfg) for s in range(cfg.steps)]
    assert cfg.steps == 200 and lrs[0] == pytest.approx(1e-4)
    assert lrs[9] == pytest.approx(1e-3) and max(lrs) == pytest.approx(1e-3)
    assert lrs[-1] == pytest.approx(1e-4, rel=0.01)
    assert all(a >= b for a, b in zip(lrs[10:], lrs[11:]))


def test_batches_are_deterministic_and_shifted():
    stream = np.arange(10_000, dtype=np.uint16)
    a, b = (Batches(stream, 64, 4, seed, torch.device("cpu")) for seed in (0, 0))
    c = Batches(stream, 64, 4, 1, torch.device("cpu"))
    x, y = a.get(3)
    assert torch.equal(x, b.get(3)[0]) and not torch.equal(x, c.get(3)[0])
    assert torch.equal(x[:, 1:], y[:, :-1]) and x.shape == (4, 64)
    assert torch.all(x[:, 0] % 64 == 0)  # windows start on multiples of seq_len
    epoch = torch.cat([a.get(s)[0][:, 0] for s in range(a.per_epoch)])
    assert epoch.unique().numel() == epoch.numel()  # no window twice in an epoch
    assert val_windows(stream, 64, 640, torch.device("cpu")).shape == (10, 65)


def test_dataset_build_is_deterministic_and_split_by_file(tmp_path):
    root = tmp_path / "lib"
    (root / "pkg" / "__pycache__").mkdir(parents=True)
    for i in range(40):
        (root / "pkg" / f"m{i}.py").write_text(f"def f{i}(x):\n    return x + {i}\n")
    (root / "pkg" / "copy.py").write_text("def f0(x):\n    return x + 0\n")  # duplicate of m0
    (root / "pkg" / "__pycache__" / "m0.py").write_text("skipped\n")
    (root / "pkg" / "bad.py").write_bytes(b"\xff\xfe not utf-8")
    metas = [data.build(tmp_path / f"out{i}", roots={"lib": root}, val_percent=25,
                        tokenizer="byte", log=False) for i in range(2)]
    assert metas[0]["files"] == 40
    assert metas[0]["train_files"] + metas[0]["val_files"] == 40 and metas[0]["val_files"] > 0
    assert metas[0]["token_sha256"] == metas[1]["token_sha256"]
    train_stream, val_stream, _ = data.load(tmp_path / "out0")
    assert (train_stream == 256).sum() == metas[0]["train_files"]  # one EOS per file
    text = bytes(val_stream[val_stream < 256].astype(np.uint8)).decode()
    assert "def f" in text


def test_bpe_tokenizer_trains_and_reloads(tmp_path):
    pytest.importorskip("tokenizers")
    root = tmp_path / "lib"
    root.mkdir()
    for i in range(30):
        (root / f"m{i}.py").write_text(f"import os\n\n\ndef function_{i}(value):\n"
                                       f"    return os.path.join(value, '{i}')\n" * 3)
    meta = data.build(tmp_path / "a", roots={"lib": root}, val_percent=20, vocab=300, log=False)
    again = data.build(tmp_path / "b", roots={"lib": root}, val_percent=20, log=False,
                       tokenizer_json=tmp_path / "a" / "tokenizer.json")
    assert meta["vocab_size"] <= 300 and meta["eos_id"] == 0
    assert again["token_sha256"] == meta["token_sha256"]


def _train_tiny(backend: str, corpus, steps: int = 3) -> tuple[dict, Llama]:
    train_stream, val_stream = corpus
    model = replace(TINY, attention=AttentionOptions(backend))
    cfg = TrainConfig(f"tiny-{backend}", model, batch_size=2, tokens=steps * 2 * 64, evals=1,
                      eval_tokens=2 * 64, final_eval_tokens=2 * 64, eval_batch=2, log_every=1)
    return train(cfg, train_stream, val_stream, torch.device("cpu"), log=lambda _: None)


def test_training_steps_interpreter_match_float64_emulation(corpus):
    """The harness trains with SageBwd run by the CPU interpreter; the float64
    emulation of the same algorithm gives the same losses, and full precision
    (SDPA) close ones."""
    interp, model = _train_tiny("sage-interpret", corpus)
    emul, _ = _train_tiny("sage-emulate", corpus)
    exact, _ = _train_tiny("sdpa", corpus)
    losses = {name: [t["loss"] for t in r["train"]] + [r["final_val_loss"]]
              for name, r in (("interp", interp), ("emul", emul), ("exact", exact))}
    assert len(losses["interp"]) == 4 and all(math.isfinite(x) for x in losses["interp"])
    np.testing.assert_allclose(losses["interp"], losses["emul"], rtol=2e-4)
    np.testing.assert_allclose(losses["interp"], losses["exact"], rtol=2e-2)
    assert losses["interp"][0] == pytest.approx(math.log(257), rel=0.05)
    assert not interp["diverged"] and interp["evals"][0]["qk"][0]["q_std"] > 0

    train_stream, val_stream = corpus
    windows = val_windows(val_stream, 64, 64, torch.device("cpu"))
    analysis = table2.table2(model, windows[:, :-1], windows[:, 1:])
    worst = analysis["layers"][analysis["worst_layer"]]
    assert worst["dp"]["rel_l2"] == 0.0 and worst["dp"]["cos"] == pytest.approx(1.0)
    assert all(0.99 < worst[t]["cos"] <= 1.0 + 1e-12 and 0 < worst[t]["rel_l2"] < 0.1
               for t in ("delta", "p", "ds", "o", "dq", "dk", "dv"))
    assert model.cfg.attention.backend == "sage-interpret"  # restored after capture


def test_run_tiny_suite_writes_results_and_report(corpus, tmp_path):
    data_dir = tmp_path / "data"
    data.build(data_dir, roots={"stdlib": Path(sysconfig.get_paths()["stdlib"])}, max_mb=0.2,
               val_percent=10, tokenizer="byte", log=False)
    out = tmp_path / "out"
    result = run.run_suite(run.parse_args([str(out), "--suite", "tiny", "--data-dir",
                                           str(data_dir), "--device", "cpu", "--tokens",
                                           str(2 * 4 * 64)]))
    assert set(result["arms"]) == {"sdpa-qknorm-s0", "sage-qknorm-s0"}
    assert result["arms"]["sage-qknorm-s0"]["config"]["model"]["attention"]["backend"] == \
        "sage-interpret"
    assert "sage-qknorm-s0" in result["table2"]
    md = (out / "training.md").read_text()
    assert "| seed | SDPA | sage | sage gap |" in md and "dS dominates" in md
    assert "(1 seeds only)" in md  # one seed: the mean-gap bar is never called met
    assert (out / "training-curves.png").stat().st_size > 10_000
    merged = report.merge([result, {"arms": {}, "skipped": [{"arm": "sdpa-qknorm-s0"}]}])
    assert merged["skipped"] == []  # an arm that ran elsewhere is not "skipped"
    assert report.verdict(merged["arms"])["gaps"]["sage-qknorm-s0"] == pytest.approx(
        report.gap(merged["arms"], "sage-qknorm-s0", "sdpa-qknorm-s0"))


def test_sdpa_math_backend_matches_sdpa():
    """The noise twin's attention (SDPA pinned to the math backend) is the same
    function as the fused SDPA: only the rounding differs."""
    q, k, v = (torch.randn(2, 64, 2, 32, requires_grad=True) for _ in range(3))
    outs = [attend(q, k, v, AttentionOptions(b)) for b in ("sdpa", "sdpa-math")]
    torch.testing.assert_close(outs[0], outs[1], atol=1e-5, rtol=1e-5)


def test_seed_arms_and_suite():
    assert arms.arm("sdpa-qknorm-s0") is arms.ARMS["sdpa-qknorm-s0"]
    sage7, twin7 = arms.arm("sage-qknorm-s7"), arms.arm("sdpamath-qknorm-s7")
    assert (sage7.backend, sage7.seed, sage7.reference) == ("sage", 7, "sdpa-qknorm-s7")
    assert twin7.backend == "sdpa-math" and twin7.qk_norm and twin7.batch_size == arms.SMALL_BATCH
    assert arms.arm("sdpa-qknorm-s12") == arms.Arm("sdpa-qknorm-s12", seed=12)
    with pytest.raises(KeyError):
        arms.arm("sage-noqknorm-s3")
    assert arms.seeds_suite(2, twins=True)["arms"] == [
        "sdpa-qknorm-s0", "sage-qknorm-s0", "sdpamath-qknorm-s0",
        "sdpa-qknorm-s1", "sage-qknorm-s1", "sdpamath-qknorm-s1"]
    assert run.rate_key(twin7) == "sdpa-b16" and run.rate_key(sage7) == "sage-b16"


def _arm(loss: float) -> dict:
    return {"final_val_loss": loss, "complete": True}


def test_verdict_mean_gap_interval_and_twins():
    base = [2.50, 2.52, 2.48, 2.51]
    sage_gap = [0.012, -0.004, 0.002, -0.002]   # mean +0.2%
    twin_gap = [0.008, -0.010, 0.001, 0.003]
    result = {f"sdpa-qknorm-s{i}": _arm(b) for i, b in enumerate(base)}
    result.update({f"sage-qknorm-s{i}": _arm(b * (1 + g)) for i, (b, g) in
                   enumerate(zip(base, sage_gap))})
    result.update({f"sdpamath-qknorm-s{i}": _arm(b * (1 + g)) for i, (b, g) in
                   enumerate(zip(base, twin_gap))})
    result["sage-qknorm-tps64k-s0"] = _arm(9.0)  # not a headline arm
    v = report.verdict(result)
    assert list(v["gaps"]) == [f"sage-qknorm-s{i}" for i in range(4)]
    assert v["mean_gap"] == pytest.approx(0.002) and v["stats"]["n"] == 4
    lo, hi = v["stats"]["ci95"]
    sd = float(np.std(sage_gap, ddof=1))
    assert hi - 0.002 == pytest.approx(3.182 * sd / 2)  # t(3) quantile, se = sd / sqrt(4)
    assert v["met"] and not v["ci_within"] and not v["every_seed"] and v["within"] == 3
    assert v["twin"]["mean"] == pytest.approx(0.0005)
    assert v["sage_minus_twin"]["mean"] == pytest.approx(0.0015)
    assert v["spread"]["n"] == 4 and v["spread"]["range"] == pytest.approx(0.04)
    # Two seeds never meet the bar, however close; an invalid arm drops its pair.
    assert not report.verdict({k: result[k] for k in list(result)[:2] + [
        "sage-qknorm-s0", "sage-qknorm-s1"]})["met"]
    assert report.verdict(result, {"sdpa-qknorm-s0": "x"})["stats"]["n"] == 3
    md = report.markdown({"arms": {k: dict(a, arm={}, config={"tokens_per_step": 8192,
                                                             "steps": 1})
                                   for k, a in result.items()}})
    assert "| seed | SDPA | sage | sage gap | SDPA math twin | twin gap |" in md
    assert "**met**" in md and "single seeds within 0.5%: 3 of 4" in md


def test_seeds_suite_in_concurrent_workers(corpus, tmp_path):
    """``--suite seeds --workers K`` trains each arm in its own process and merges
    them into one result (the tiny model on the CPU)."""
    data_dir = tmp_path / "data"
    data.build(data_dir, roots={"stdlib": Path(sysconfig.get_paths()["stdlib"])}, max_mb=0.2,
               val_percent=10, tokenizer="byte", log=False)
    out = tmp_path / "out"
    result = run.run_suite(run.parse_args([
        str(out), "--suite", "seeds", "--seeds", "1", "--twins", "--workers", "3", "--tiny",
        "--data-dir", str(data_dir), "--device", "cpu", "--tokens", str(2 * 4 * 64)]))
    assert set(result["arms"]) == {"sdpa-qknorm-s0", "sage-qknorm-s0", "sdpamath-qknorm-s0"}
    assert all(a["complete"] and a["wall_s"] > 0 for a in result["arms"].values())
    assert result["arms"]["sdpamath-qknorm-s0"]["config"]["model"]["attention"]["backend"] == \
        "sdpa-math"
    assert result["arms"]["sage-qknorm-s0"]["config"]["model"]["dim"] == 128  # --tiny
    assert result["workers"] == 3 and not result["skipped"] and "failed" not in result
    md = (out / "training.md").read_text()
    assert "sdpamath-qknorm-s0" in md and "twin gap" in md


def test_workers_skip_arms_that_could_not_be_compared(tmp_path):
    """A sage arm is not trained when its SDPA reference did not fit the budget, nor an
    SDPA arm when its sage arm would not."""
    data_dir = tmp_path / "data"
    data.build(data_dir, roots={"stdlib": Path(sysconfig.get_paths()["stdlib"])}, max_mb=0.05,
               val_percent=10, tokenizer="byte", log=False)
    result = run.run_suite(run.parse_args([
        str(tmp_path / "out"), "--suite", "seeds", "--seeds", "1", "--workers", "2", "--tiny",
        "--data-dir", str(data_dir), "--device", "cpu", "--tokens", "512", "--budget-s", "60",
        "--rates", '{"sdpa-b16": 1.0}']))  # arms keep their batch; --tiny shrinks it
    assert result["arms"] == {}
    assert [s["arm"] for s in result["skipped"]] == ["sdpa-qknorm-s0", "sage-qknorm-s0"]
    # Nor is an SDPA arm trained when the sage arm compared with it would not fit.
    result = run.run_suite(run.parse_args([
        str(tmp_path / "out2"), "--suite", "seeds", "--seeds", "1", "--workers", "2", "--tiny",
        "--data-dir", str(data_dir), "--device", "cpu", "--tokens", "512", "--budget-s", "60",
        "--rates", '{"sdpa-b16": 1e-9, "sage-b16": 1.0}']))
    assert result["arms"] == {} and len(result["skipped"]) == 2
