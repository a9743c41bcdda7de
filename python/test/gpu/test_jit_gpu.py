"""@sage.jit on the GPU: DSL kernels launched with torch tensors against the
interpreter, argument checks, streams, the disk cache across JIT objects.
Skipped without a GPU (conftest); needs torch and the binding
(scripts/build-binding.sh)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np
import pytest

import sage
import sage.language as sl
from sage.jit import ArgumentError
from repo_files import load_example

torch = pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[3]


def scale(x, y, n, alpha, BLOCK: sl.constexpr = 256):
    row = sl.program_id(0) * BLOCK
    t = sl.load(x, shape=(1, BLOCK), offsets=(0, row), strides=(n, 1), bounds=(1, n))
    sl.store(y, t * alpha, offsets=(0, row), strides=(n, 1), bounds=(1, n))


def widen(x: sl.pointer_type(sl.bfloat16), y, n, BLOCK: sl.constexpr = 128):
    row = sl.program_id(0) * BLOCK
    t = sl.load(x, shape=(1, BLOCK), offsets=(0, row), strides=(n, 1), bounds=(1, n))
    sl.store(y, t.to(sl.float32), offsets=(0, row), strides=(n, 1), bounds=(1, n))


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SAGE_CACHE_DIR", str(tmp_path / "cache"))
    for knob in ("SAGE_INTERPRET", "SAGE_DUMP", "SAGE_OVERRIDE_DIR", "SAGE_ALWAYS_COMPILE"):
        monkeypatch.delenv(knob, raising=False)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def run_both(kernel, grid, make_args, monkeypatch, **constexprs):
    """The kernel's outputs on the GPU and in the interpreter, same inputs."""
    gpu_args = make_args("cuda")
    kernel[grid](*gpu_args, **constexprs)
    torch.cuda.synchronize()
    cpu_args = make_args("cpu")
    monkeypatch.setenv("SAGE_INTERPRET", "1")
    kernel[grid](*cpu_args, **constexprs)
    monkeypatch.delenv("SAGE_INTERPRET")
    return gpu_args, cpu_args


def test_scale_matches_the_interpreter(monkeypatch, record):
    kernel = sage.jit(scale)
    n = 1000  # a masked tail

    def make(device):
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(n, generator=gen).to(device)
        return [x, torch.zeros(n, device=device), n, 1.5]
    gpu, cpu = run_both(kernel, lambda meta: (_cdiv(meta["n"], meta["BLOCK"]),), make,
                        monkeypatch)
    assert torch.equal(gpu[1].cpu(), cpu[1])
    assert torch.equal(cpu[1], cpu[0] * 1.5)
    compiled = kernel.compile(*gpu)
    record("jit_scale_arch", compiled.arch)
    record("jit_scale_origin", compiled.origin)


def test_bf16_through_the_interpreter_and_gpu(monkeypatch):
    kernel = sage.jit(widen)
    n = 300

    def make(device):
        x = torch.linspace(-4, 4, n, dtype=torch.bfloat16).to(device)
        return [x, torch.zeros(n, device=device), n]
    gpu, cpu = run_both(kernel, (_cdiv(n, 128),), make, monkeypatch)
    assert torch.equal(gpu[1].cpu(), cpu[1])
    assert torch.equal(cpu[1], cpu[0].float())


def test_quant_matmul_example_matches_the_interpreter(monkeypatch, record):
    example = load_example("quant_matmul")
    kernel = sage.jit(example.quant_matmul)
    m, n, k = 200, 136, 320
    blocks = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=64)

    def make(device):
        gen = torch.Generator().manual_seed(1)
        a = torch.randn(m, k, generator=gen).half().to(device)
        b = torch.randn(n, k, generator=gen).half().to(device)
        return [a, b, torch.zeros(m, n, device=device), m, n, k]
    gpu, cpu = run_both(kernel, (_cdiv(m, 64), _cdiv(n, 64)), make, monkeypatch, **blocks)
    difference = (gpu[2].cpu() - cpu[2]).abs().max().item()
    record("jit_quant_matmul_max_abs_diff_vs_interpreter", difference)
    assert difference <= 1e-4 * cpu[2].abs().max().item()


def column_groups(a, b, s, out, ROWS: sl.constexpr, COLS: sl.constexpr,
                  GROUPS: sl.constexpr, MATMUL: sl.constexpr):
    """out = t * broadcast(max of t per column group * s) and, below it, the
    row-group sums of t; t = a b^T from the tensor cores (MATMUL: int8
    operands, the SageBwd forward's K-group pattern on an accumulator) or
    a's tile itself (a blocked layout)."""
    if MATMUL:
        t = sl.qmatmul(sl.load(a, (ROWS, 64), (0, 0), (64, 1), (ROWS, 64)),
                       sl.full((1, 1), 1.0, sl.float32),
                       sl.load(b, (COLS, 64), (0, 0), (64, 1), (COLS, 64)),
                       sl.full((1, 1), 1.0, sl.float32), contract=(1, 1))
    else:
        t = sl.load(a, (ROWS, COLS), (0, 0), (COLS, 1), (ROWS, COLS))
    count = 1 << bin(GROUPS).count("1")
    scale = sl.load(s, (1, count), (0, 0), (count, 1), (1, count))
    g = sl.max(t, 1, groups=GROUPS) * scale
    sl.store(out, t * sl.broadcast(g, (ROWS, COLS), groups=GROUPS), (0, 0), (COLS, 1),
             (ROWS, COLS))
    sl.store(out, sl.sum(t, 0, groups=0b110), (ROWS, 0), (COLS, 1), (ROWS + 4, COLS))


@pytest.mark.parametrize("rows,cols,groups,matmul", [(64, 128, 0b1000110, True),
                                                     (64, 64, 0b110, True),
                                                     (64, 32, 0b100, False)])
def test_grouped_reductions_match_the_interpreter(monkeypatch, rows, cols, groups, matmul):
    kernel = sage.jit(column_groups)
    count = 1 << bin(groups).count("1")

    def make(device):
        gen = torch.Generator().manual_seed(rows + cols)
        if matmul:
            a = torch.randint(-127, 128, (rows, 64), generator=gen, dtype=torch.int8)
            b = torch.randint(-127, 128, (cols, 64), generator=gen, dtype=torch.int8)
        else:
            a, b = torch.randn(rows, cols, generator=gen), torch.zeros(1)
        s = torch.rand(1, count, generator=gen)
        return [t.to(device) for t in (a, b, s, torch.zeros(rows + 4, cols))]
    gpu, cpu = run_both(kernel, (1,), make, monkeypatch, ROWS=rows, COLS=cols, GROUPS=groups,
                        MATMUL=matmul)
    got, want = gpu[3].cpu(), cpu[3]
    assert torch.equal(got[:rows], want[:rows])
    # The sums' order differs (f32): close, not equal.
    torch.testing.assert_close(got[rows:], want[rows:], rtol=1e-5, atol=1e-3)


def test_launch_on_the_current_stream():
    kernel = sage.jit(scale)
    n = 1 << 20
    x = torch.randn(n, device="cuda")
    y = torch.zeros(n, device="cuda")
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        kernel[(_cdiv(n, 256),)](x, y, n, 3.0)
    stream.synchronize()
    assert torch.equal(y, x * 3.0)


def test_disk_cache_serves_a_new_jit_object(record):
    x = torch.randn(4096, device="cuda")
    y = torch.zeros(4096, device="cuda")
    start = time.perf_counter()
    first = sage.jit(scale).compile(x, y, 4096, 2.0)
    cold = time.perf_counter() - start
    start = time.perf_counter()
    second = sage.jit(scale).compile(x, y, 4096, 2.0)
    hit = time.perf_counter() - start
    assert (first.origin, second.origin) == ("compiled", "cache")
    second[(16,)](x, y, 4096, 2.0)
    torch.cuda.synchronize()
    assert torch.equal(y, x * 2.0)
    record("jit_scale_cold_compile_s", cold)
    record("jit_scale_disk_hit_s", hit)


def test_argument_errors_name_the_argument():
    kernel = sage.jit(scale)
    x = torch.randn(1024, device="cuda")
    y = torch.zeros(1024, device="cuda")
    with pytest.raises(ArgumentError, match="argument x is not in CUDA device memory"):
        kernel[(4,)](x.cpu(), y, 1024, 1.0)
    with pytest.raises(ArgumentError, match="argument y is not contiguous"):
        kernel[(4,)](x, torch.zeros(1024, 2, device="cuda")[:, 0], 1024, 1.0)
    with pytest.raises(ArgumentError, match="argument x: expected a tensor of bfloat16, "
                                            "got float32"):
        sage.jit(widen)[(4,)](x, y, 1024)
    with pytest.raises(ArgumentError, match="argument x has a dtype sage does not handle"):
        kernel[(4,)](x.double(), y, 1024, 1.0)
    aligned = kernel.compile(x, y, 1024, 1.0)
    with pytest.raises(ArgumentError, match="argument x does not match the compiled "
                                            "specialisation: a 16-byte aligned pointer"):
        aligned[(4,)](x[1:], y, 1023, 1.0)
    with pytest.raises(ArgumentError, match=r"compiled for constexprs \{'BLOCK': 256\}, "
                       r"num_warps=4, maxnreg=None, num_stages=1, tensor_maps=None and "
                       r"num_ctas=1, called with \{'BLOCK': 256\}, num_warps=4, maxnreg=64, "
                       r"num_stages=1, tensor_maps=None and num_ctas=1"):
        aligned[(4,)](x, y, 1024, 1.0, maxnreg=64)
    with pytest.raises(ArgumentError, match=r"called with .* maxnreg=None, num_stages=3, "
                       r"tensor_maps=None and num_ctas=1"):
        aligned[(4,)](x, y, 1024, 1.0, num_stages=3)
    with pytest.raises(ArgumentError, match=r"called with .* tensor_maps='device' and num_ctas=1"):
        aligned[(4,)](x, y, 1024, 1.0, tensor_maps="device")
    # Through the JIT itself a misaligned view is a new specialisation, not an error.
    kernel[(4,)](x[1:], y, 1023, 1.0)
    torch.cuda.synchronize()
    assert torch.equal(y[:1023], x[1:] * 1.0)


def test_warm_launch_overhead(record):
    kernel = sage.jit(scale)
    x = torch.randn(256, device="cuda")
    y = torch.zeros(256, device="cuda")
    launch = kernel[(1,)]
    for _ in range(10):
        launch(x, y, 256, 1.0)
    torch.cuda.synchronize()
    count = 2000
    start = time.perf_counter()
    for _ in range(count):
        launch(x, y, 256, 1.0)
    per_launch = (time.perf_counter() - start) / count
    torch.cuda.synchronize()
    record("jit_warm_launch_us", per_launch * 1e6)
    assert per_launch < 200e-6


def _int8_start(scales, BLOCK_M, BLOCK_N):
    """(row, col, s_a, s_b, a zero accumulator) of a program of the int8
    matmuls below (a helper: traced into the kernel)."""
    sa = sl.load(scales, shape=(1, 1), offsets=(0, 0), strides=(0, 1), bounds=(1, 2))
    sb = sl.load(scales, shape=(1, 1), offsets=(0, 1), strides=(0, 1), bounds=(1, 2))
    return (sl.program_id(0) * BLOCK_M, sl.program_id(1) * BLOCK_N, sa, sb,
            sl.zeros((BLOCK_M, BLOCK_N), sl.float32))


def _int8_step(a, b, sa, sb, acc, row, col, k, M, N, K, BLOCK_M, BLOCK_N, BLOCK_K):
    """acc plus the product of the A and B tiles at k (loaded by TMA when aligned)."""
    at = sl.load(a, shape=(BLOCK_M, BLOCK_K), offsets=(row, k), strides=(K, 1),
                 bounds=(M, K))
    bt = sl.load(b, shape=(BLOCK_N, BLOCK_K), offsets=(col, k), strides=(K, 1),
                 bounds=(N, K))
    return sl.qmatmul(at, sa, bt, sb, contract=(1, 1), acc=acc)


def int8_matmul(a, b, scales, c, M, N, K, BLOCK_M: sl.constexpr, BLOCK_N: sl.constexpr,
                BLOCK_K: sl.constexpr, STAGES: sl.constexpr = 1):
    """C = (A Bᵀ) * s_a * s_b from INT8 A (M x K) and B (N x K) in memory
    (their TMA copies STAGES - 1 iterations ahead)."""
    row, col, sa, sb, acc = _int8_start(scales, BLOCK_M, BLOCK_N)
    for k in sl.range(0, K, BLOCK_K, num_stages=STAGES):
        acc = _int8_step(a, b, sa, sb, acc, row, col, k, M, N, K, BLOCK_M, BLOCK_N, BLOCK_K)
    sl.store(c, acc, offsets=(row, col), strides=(N, 1), bounds=(M, N))


def int8_matmul_plain_loop(a, b, scales, c, M, N, K, BLOCK_M: sl.constexpr,
                           BLOCK_N: sl.constexpr, BLOCK_K: sl.constexpr):
    """:func:`int8_matmul` with a loop that gives no num_stages: the launch's
    num_stages pipelines it."""
    row, col, sa, sb, acc = _int8_start(scales, BLOCK_M, BLOCK_N)
    for k in sl.range(0, K, BLOCK_K):
        acc = _int8_step(a, b, sa, sb, acc, row, col, k, M, N, K, BLOCK_M, BLOCK_N, BLOCK_K)
    sl.store(c, acc, offsets=(row, col), strides=(N, 1), bounds=(M, N))


def _exact_int8_product(kernel, m: int, n: int, k: int, seed: int, **blocks):
    """Compiles and launches ``kernel`` (an int8 matmul, 64 x 64 tiles) on
    random INT8 operands, checks the product is exact, and returns the
    compiled kernel (for its IR and PTX)."""
    gen = torch.Generator().manual_seed(seed)
    a = torch.randint(-127, 128, (m, k), generator=gen, dtype=torch.int8).cuda()
    b = torch.randint(-127, 128, (n, k), generator=gen, dtype=torch.int8).cuda()
    scales = torch.tensor([1.0, 1.0], device="cuda")
    c = torch.full((m, n), float("nan"), device="cuda")
    compiled = kernel.compile(a, b, scales, c, m, n, k, **blocks)
    kernel[(_cdiv(m, 64), _cdiv(n, 64))](a, b, scales, c, m, n, k, **blocks)
    exact = a.double().cpu() @ b.double().cpu().T
    assert torch.equal(c.cpu().double(), exact)  # |sums| < 2^24: exact in f32
    return compiled


@pytest.mark.parametrize("maps", ["host", "device"])
@pytest.mark.parametrize("m,n,k", [(200, 136, 320), (64, 64, 128), (1000, 72, 48)])
def test_tma_kernel_tensor_maps(record, monkeypatch, maps, m, n, k):
    """A JIT kernel whose operand loads go through TMA on the H100 (aligned
    pointers, K a multiple of 16): its two tensor maps are encoded by the
    launcher (kernel parameters, no scratch) or, with
    SAGE_TENSOR_MAPS=device, built by every program in the global scratch
    the launcher allocates per launch, sized by the grid. Both exact."""
    monkeypatch.setenv("SAGE_TENSOR_MAPS", maps)
    blocks = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, num_warps=4)
    compiled = _exact_int8_product(sage.jit(int8_matmul), m, n, k, m + n + k, **blocks)
    assert "cp.async.bulk.tensor" in compiled.ptx
    if maps == "host":
        assert compiled.info.global_scratch == 0
        assert [m.address for m in compiled.info.tensor_maps] == ["a0", "a1"]
    else:
        assert compiled.info.global_scratch == 256  # two maps per program
        assert compiled.info.tensor_maps == ()
    record(f"jit_tma_int8_matmul[{maps}:{m}x{n}x{k}]", "exact")


def test_empty_dimension_runs_with_device_maps():
    """K = 0: a host map would have an empty dimension, which the driver
    does not encode; the launch runs the device-map build of the kernel
    instead (an empty sum: zeros), and a compiled specialisation's launch
    does the same."""
    kernel = sage.jit(int8_matmul)
    a = torch.zeros((64, 0), dtype=torch.int8, device="cuda")
    scales = torch.tensor([1.0, 1.0], device="cuda")
    c = torch.full((64, 64), float("nan"), device="cuda")
    blocks = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, num_warps=4)
    kernel[(1, 1)](a, a, scales, c, 64, 64, 0, **blocks)
    assert torch.equal(c, torch.zeros_like(c))
    specialised = kernel.compile(a, a, scales, c, 64, 64, 0, **blocks)
    assert specialised.info.tensor_maps
    c.fill_(float("nan"))
    specialised[(1, 1)](a, a, scales, c, 64, 64, 0, **blocks)
    assert torch.equal(c, torch.zeros_like(c))


@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("m,n,k", [(200, 136, 320), (64, 64, 0), (64, 72, 48), (130, 64, 64),
                                   (64, 64, 112), (96, 200, 1040)])
def test_pipelined_tma_matmul_is_exact(record, stages, m, n, k):
    """num_stages: the loop's TMA copies issued stages - 1 iterations ahead
    into rings of buffers and mbarriers (sagegpu-pipeline). Trip counts of
    0, 1 and fewer than the stages (K = 0, 48, 64, 112 at BLOCK_K = 64), tails
    in M, N and K, and long loops whose slots are refilled many times, all
    give the exact product."""
    blocks = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, STAGES=stages, num_warps=4)
    compiled = _exact_int8_product(sage.jit(int8_matmul), m, n, k, m + n + k + stages,
                                   **blocks)
    assert f"sage.num_stages = {stages} : i32" in compiled.ir
    assert "cp.async.bulk.tensor" in compiled.ptx
    record(f"jit_pipelined_int8_matmul[{stages}:{m}x{n}x{k}]", "exact")


@pytest.mark.parametrize("m,n,k", [(200, 136, 320), (64, 72, 48), (96, 200, 1040)])
def test_launch_num_stages_pipelines_plain_loops(record, m, n, k):
    """kernel[grid](..., num_stages=3): the loop that gives no num_stages is
    pipelined with 3 stages, and the product stays exact."""
    blocks = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, num_warps=4, num_stages=3)
    compiled = _exact_int8_product(sage.jit(int8_matmul_plain_loop), m, n, k, m + n + k + 3,
                                   **blocks)
    assert compiled.num_stages == 3
    assert "sage.num_stages = 3 : i32" in compiled.ir
    assert "cp.async.bulk.tensor" in compiled.ptx
    record(f"jit_launch_stages_int8_matmul[3:{m}x{n}x{k}]", "exact")


def ab_product(a, b, c, M, N, K, BLOCK_M: sl.constexpr, BLOCK_N: sl.constexpr,
               BLOCK_K: sl.constexpr, STAGES: sl.constexpr = 1):
    """C = A B of f16 A (M x K) and B (K x N), both row-major: B's tiles run
    along N in memory, and wgmma reads them MN-major (its transposed form)."""
    row, col = sl.program_id(0) * BLOCK_M, sl.program_id(1) * BLOCK_N
    acc = sl.zeros((BLOCK_M, BLOCK_N), sl.float32)
    for k in sl.range(0, K, BLOCK_K, num_stages=STAGES):
        at = sl.load(a, (BLOCK_M, BLOCK_K), (row, k), (K, 1), (M, K))
        bt = sl.load(b, (BLOCK_K, BLOCK_N), (k, col), (N, 1), (K, N))
        acc = sl.matmul(at, bt, contract=(1, 0), acc=acc)
    sl.store(c, acc, (row, col), (N, 1), (M, N))


@pytest.mark.parametrize("stages", [1, 3])
@pytest.mark.parametrize("m,n,k,block_n", [(128, 192, 256, 64), (100, 80, 80, 64),
                                           (64, 256, 1040, 128), (64, 64, 16, 64)])
def test_mn_major_b_is_exact(record, stages, m, n, k, block_n):
    """A row-major B (K x N) is copied by TMA as it is and read MN-major by
    wgmma (transposed B, 64- and 128-byte slabs of N), with tails in every
    dimension; small integers in f16 multiply exactly in f32."""
    gen = torch.Generator().manual_seed(m + n + k + stages)
    a = torch.randint(-8, 9, (m, k), generator=gen).half().cuda()
    b = torch.randint(-8, 9, (k, n), generator=gen).half().cuda()
    c = torch.full((m, n), float("nan"), device="cuda")
    kernel = sage.jit(ab_product)
    blocks = dict(BLOCK_M=64, BLOCK_N=block_n, BLOCK_K=64, STAGES=stages, num_warps=4)
    compiled = kernel.compile(a, b, c, m, n, k, **blocks)
    kernel[(_cdiv(m, 64), _cdiv(n, block_n))](a, b, c, m, n, k, **blocks)
    assert torch.equal(c, a.float() @ b.float())
    # wgmma's last immediate: B transposed (MN-major).
    assert "cp.async.bulk.tensor" in compiled.ptx
    assert re.search(r"wgmma\.mma_async[^;]*,\s*1,\s*1,\s*0,\s*1;", compiled.ptx)
    record(f"jit_mn_major_b[{stages}:{m}x{n}x{k}:{block_n}]", "exact")


def split_k_sum(x, out, M, N, SPLIT, BLOCK_M: sl.constexpr, BLOCK_N: sl.constexpr,
                TMA: sl.constexpr):
    """out[m, n] += sum over s of x[s, m, n]: program (i, j, s) adds its slice's
    tile into out (a bulk reduction by the copy engine with TMA)."""
    row, col, s = sl.program_id(0) * BLOCK_M, sl.program_id(1) * BLOCK_N, sl.program_id(2)
    t = sl.load(x, (BLOCK_M, BLOCK_N), (s, row, col), (M * N, N, 1), (SPLIT, M, N))
    sl.store(out, t, (row, col), (N, 1), (M, N), atomic_add=True, tma=TMA)


@pytest.mark.parametrize("m,n,engine", [(256, 128, True), (200, 144, True), (256, 72, False)])
def test_bulk_reduction_adds_tiles(record, m, n, engine):
    """sl.store(..., atomic_add=True, tma=True): the copy engine adds each
    program's tile to C (cp.reduce.async.bulk.tensor ... .add), also with
    tails in both dimensions (200 x 144 at 64 x 32 tiles); a row pitch the
    JIT cannot prove 16-byte aligned (N = 72) keeps per-element atomics. 7
    slices of small integers sum exactly in f32 either way."""
    split = 7
    x = torch.randint(-8, 9, (split, m, n), device="cuda").float()
    kernel = sage.jit(split_k_sum)
    grid = (_cdiv(m, 64), _cdiv(n, 32), split)
    for tma in (True, False):
        out = torch.ones(m, n, device="cuda")
        compiled = kernel.compile(x, out, m, n, split, BLOCK_M=64, BLOCK_N=32, TMA=tma)
        kernel[grid](x, out, m, n, split, BLOCK_M=64, BLOCK_N=32, TMA=tma)
        assert torch.equal(out, 1 + x.sum(0))
        assert ("cp.reduce.async.bulk.tensor.2d" in compiled.ptx) == (tma and engine)
    record(f"jit_bulk_reduction[{m}x{n},engine={engine}]", "exact")


def test_an_early_launched_kernel_reads_what_the_previous_one_wrote():
    """A kernel that waits for the previous one (sl.grid_dependency_wait) is
    launched early (programmatic dependent launch) after a slow kernel that
    lets it (sl.launch_dependents): what it reads after the wait is what the
    slow kernel wrote, every time; what it wrote before the wait is there."""
    from test_language_kernels import doubled_after, slow_count
    producer, consumer = sage.jit(slow_count), sage.jit(doubled_after)
    unused = torch.zeros(1, device="cuda", dtype=torch.int32)
    n, block, rounds = 1 << 20, 1024, 4000
    x = torch.arange(n, device="cuda", dtype=torch.float32) % 1000
    for trial in range(3):
        y, z = torch.zeros_like(x), torch.zeros_like(x)
        ids = torch.full((n // block,), -1.0, device="cuda")
        producer[(n // block,)](x, y, unused, n, rounds + trial, BLOCK=block)
        consumer[(n // block,)](y, z, ids, n, BLOCK=block)
        torch.cuda.synchronize()
        assert torch.equal(z, 2 * (x + rounds + trial)), f"trial {trial}"
        assert torch.equal(ids, torch.arange(n // block, device="cuda", dtype=torch.float32))
    device = torch.cuda.current_device()
    compiled = consumer.compile(y, z, ids, n, BLOCK=block).compiled
    assert compiled.info.early_launch and compiled.load(device).early_launch
    assert not producer.compile(x, y, unused, n, rounds,
                                BLOCK=block).compiled.load(device).early_launch


def test_an_early_launched_kernel_waits_on_the_counters_of_the_previous_one(record):
    """A kernel that waits on counters (sl.counter_wait) is launched early
    after a slow kernel whose programs raise a counter each when their block
    is stored (sl.counter_add): it reads every block, in the reverse order of
    the producer's programs, as the producer left it, every time."""
    from test_language_kernels import doubled_when_ready, slow_count
    producer, consumer = sage.jit(slow_count), sage.jit(doubled_when_ready)
    n, block, rounds = 1 << 20, 1024, 4000
    x = torch.arange(n, device="cuda", dtype=torch.float32) % 1000
    for trial in range(3):
        y, z = torch.zeros_like(x), torch.zeros_like(x)
        ready = torch.zeros(n // block, device="cuda", dtype=torch.int32)
        ids = torch.full((n // block,), -1.0, device="cuda")
        producer[(n // block,)](x, y, ready, n, rounds + trial, BLOCK=block, SIGNAL=True)
        consumer[(n // block,)](y, z, ids, ready, n, BLOCK=block)
        torch.cuda.synchronize()
        assert torch.equal(z, 2 * (x + rounds + trial)), f"trial {trial}"
        assert torch.equal(ready, torch.ones_like(ready))
        assert torch.equal(ids, torch.arange(n // block, device="cuda", dtype=torch.float32))
    device = torch.cuda.current_device()
    assert consumer.compile(y, z, ids, ready, n, BLOCK=block).compiled.load(device).early_launch
    record("jit_counters[early launch]", "exact")


def test_counter_adds_hand_out_distinct_tickets():
    """Each program's sl.counter_add returns the counter's old value to all
    of its threads: 4096 programs get 0, 2, ..., 8190, each once."""
    from test_language_kernels import tickets
    programs = 4096
    counter = torch.zeros(1, device="cuda", dtype=torch.int32)
    out = torch.full((programs,), -1, device="cuda", dtype=torch.int32)
    sage.jit(tickets)[(programs,)](counter, out)
    assert counter.item() == 2 * programs
    assert torch.equal(out.sort().values,
                       torch.arange(0, 2 * programs, 2, device="cuda", dtype=torch.int32))


def test_clusters_combine_partials_on_the_gpu(monkeypatch):
    """Programs in clusters of 4 (num_ctas=4) exchange partial sums through
    global memory across sl.cluster_barrier, as in the interpreter."""
    from test_language_kernels import cluster_sums, cluster_sums_expected
    kernel = sage.jit(cluster_sums)
    programs, block = 64, 128

    def make(device):
        x = torch.randn(programs * block, generator=torch.Generator().manual_seed(3))
        return [x.to(device), torch.zeros(programs, device=device),
                torch.zeros(programs, device=device), programs * block]
    gpu, cpu = run_both(kernel, (programs,), make, monkeypatch, CLUSTER=4, BLOCK=block,
                        num_ctas=4)
    expected = cluster_sums_expected(cpu[0].numpy(), 4, block)
    np.testing.assert_allclose(gpu[2].cpu().numpy(), expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(cpu[2].numpy(), expected, rtol=1e-4, atol=1e-4)
    assert kernel.compile(*gpu, CLUSTER=4, BLOCK=block, num_ctas=4).compiled.info.cluster == 4
    with pytest.raises(ValueError, match="multiple of 4, got 6"):
        kernel[(6,)](*make("cuda"), CLUSTER=4, BLOCK=block, num_ctas=4)
