"""Kernels in the sage language shared by the test_language_* tests (no tests here).

Each entry of KERNELS pairs a kernel with the argument specs and constexprs
it is traced with.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import sage.language as sl
from repo_files import load_example
from sage.reference import to_bf16

ROOT = Path(__file__).resolve().parents[2]


quant_matmul_example = load_example("quant_matmul")


def half_operands(rng: np.random.Generator, dtype: sl.DType,
                  *shapes: tuple[int, int]) -> tuple[list[np.ndarray], list]:
    """Random f16 or bf16 operands: their values (float16, or float32 holding
    bf16) and the interpreter arguments that hold them."""
    values = [rng.standard_normal(shape).astype(np.float32) for shape in shapes]
    if dtype is sl.float16:
        values = [x.astype(np.float16) for x in values]
        return values, list(values)
    values = [to_bf16(x) for x in values]
    return values, [sl.Buffer(x, sl.bfloat16) for x in values]


def half_matmul(a, b, c, M, N, K, BLOCK_M: sl.constexpr, BLOCK_N: sl.constexpr,
                BLOCK_K: sl.constexpr):
    """C = A B in 16 bits with f32 accumulation (A: M x K, B: K x N)."""
    row = sl.program_id(0) * BLOCK_M
    col = sl.program_id(1) * BLOCK_N
    acc = sl.zeros((BLOCK_M, BLOCK_N), sl.float32)
    for k in sl.range(0, K, BLOCK_K):
        at = sl.load(a, (BLOCK_M, BLOCK_K), (row, k), (K, 1), (M, K))
        bt = sl.load(b, (BLOCK_K, BLOCK_N), (k, col), (N, 1), (K, N))
        acc = sl.matmul(at, bt, contract=(1, 0), acc=acc)
    sl.store(c, acc, (row, col), (N, 1), (M, N))


def _row_max(x):
    """A helper: inlined while tracing."""
    return sl.max(x, axis=1)


def row_softmax(x, y, stats, M, N: sl.constexpr, BLOCK_M: sl.constexpr):
    """Softmax of each row of x (M x N, f32), its row max and absmax into stats (M x 2)."""
    row = sl.program_id(0) * BLOCK_M
    t = sl.load(x, (BLOCK_M, N), (row, 0), (N, 1), (M, N))
    m = _row_max(t)
    p = sl.exp2((t - m) * 1.4426950408889634)
    total = sl.sum(p, axis=1)
    sl.store(y, p / total, (row, 0), (N, 1), (M, N))
    sl.store(stats, m, (row, 0), (2, 1), (M, 2))
    sl.store(stats, sl.absmax(t, axis=1), (row, 1), (2, 1), (M, 2))


def attention_forward(q, k, v, o, lse, N, N_KV, D: sl.constexpr, BLOCK_M: sl.constexpr,
                      BLOCK_N: sl.constexpr, SCALE: sl.constexpr, CAUSAL: sl.constexpr):
    """SageBwd-style forward for one Q block of one head: INT8 Q K^T and P~ V.

    q, k, v: (heads, N or N_KV, D) f16; o: (heads, N, D) f32; lse: (heads, N) f32.
    SCALE is the softmax scale times log2(e). Grid: (ceil(N / BLOCK_M), heads).
    """
    head = sl.program_id(1)
    row = sl.program_id(0) * BLOCK_M
    q_h = q + head * N * D
    k_h = sl.addptr(k, head * N_KV * D)
    v_h = v + head * N_KV * D
    qt = sl.load(q_h, (BLOCK_M, D), (row, 0), (D, 1), (N, D))
    qq, sq = sl.quantize(qt, sl.int8_per_block)
    m = sl.full((BLOCK_M, 1), float("-inf"), sl.float32)
    l = sl.zeros((BLOCK_M, 1), sl.float32)
    acc = sl.zeros((BLOCK_M, D), sl.float32)
    rows = sl.iota((BLOCK_M, 1), 0) + row
    for j in sl.range(0, N_KV, BLOCK_N):
        kt = sl.load(k_h, (BLOCK_N, D), (j, 0), (D, 1), (N_KV, D))
        kq, sk = sl.quantize(kt, sl.int8_per_block)
        s = sl.qmatmul(qq, sq, kq, sk, contract=(1, 1))
        cols = sl.iota((1, BLOCK_N), 1) + j
        valid = cols < N_KV
        if CAUSAL:
            valid = valid & (cols <= rows)
        s = sl.where(valid, s, float("-inf"))
        p, m, l, alpha, p_max = sl.softmax_update(s, m, l, scale=SCALE)
        pq, sp = sl.quantize(p, sl.int8_per_token, scale=p_max / 127.0)
        vt = sl.load(v_h, (BLOCK_N, D), (j, 0), (D, 1), (N_KV, D))
        vq, sv = sl.quantize(vt, sl.int8_per_block)
        acc = sl.qmatmul(pq, sp, vq, sv, contract=(1, 0), acc=acc * alpha)
    out = acc / l
    sl.store(o + head * N * D, out, (row, 0), (D, 1), (N, D))
    sl.store(lse + head * N, m + sl.log2(l), (row, 0), (1, 0), (N, 1))


def every_op(x, h, i, out, acc, n, scale_in, D: sl.constexpr, SCHEME: sl.constexpr):
    """Touches every op and operator once (x: f16, h: bf16, i: i8, out/acc: f32)."""
    pid = sl.program_id(0)
    count = sl.num_programs(0)
    base = (pid * D) % (count * D + 1) + (n // 2 - n // 2)
    xt = sl.load(x, (D, D), (0, 0), (D, 1), (n, D))
    ks, mean = sl.smooth(xt, axis=0)
    q, s = sl.quantize(ks, SCHEME)
    back = sl.dequantize(q, s, SCHEME)
    ht = sl.load(h, (D, D), (0, 0), (D, 1), (n, D))
    it = sl.load(i, (D, D), (0, 0), (D, 1), (n, D))
    prod = sl.matmul(ht, ht, contract=(0, 0))
    mixed = back + it.to(sl.float32) + mean - sl.minimum(prod, 2.0)
    mixed = sl.maximum(mixed, -sl.abs(mixed)) / sl.sqrt(sl.exp2(sl.log2(mixed * mixed + 1.0)))
    lo = sl.min(mixed, axis=0)
    col = sl.broadcast(sl.iota((1, D), 1), (D, D))
    pick = (col >= 2) & ~(col == 3) | (col != col)
    mixed = sl.where(pick, mixed, lo)
    ones = sl.full((D, D), scale_in, sl.float32) + sl.splat(n.to(sl.float32), (D, D))
    total = sl.zeros((D, 1), sl.float32)
    for a in sl.range(0, 2):
        for b in sl.range(a, 3):
            total = total + sl.sum(mixed * ones, axis=1) + (a * b).to(sl.float32)
    sl.store(out, mixed.to(sl.bfloat16).to(sl.float32), (base, 0), (D, 1), (n, D))
    sl.store(acc, total, (0, 0), (1, 0), (D, 1), atomic_add=True)


def _pointer(dtype, alignment=None):
    return sl.ArgSpec.pointer(dtype, alignment=alignment)


I32, I64, F32 = (sl.ArgSpec.scalar(t) for t in (sl.int32, sl.int64, sl.float32))
F16_PTR, BF16_PTR, F32_PTR, I8_PTR = (_pointer(t) for t in
                                       (sl.float16, sl.bfloat16, sl.float32, sl.int8))

KERNELS = {
    "quant_matmul": (quant_matmul_example.quant_matmul,
                     [_pointer(sl.float16, 16), F16_PTR, F32_PTR, I32, I32,
                      sl.ArgSpec.scalar(sl.int32, divisibility=16)],
                     dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=64)),
    "half_matmul": (half_matmul, [F16_PTR, F16_PTR, F32_PTR, I32, I32, I64],
                    dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32)),
    "half_matmul_bf16": (half_matmul, [BF16_PTR, BF16_PTR, F32_PTR, I32, I32, I32],
                         dict(BLOCK_M=64, BLOCK_N=32, BLOCK_K=32)),
    "row_softmax": (row_softmax, [F32_PTR, F32_PTR, F32_PTR, I32], dict(N=64, BLOCK_M=32)),
    "attention_forward": (attention_forward,
                          [F16_PTR, F16_PTR, F16_PTR, F32_PTR, F32_PTR, I32, I32],
                          dict(D=64, BLOCK_M=64, BLOCK_N=64, SCALE=0.125 * 1.4426950408889634,
                               CAUSAL=True)),
    "every_op": (every_op, [F16_PTR, BF16_PTR, I8_PTR, F32_PTR, F32_PTR, I32, F32],
                 dict(D=32, SCHEME=sl.int8_per_token.with_rounding("rna"))),
}


def cluster_sums(x, partial, out, N, CLUSTER: sl.constexpr, BLOCK: sl.constexpr):
    """Programs in thread-block clusters of CLUSTER (launched with
    ``num_ctas=CLUSTER``) combine partial results through global memory:
    each sums its BLOCK of x (1 x N, f32) into partial[program]; after the
    cluster barrier, each writes its cluster's total to out[program]."""
    program = sl.program_id(0)
    t = sl.load(x, (1, BLOCK), (0, program * BLOCK), (N, 1), (1, N))
    sl.store(partial, sl.sum(t, axis=1), (0, program), (1, 1), (1, sl.num_programs(0)))
    sl.cluster_barrier()
    first = program - program % CLUSTER
    parts = sl.load(partial, (1, CLUSTER), (0, first), (1, 1), (1, sl.num_programs(0)))
    sl.store(out, sl.sum(parts, axis=1), (0, program), (1, 1), (1, sl.num_programs(0)))


def slow_count(x, y, ready, N, ROUNDS, BLOCK: sl.constexpr, SIGNAL: sl.constexpr = False):
    """y = x + ROUNDS (1 x N, f32), one add a round: a kernel that takes a
    while. It lets the next kernel of the stream start at once. With SIGNAL,
    ``ready[program]`` (i32) is raised by one once the program's block of y
    is stored (``ready`` is not read otherwise)."""
    sl.launch_dependents()
    program = sl.program_id(0)
    t = sl.load(x, (1, BLOCK), (0, program * BLOCK), (N, 1), (1, N))
    for _ in sl.range(0, ROUNDS):
        t = t + 1.0
    sl.store(y, t, (0, program * BLOCK), (N, 1), (1, N))
    if SIGNAL:
        sl.counter_add(ready + program, 1)


def doubled_after(y, z, ids, N, BLOCK: sl.constexpr):
    """ids[program] = program, before waiting for the previous kernel; then
    z = 2 y (1 x N, f32), y as that kernel left it."""
    program = sl.program_id(0)
    sl.store(ids, sl.full((1, 1), 1.0, sl.float32) * program.to(sl.float32), (0, program),
             (1, 1), (1, sl.num_programs(0)))
    sl.grid_dependency_wait()
    t = sl.load(y, (1, BLOCK), (0, program * BLOCK), (N, 1), (1, N))
    sl.store(z, t * 2.0, (0, program * BLOCK), (N, 1), (1, N))


def doubled_when_ready(y, z, ids, ready, N, BLOCK: sl.constexpr):
    """ids[program] = program, before waiting; then block b = (programs - 1 -
    program) of z = 2 y, once ``ready[b]`` is 1 (the blocks in the reverse
    order of the producer's programs)."""
    program = sl.program_id(0)
    sl.store(ids, sl.full((1, 1), 1.0, sl.float32) * program.to(sl.float32), (0, program),
             (1, 1), (1, sl.num_programs(0)))
    block = sl.num_programs(0) - 1 - program
    sl.counter_wait(ready + block, 1)
    t = sl.load(y, (1, BLOCK), (0, block * BLOCK), (N, 1), (1, N))
    sl.store(z, t * 2.0, (0, block * BLOCK), (N, 1), (1, N))


def tickets(counter, out):
    """out[program] = the counter's value before this program's add of 2:
    the programs' tickets, 0, 2, 4, ... in the order they ran."""
    program = sl.program_id(0)
    ticket = sl.counter_add(counter, 2)
    sl.store(out, sl.full((1, 1), 1, sl.int32) * ticket, (0, program), (1, 1),
             (1, sl.num_programs(0)))


def cluster_sums_expected(x: np.ndarray, cluster: int, block: int) -> np.ndarray:
    """What :func:`cluster_sums` writes to ``out``."""
    partials = x.reshape(-1, block).sum(axis=1, dtype=np.float64)
    return np.repeat(partials.reshape(-1, cluster).sum(axis=1), cluster)
