"""@sage.autotune on the GPU: the pipelined INT8 TMA matmul of test_jit_gpu
tuned over tile widths, stages and warps with the default timer (CUDA
events), exact against torch, its winner on disk and read back by a new
autotuner without timing. Skipped without a GPU (conftest)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import sage
import sage.language as sl
from sage.jit import Config
from sage.jit.autotune_cache import FOLDER

torch = pytest.importorskip("torch")
from test_jit_gpu import int8_matmul  # noqa: E402  (its folder is on sys.path under pytest)

CONFIGS = [Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "STAGES": 2}),
           Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "STAGES": 3}),
           Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "STAGES": 3}, num_warps=8)]


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("SAGE_CACHE_DIR", str(tmp_path / "cache"))
    for knob in ("SAGE_INTERPRET", "SAGE_AUTOTUNE_CACHE", "SAGE_ALWAYS_COMPILE"):
        monkeypatch.delenv(knob, raising=False)
    return tmp_path / "cache"


def grid(meta):
    return (-(-meta["M"] // meta["BLOCK_M"]), -(-meta["N"] // meta["BLOCK_N"]))


def matmul_problem(m: int, n: int, k: int):
    gen = torch.Generator().manual_seed(m + n + k)
    a = torch.randint(-127, 128, (m, k), generator=gen, dtype=torch.int8).cuda()
    b = torch.randint(-127, 128, (n, k), generator=gen, dtype=torch.int8).cuda()
    scales = torch.tensor([1.0, 1.0], device="cuda")
    c = torch.full((m, n), float("nan"), device="cuda")
    return a, b, scales, c


def check_exact(a, b, c) -> None:
    exact = a.double().cpu() @ b.double().cpu().T
    assert torch.equal(c.cpu().double(), exact)  # |sums| < 2^24: exact in f32


def test_autotuned_int8_matmul_is_exact_and_cached(cache_dir, record):
    m = n = k = 512
    tuned = sage.autotune(CONFIGS, key=["M", "N", "K"])(sage.jit(int8_matmul))
    a, b, scales, c = matmul_problem(m, n, k)
    tuned[grid](a, b, scales, c, m, n, k)
    torch.cuda.synchronize()
    check_exact(a, b, c)
    assert not tuned.failures, tuned.failures
    assert tuned.best_config in CONFIGS and len(tuned.configs_timings) == len(CONFIGS)
    assert all(0 < ms < math.inf for ms in tuned.configs_timings.values())
    assert tuned.best_config == min(tuned.configs_timings, key=tuned.configs_timings.get)
    (entry,) = (cache_dir / FOLDER).rglob("*.sage")
    record("autotune_int8_matmul_512_ms",
           {repr(config): round(ms, 5) for config, ms in tuned.configs_timings.items()})
    record("autotune_int8_matmul_512_best", repr(tuned.best_config))
    record("autotune_int8_matmul_512_bench_s", round(tuned.bench_time, 2))

    def never(fn):
        raise AssertionError("the winner on disk is not timed again")
    again = sage.autotune(CONFIGS, key=["M", "N", "K"], do_bench=never)(sage.jit(int8_matmul))
    a, b, scales, c = matmul_problem(m, n, k)
    again[grid](a, b, scales, c, m, n, k)
    torch.cuda.synchronize()
    check_exact(a, b, c)
    assert again.best_config == tuned.best_config
    assert list((cache_dir / FOLDER).rglob("*.sage")) == [entry]


def test_resets_make_an_accumulating_launch_exact_after_tuning():
    """reset_to_zero on the output of a kernel whose tiles add into it (its
    grid's third axis splits K): without the resets the benchmark runs
    would leave their sums in c."""
    m, n, k = 128, 128, 256

    @sage.jit
    def split_k(a, b, c, M, N, K, BLOCK_M: sl.constexpr, BLOCK_N: sl.constexpr,
                BLOCK_K: sl.constexpr):
        row = sl.program_id(0) * BLOCK_M
        col = sl.program_id(1) * BLOCK_N
        kk = sl.program_id(2) * BLOCK_K
        at = sl.load(a, shape=(BLOCK_M, BLOCK_K), offsets=(row, kk), strides=(K, 1),
                     bounds=(M, K))
        bt = sl.load(b, shape=(BLOCK_N, BLOCK_K), offsets=(col, kk), strides=(K, 1),
                     bounds=(N, K))
        acc = sl.matmul(at, bt, contract=(1, 1))
        sl.store(c, acc, offsets=(row, col), strides=(N, 1), bounds=(M, N), atomic_add=True)

    tuned = sage.autotune([Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64}),
                           Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 128})],
                          key=["M", "N", "K"], reset_to_zero=["c"], rep=5)(split_k)
    gen = torch.Generator().manual_seed(3)
    a = torch.randint(-4, 5, (m, k), generator=gen).half().cuda()
    b = torch.randint(-4, 5, (n, k), generator=gen).half().cuda()
    c = torch.zeros(m, n, device="cuda")
    tuned[lambda meta: (m // meta["BLOCK_M"], n // meta["BLOCK_N"], k // meta["BLOCK_K"])](
        a, b, c, m, n, k)
    torch.cuda.synchronize()
    assert not tuned.failures, tuned.failures
    assert torch.equal(c.cpu().double(), a.double().cpu() @ b.double().cpu().T)

