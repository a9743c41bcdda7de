"""JIT costs on the GPU machine: cold compilation by stage, and the warm
launch overhead of a tiny kernel through sage vs an equivalent Triton kernel
in the same process.

    python3 bench/jit_overhead.py OUT.json [--launches 5000] [--repeats 7]

Needs torch, a GPU, the compiler library and the binding
(scripts/build-binding.sh); Triton is optional (its rows are skipped
without it). Prints a table and writes every number as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python" / "examples"))

import torch  # noqa: E402

import sage  # noqa: E402
import sage.language as sl  # noqa: E402
from quant_matmul import quant_matmul  # noqa: E402  (the README's example kernel)


def scale(x, y, n, alpha, BLOCK: sl.constexpr = 256):
    """The tiny kernel: y = alpha * x on one BLOCK per program."""
    row = sl.program_id(0) * BLOCK
    t = sl.load(x, shape=(1, BLOCK), offsets=(0, row), strides=(n, 1), bounds=(1, n))
    sl.store(y, t * alpha, offsets=(0, row), strides=(n, 1), bounds=(1, n))


def tile_product(a, b, c, n, BLOCK: sl.constexpr = 64):
    """A kernel with TMA tensor maps: C = A Bᵀ of one 64 x 64 tile (f16 A
    and B, n x 64, copied by the copy engine on sm_90a)."""
    at = sl.load(a, shape=(BLOCK, 64), offsets=(0, 0), strides=(64, 1), bounds=(n, 64))
    bt = sl.load(b, shape=(BLOCK, 64), offsets=(0, 0), strides=(64, 1), bounds=(n, 64))
    sl.store(c, sl.matmul(at, bt, contract=(1, 1)), offsets=(0, 0), strides=(BLOCK, 1),
             bounds=(n, BLOCK))


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def cold_stages(results: dict[str, Any]) -> None:
    """Each stage of compiling quant_matmul once, timed on its own."""
    from sage.compiler import CompileOptions, CompilerLibrary
    from sage.compiler.binding import load_binding
    from sage.jit.compiler import trace_specialization
    from sage.jit.specialize import arch_for_capability

    binding = load_binding()
    device = torch.cuda.current_device()
    arch = arch_for_capability(*torch.cuda.get_device_capability(device))
    stages: dict[str, float] = {}
    stages["load library (dlopen)"], library = timed(CompilerLibrary)
    m, n, k = 4096, 4096, 4096
    a = torch.empty(m, k, dtype=torch.float16, device="cuda")
    b = torch.empty(n, k, dtype=torch.float16, device="cuda")
    c = torch.empty(m, n, device="cuda")
    kernel = sage.jit(quant_matmul)
    blocks = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=128)
    call = kernel.bind((a, b, c, m, n, k), dict(blocks))
    stages["trace (Python DSL -> sage IR)"], ir = timed(
        lambda: trace_specialization(quant_matmul, "quant_matmul", call.keys,
                                     call.constexprs, arch, call.options))
    stages["compile (sage IR -> PTX, in-process)"], out = timed(
        lambda: library.compile_all(ir, CompileOptions(arch=arch)))
    with tempfile.TemporaryDirectory() as folder:
        ptx = Path(folder) / "k.ptx"
        ptx.write_text(out.ptx)
        ptxas = str(library.find_ptxas())
        stages["ptxas (PTX -> cubin)"], _ = timed(lambda: subprocess.run(
            [ptxas, f"-arch={arch}", "-v", str(ptx), "-o", str(ptx.with_suffix(".cubin"))],
            check=True, capture_output=True))
        cubin = ptx.with_suffix(".cubin").read_bytes()
    compiled = kernel.compile(a, b, c, m, n, k, **blocks)
    # The signature includes the global-scratch pointer when the kernel has one.
    info, signature = compiled.info, compiled.signature
    stages["module load (cubin)"], _ = timed(lambda: binding.Kernel(
        cubin, "quant_matmul", device, info.threads, info.shared_memory, signature))
    stages["module load (PTX, driver JIT)"], _ = timed(lambda: binding.Kernel(
        out.ptx.encode(), "quant_matmul", device, info.threads, info.shared_memory,
        signature))

    os.environ["SAGE_ALWAYS_COMPILE"] = "1"
    stages["end to end, first launch (no cache)"], _ = timed(lambda: (
        sage.jit(quant_matmul)[(64, 64)](a, b, c, m, n, k, **blocks),
        torch.cuda.synchronize()))
    del os.environ["SAGE_ALWAYS_COMPILE"]
    stages["end to end, first launch (disk cache hit)"], _ = timed(lambda: (
        sage.jit(quant_matmul)[(64, 64)](a, b, c, m, n, k, **blocks),
        torch.cuda.synchronize()))
    results["cold_compile_s"] = stages
    results["arch"] = arch


def per_launch(launch: Callable[[], None], launches: int, repeats: int) -> float:
    """Median over repeats of the host time per launch (seconds)."""
    for _ in range(100):
        launch()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(launches):
            launch()
        samples.append((time.perf_counter() - start) / launches)
        torch.cuda.synchronize()
    return statistics.median(samples)


def warm_launch(results: dict[str, Any], launches: int, repeats: int) -> None:
    n = 256
    x = torch.randn(n, device="cuda")
    y = torch.empty(n, device="cuda")
    rows: dict[str, float] = {}
    kernel = sage.jit(scale)
    launch = kernel[(1,)]
    rows["sage: kernel[grid](x, y, n, alpha)"] = per_launch(
        lambda: launch(x, y, n, 1.0), launches, repeats)
    compiled = kernel.compile(x, y, n, 1.0)
    loaded = compiled.load(x.get_device())
    stream = torch.cuda.current_stream().cuda_stream
    args = (x.data_ptr(), y.data_ptr(), n, 1.0)
    rows["sage: binding Kernel.launch (floor)"] = per_launch(
        lambda: loaded.launch(1, 1, 1, stream, args), launches, repeats)
    # Tensor maps: encoded by the launcher (two maps, new addresses on
    # every launch: both re-encoded), or built on the device with a global
    # scratch allocated per launch (SAGE_TENSOR_MAPS=device).
    pairs = [tuple(torch.randn(64, 64, device="cuda", dtype=torch.float16) for _ in range(2))
             for _ in range(2)]
    c = torch.empty(64, 64, device="cuda")
    product = sage.jit(tile_product)
    step = iter(range(1 << 62))
    previous = os.environ.get("SAGE_TENSOR_MAPS")
    for where in ("host", "device"):
        os.environ["SAGE_TENSOR_MAPS"] = where
        rows[f"sage: TMA kernel, {where} maps"] = per_launch(
            lambda: product[(1,)](*pairs[next(step) % 2], c, 64), launches, repeats)
    os.environ.pop("SAGE_TENSOR_MAPS")
    if previous is not None:
        os.environ["SAGE_TENSOR_MAPS"] = previous
    try:
        import triton
        import triton.language as tl

        @triton.jit
        def triton_scale(x, y, n, alpha, BLOCK: tl.constexpr):
            offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            mask = offsets < n
            tl.store(y + offsets, tl.load(x + offsets, mask=mask) * alpha, mask=mask)

        rows["triton: kernel[grid](x, y, n, alpha, BLOCK=256)"] = per_launch(
            lambda: triton_scale[(1,)](x, y, n, 1.0, BLOCK=256), launches, repeats)
        results["triton_version"] = triton.__version__
    except ImportError:
        results["triton_version"] = None
    rows["torch: y.copy_(x) (reference)"] = per_launch(lambda: y.copy_(x), launches, repeats)
    results["warm_launch_us"] = {name: value * 1e6 for name, value in rows.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", type=Path, help="where the JSON goes")
    parser.add_argument("--launches", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=7)
    options = parser.parse_args()
    os.environ.setdefault("SAGE_CACHE_DIR", tempfile.mkdtemp(prefix="sage-bench-cache-"))
    results: dict[str, Any] = {
        "device": torch.cuda.get_device_name(), "torch": torch.__version__,
        "python": sys.version.split()[0], "sage_cache_dir": os.environ["SAGE_CACHE_DIR"]}
    cold_stages(results)
    warm_launch(results, options.launches, options.repeats)

    print(f"\ncold compilation of quant_matmul ({results['arch']}), one run each")
    print(f"{'stage':48} {'ms':>10}")
    for name, seconds in results["cold_compile_s"].items():
        print(f"{name:48} {seconds * 1e3:10.2f}")
    print(f"\nwarm launch overhead (host time per launch, median of {options.repeats} x "
          f"{options.launches})")
    warm = results["warm_launch_us"]
    triton_us = next((v for k, v in warm.items() if k.startswith("triton")), None)
    print(f"{'launch':52} {'us':>8} {'vs triton':>10}")
    for name, us in warm.items():
        ratio = f"{us / triton_us:9.2f}x" if triton_us else "        -"
        print(f"{name:52} {us:8.2f} {ratio:>10}")
    if triton_us:
        results["sage_vs_triton_warm_ratio"] = \
            warm["sage: kernel[grid](x, y, n, alpha)"] / triton_us
    options.output.parent.mkdir(parents=True, exist_ok=True)
    options.output.write_text(json.dumps(results, indent=2, sort_keys=True))
    print(f"\nwritten to {options.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
