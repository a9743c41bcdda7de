"""Thread-block clusters in the sage language: the ``num_ctas`` launch
option, ``sl.cluster_barrier``, in the interpreter (a cluster's programs in
threads), in the traced IR and the PTX (``.reqnctapercluster``, the barrier
instructions, the kernel header the launcher reads). The GPU run is in
gpu/test_jit_gpu.py."""

from __future__ import annotations

import shutil
import subprocess
import threading

import numpy as np
import pytest

import sage
import sage.language as sl
from sage.runtime import parse_kernel_header
from test_language_kernels import cluster_sums, cluster_sums_expected

SPECS = [sl.ArgSpec(sl.pointer_type(sl.float32))] * 3 + [sl.ArgSpec(sl.int32)]


def _arguments(programs: int, block: int, seed: int = 0) -> list:
    x = np.random.default_rng(seed).standard_normal(programs * block).astype(np.float32)
    return [x, np.zeros(programs, np.float32), np.zeros(programs, np.float32), x.size]


@pytest.mark.parametrize("cluster", [2, 4, 8])
def test_interpreter_runs_clusters_together(cluster):
    args = _arguments(2 * cluster, 32)
    sl.interpret(cluster_sums, 2 * cluster, args, {"CLUSTER": cluster, "BLOCK": 32},
                 num_ctas=cluster)
    np.testing.assert_allclose(args[2], cluster_sums_expected(args[0], cluster, 32), rtol=1e-5)


def test_interpreter_checks_the_grid_and_the_barrier():
    args = _arguments(6, 32)
    with pytest.raises(ValueError, match="grid's first size must be a multiple of 4, got 6"):
        sl.interpret(cluster_sums, 6, args, {"CLUSTER": 4, "BLOCK": 32}, num_ctas=4)
    with pytest.raises(ValueError, match="num_ctas must be an integer from 1 to 8"):
        sl.interpret(cluster_sums, 16, args, {"CLUSTER": 16, "BLOCK": 32}, num_ctas=16)
    with pytest.raises(sl.CompilationError, match="needs programs in clusters"):
        sl.interpret(cluster_sums, 4, _arguments(4, 32), {"CLUSTER": 4, "BLOCK": 32})


def failing(x, CLUSTER: sl.constexpr):
    """Every program but the first of each cluster fails before the barrier
    the first waits at: its view claims elements past the buffer."""
    rank = sl.program_id(0) % CLUSTER
    sl.load(x, (1, 1), (0, rank * 100), (1, 1), (1, 4 + rank * 1000))
    sl.cluster_barrier()


def test_a_failing_program_fails_its_cluster_without_a_hang():
    x = np.zeros(4, np.float32)
    with pytest.raises(sl.CompilationError, match="in-bounds element lies outside the buffer"):
        sl.interpret(failing, 4, [x], {"CLUSTER": 4}, num_ctas=4)


def uneven_barriers(x, CLUSTER: sl.constexpr):
    """Program r of a cluster reaches the barrier r + 1 times, then writes r + 1."""
    rank = sl.program_id(0) % CLUSTER
    for _ in sl.range(0, rank + 1):
        sl.cluster_barrier()
    sl.store(x, sl.full((1, 1), 1.0, sl.float32) + rank.to(sl.float32), (0, sl.program_id(0)),
             (1, 1), (1, sl.num_programs(0)))


def test_a_returned_program_no_longer_counts():
    """As on the GPU (barrier.cluster.wait waits for the threads that have
    not exited): programs that reach the barrier more often than the others
    are released once the others return, instead of waiting forever."""
    x = np.zeros(8, np.float32)
    run = threading.Thread(target=sl.interpret, args=(uneven_barriers, 8, [x], {"CLUSTER": 4}),
                           kwargs={"num_ctas": 4}, daemon=True)
    run.start()
    run.join(timeout=60)
    assert not run.is_alive(), "the cluster's programs still wait at the barrier"
    np.testing.assert_array_equal(x, [1, 2, 3, 4, 1, 2, 3, 4])


def test_trace_records_the_clusters():
    ir = sl.trace(cluster_sums, SPECS, {"CLUSTER": 4, "BLOCK": 128}, num_ctas=4)
    assert "sage.num_ctas = 4 : i32" in ir and "sage.cluster_barrier" in ir
    assert "sage.num_ctas" not in sl.trace(cluster_sums_free, SPECS[:1], {})


def cluster_sums_free(x):
    """A kernel without clusters."""
    sl.store(x, sl.full((1, 1), 1.0, sl.float32), (0, 0), (1, 1), (1, 1))


def test_trace_errors_name_the_line():
    with pytest.raises(sl.CompilationError, match=r"test_language_kernels\.py:\d+.*"
                                                  "launch with num_ctas > 1"):
        sl.trace(cluster_sums, SPECS, {"CLUSTER": 4, "BLOCK": 128})
    with pytest.raises(sl.CompilationError, match="needs sm_90 .* targets sm_80"):
        sl.trace(cluster_sums, SPECS, {"CLUSTER": 4, "BLOCK": 128}, arch="sm_80", num_ctas=4)
    with pytest.raises(ValueError, match="num_ctas must be an integer from 1 to 8, got 0"):
        sl.trace(cluster_sums, SPECS, {"CLUSTER": 4, "BLOCK": 128}, num_ctas=0)


def test_the_jit_compiles_with_the_launch_option():
    kernel = sage.jit(cluster_sums)
    args = _arguments(4, 128)
    compiled = kernel.compile(*args, CLUSTER=4, BLOCK=128, num_ctas=4, arch="sm_90a").compiled
    assert compiled.options.num_ctas == 4 and compiled.info.cluster == 4
    assert "sage.num_ctas = 4 : i32" in compiled.ir
    # Another cluster size is another specialisation.
    other = kernel.compile(*args, CLUSTER=4, BLOCK=128, num_ctas=2, arch="sm_90a").compiled
    assert other.key != compiled.key and other.info.cluster == 2


def test_the_jit_interprets_with_the_launch_option():
    kernel = sage.jit(cluster_sums)
    args = _arguments(8, 32, seed=1)
    kernel.interpret((8,), *args, CLUSTER=4, BLOCK=32, num_ctas=4)
    np.testing.assert_allclose(args[2], cluster_sums_expected(args[0], 4, 32), rtol=1e-5)
    with pytest.raises(ValueError, match="num_ctas must be an integer from 1 to 8"):
        kernel.interpret((8,), *args, CLUSTER=4, BLOCK=32, num_ctas=9)


def test_ptx_launches_clusters(library, tmp_path):
    ir = sl.trace(cluster_sums, SPECS, {"CLUSTER": 4, "BLOCK": 128}, num_ctas=4)
    ptx = library.compile(ir, "sm_90a")
    assert parse_kernel_header(ptx)["cluster_sums"].cluster == 4
    assert ".reqnctapercluster 4, 1, 1" in ptx
    arrive = ptx.index("barrier.cluster.arrive.aligned;")
    assert ptx.index("barrier.cluster.wait.aligned;") > arrive
    # Without clusters the header says nothing (older PTX parses the same).
    plain = library.compile(sl.trace(cluster_sums_free, SPECS[:1], {}), "sm_90a")
    assert "cluster=" not in plain.splitlines()[0]
    assert parse_kernel_header(plain)["cluster_sums_free"].cluster == 1
    ptxas = shutil.which("ptxas")
    if ptxas:
        (tmp_path / "k.ptx").write_text(ptx)
        out = subprocess.run([ptxas, "-arch=sm_90a", str(tmp_path / "k.ptx"), "-o",
                              str(tmp_path / "k.cubin")], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
