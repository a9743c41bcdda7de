"""Kernels traced to sage IR: the text (FileCheck-style), sage-opt round trips,
and PTX through the compiler library validated by ptxas."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import sage.language as sl
from test_language_kernels import KERNELS, quant_matmul_example

ROOT = Path(__file__).resolve().parents[2]
SAGE_OPT = Path(os.environ.get("SAGE_BUILD_DIR", ROOT / "build")) / "bin" / "sage-opt"
PTXAS = os.environ.get("SAGE_PTXAS") or shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"


def traced(kernel: str, **options) -> str:
    fn, specs, constexprs = KERNELS[kernel]
    return sl.trace(fn, specs, constexprs, **options)


def check(text: str, *patterns: str) -> None:
    """FileCheck-like: each regex matches, in order, after the previous match."""
    position = 0
    for pattern in patterns:
        found = re.compile(pattern, re.M).search(text, position)
        assert found, f"pattern {pattern!r} not found after offset {position} in:\n{text}"
        position = found.end()


def sage_opt(text: str, *args: str) -> subprocess.CompletedProcess:
    if not SAGE_OPT.exists():
        pytest.fail(f"{SAGE_OPT} is missing: run scripts/setup.sh first")
    return subprocess.run([str(SAGE_OPT), "-", *args], input=text, text=True,
                          capture_output=True, timeout=120)


def test_quant_matmul_ir():
    text = traced("quant_matmul", name="qmm", arch="sm_80", num_warps=8)
    file = re.escape(quant_matmul_example.__file__)
    check(text,
          r'^module attributes \{sage.target = "sm_80", sage.num_warps = 8 : i32\} \{',
          r"func.func @qmm\(%a: !sage.ptr<f16> \{sage.alignment = 16 : i64\}, "
          r"%b: !sage.ptr<f16>, %c: !sage.ptr<f32>, %M: i32, %N: i32, "
          r"%K: i32 \{sage.divisibility = 16 : i64\}\) attributes \{sage.kernel\}",
          r"sage.program_id 0", r"sage.program_id 1",
          r"arith.constant dense<0.0> : tensor<64x64xf32>",
          r"scf.for %(\d+) = %\d+ to %K step %\d+ iter_args\(%\d+ = %\d+\) "
          r"-> \(tensor<64x64xf32>\) : i32 \{",
          r"arith.extsi %\d+ : i32 to i64",
          r"sage.load %a\[%\d+, %\d+\] strides \[%\d+, %\d+\] bounds \[%\d+, %\d+\] : "
          r"!sage.ptr<f16> -> tensor<64x64xf16> loc\(\"" + file + r'":\d+:\d+\)',
          r"sage.quantize #sage.int8<per_block> %\d+ : tensor<64x64xf16> -> "
          r"tensor<64x64xi8>, tensor<1x1xf32>",
          r"sage.qmatmul %\d+#0\[%\d+#1\], %\d+#0\[%\d+#1\] acc %\d+ contract\(1, 1\)",
          r"scf.yield %\d+ : tensor<64x64xf32>",
          r"^    \} loc", r"sage.store %\d+, %c\[", r"^    return$", r"^\}$")


def test_attention_forward_ir():
    text = traced("attention_forward")
    check(text, r"sage.addptr %q, %\d+ : !sage.ptr<f16>",
          r"sage.addptr %k, %\d+ : !sage.ptr<f16>",
          r"arith.constant dense<0xFF800000> : tensor<64x1xf32>",
          r"sage.iota 0 : tensor<64x1xi32>",
          r":3 = scf.for .* iter_args\(.*\) -> \(tensor<64x64xf32>, tensor<64x1xf32>, "
          r"tensor<64x1xf32>\) : i32",
          r"sage.iota 1 : tensor<1x64xi32>",
          r"arith.cmpi slt, ", r"arith.cmpi sle, ", r"arith.andi ",
          r"arith.select %\d+, %\d+, %\d+ : tensor<64x64xi1>, tensor<64x64xf32>",
          r"sage.softmax_update %\d+, %\d+, %\d+ scale 0.18033\d* : "
          r"tensor<64x64xf32>, tensor<64x1xf32>",
          r"arith.divf %\d+#4, %\d+ : tensor<64x1xf32>",
          r"sage.quantize #sage.int8<per_token> %\d+#0 scale %\d+ : tensor<64x64xf32>, "
          r"tensor<64x1xf32> -> tensor<64x64xi8>, tensor<64x1xf32>",
          r"sage.broadcast %\d+#3 : tensor<64x1xf32> -> tensor<64x64xf32>",
          r"sage.qmatmul .* acc %\d+ contract\(1, 0\) : tensor<64x64xi8>, tensor<64x1xf32>",
          r"scf.yield", r"math.log2 %\d+#1 : tensor<64x1xf32>",
          r"sage.store %\d+, %\d+\[%\d+, %\d+\] strides \[%\d+, %\d+\] bounds \[%\d+, %\d+\] "
          r": tensor<64x1xf32>, !sage.ptr<f32>")


def test_unsigned_scheme_and_lhs_trace():
    """sl.uint8_per_token traces as #sage.uint8 and its product as a qmatmul
    with lhs_unsigned (the tensor cores' u8 x s8 form)."""
    def kernel(p, v, o):
        x = sl.load(p, (64, 64), (0, 0), (64, 1), (64, 64))
        vt = sl.load(v, (64, 64), (0, 0), (64, 1), (64, 64))
        q, s = sl.quantize(x, sl.uint8_per_token, scale=sl.full((64, 1), 0.1, sl.float32),
                           saturate=False)
        out = sl.qmatmul(q, s, vt, sl.full((1, 1), 1.0, sl.float32), rhs_sigma16=True)
        sl.store(o, out, (0, 0), (64, 1), (64, 64))

    text = sl.trace(kernel, [sl.ArgSpec.pointer(sl.float32), sl.ArgSpec.pointer(sl.int8),
                             sl.ArgSpec.pointer(sl.float32)], {})
    assert "sage.quantize #sage.uint8<per_token>" in text
    assert "contract(1, 1) rhs_sigma16 lhs_unsigned :" in text


def test_unsigned_bytes_widen_unsigned_in_the_ir():
    """uint8 widens with arith.extui and arith.uitofp (int8 with the signed
    forms)."""
    def kernel(p, o, f):
        x = sl.load(p, (64, 64), (0, 0), (64, 1), (64, 64))
        q, _ = sl.quantize(x, sl.uint8_per_token)
        sl.store(o, sl.sum(q.to(sl.int32), 1), (0, 0), (1, 0), (64, 1))
        sl.store(f, q.to(sl.float32), (0, 0), (64, 1), (64, 64))

    text = sl.trace(kernel, [sl.ArgSpec.pointer(sl.float32), sl.ArgSpec.pointer(sl.int32),
                             sl.ArgSpec.pointer(sl.float32)], {})
    assert "arith.extui" in text and "arith.uitofp" in text
    assert "arith.extsi" not in text and "arith.sitofp" not in text


def test_constexpr_if_is_python():
    fn, specs, constexprs = KERNELS["attention_forward"]
    plain = sl.trace(fn, specs, {**constexprs, "CAUSAL": False})
    assert "arith.cmpi sle" not in plain and "arith.andi" not in plain


def test_every_op_ir():
    text = traced("every_op")
    check(text, r"sage.num_programs 0", r"arith.remsi", r"arith.divsi",
          r"sage.smooth %\d+ axis 0 : tensor<32x32xf16> -> tensor<32x32xf32>, tensor<1x32xf32>",
          r"sage.quantize #sage.int8<per_token, rna>",
          r"sage.dequantize #sage.int8<per_token, rna> %\d+#0, %\d+#1 : tensor<32x32xi8>, "
          r"tensor<32x1xf32> -> tensor<32x32xf32>",
          r"sage.matmul %\d+, %\d+ contract\(0, 0\) : tensor<32x32xbf16>, tensor<32x32xbf16>",
          r"arith.sitofp %\d+ : tensor<32x32xi8> to tensor<32x32xf32>",
          r"arith.minimumf", r"math.absf", r"arith.negf", r"arith.maximumf", r"math.log2",
          r"math.exp2", r"math.sqrt", r"sage.reduce min %\d+ axis 0",
          r"arith.xori %\d+, %\d+ : tensor<32x32xi1>", r"arith.ori",
          r"sage.splat %\d+ : f32 -> tensor<32x32xf32>",
          r"^    %\d+ = scf.for .* : i32 \{", r"^      %\d+ = scf.for %\d+ = %\d+ to ",
          r"sage.reduce sum", r"arith.muli %\d+, %\d+ : i32",
          r"arith.truncf %\d+ : tensor<32x32xf32> to tensor<32x32xbf16>",
          r"sage.store atomic_add %\d+, %acc\[")


def test_loop_bounds_widen_to_i64():
    def kernel(x, n):
        acc = sl.zeros((1, 1), sl.float32)
        for i in sl.range(n):
            acc = acc + sl.load(x, (1, 1), (i, 0), (1, 1), (n, 1))
        sl.store(x, acc, (0, 0), (1, 1), (1, 1))

    text = sl.trace(kernel, [sl.ArgSpec.pointer(sl.float32), sl.ArgSpec.scalar(sl.int64)], {})
    check(text, r"arith.constant 0 : i64", r"scf.for %\d+ = %\d+ to %n step .* : i64")


def test_leading_dimensions_are_view_entries():
    """The batch and head of a view are its first offsets, strides and
    bounds; sage-opt accepts the ops."""
    def kernel(x, b, h, n):
        t = sl.load(x, (16, 16), (b, h, 0, 0), (n * 256, 256, 16, 1), (2, 4, n, 16))
        sl.store(x, t, (b, h, 16, 0), (n * 256, 256, 16, 1), (2, 4, n, 16))

    text = sl.trace(kernel, [sl.ArgSpec.pointer(sl.float32)] + [sl.ArgSpec.scalar(sl.int32)] * 3,
                    {})
    check(text, r"sage.load %x\[%\d+, %\d+, %\d+, %\d+\] strides \[(%\w+, ){3}%\w+\] "
                r"bounds \[(%\w+, ){3}%\w+\]",
          r"sage.store %\d+, %x\[(%\d+, ){3}%\d+\]")
    assert sage_opt(text).returncode == 0


def test_num_stages_is_recorded_on_the_loop():
    """sl.range(..., num_stages=S) becomes the scf.for's sage.num_stages (S >
    1); sage-opt accepts it, and the interpreter runs the loop as it is."""
    def kernel(x, n, STAGES: sl.constexpr):
        acc = sl.zeros((1, 1), sl.float32)
        for i in sl.range(0, n, 1, num_stages=STAGES):
            acc = acc + sl.load(x, (1, 1), (i, 0), (1, 1), (n, 1))
        sl.store(x, acc, (0, 0), (1, 1), (1, 1))

    specs = [sl.ArgSpec.pointer(sl.float32), sl.ArgSpec.scalar(sl.int32)]
    staged = sl.trace(kernel, specs, {"STAGES": 3})
    check(staged, r"^    \} \{sage.num_stages = 3 : i32\} loc\(")
    assert sage_opt(staged).returncode == 0
    assert "num_stages" not in sl.trace(kernel, specs, {"STAGES": 1})
    x = np.arange(4, dtype=np.float32)
    sl.interpret(kernel, 1, [x, 4], {"STAGES": 3})
    assert x[0] == 6.0


def two_loops(x, n, STAGES: sl.constexpr):
    """Sums x[0:n] twice: a loop that gives no num_stages, then one that gives STAGES."""
    acc = sl.zeros((1, 1), sl.float32)
    for i in sl.range(0, n, 1):
        acc = acc + sl.load(x, (1, 1), (i, 0), (1, 1), (n, 1))
    for j in sl.range(0, n, 1, num_stages=STAGES):
        acc = acc + sl.load(x, (1, 1), (j, 0), (1, 1), (n, 1))
    sl.store(x, acc, (0, 0), (1, 1), (1, 1))


def loop_stages(text: str) -> list[str]:
    """The attributes of each scf.for of ``text``, in order ("" for none)."""
    return [found.group(1) or "" for found in
            re.finditer(r"^    \}( \{sage\.num_stages = \d+ : i32\})? loc\(", text, re.M)]


def test_launch_num_stages_is_the_default_of_loops_that_give_none():
    """sl.trace(..., num_stages=S) stages the loops that give no num_stages;
    an explicit num_stages wins, 1 included (opting the loop out). The default,
    1, records nothing, as an explicit 1 does."""
    specs = [sl.ArgSpec.pointer(sl.float32), sl.ArgSpec.scalar(sl.int32)]
    three, two = " {sage.num_stages = 3 : i32}", " {sage.num_stages = 2 : i32}"
    assert loop_stages(sl.trace(two_loops, specs, {"STAGES": 2}, num_stages=3)) == [three, two]
    assert loop_stages(sl.trace(two_loops, specs, {"STAGES": 1}, num_stages=3)) == [three, ""]
    assert loop_stages(sl.trace(two_loops, specs, {"STAGES": 2})) == ["", two]
    assert sl.trace(two_loops, specs, {"STAGES": 1}) == sl.trace(two_loops, specs, {"STAGES": 1},
                                                                 num_stages=1)
    assert "num_stages" not in sl.trace(two_loops, specs, {"STAGES": 1})
    # The launch's stages last only for its trace.
    assert loop_stages(sl.trace(two_loops, specs, {"STAGES": 1})) == ["", ""]
    x = np.arange(4, dtype=np.float32)
    sl.interpret(two_loops, 1, [x, 4], {"STAGES": 3})
    assert x[0] == 12.0


def test_trace_is_deterministic():
    assert traced("attention_forward") == traced("attention_forward")
    assert traced("every_op") == traced("every_op")


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_sage_opt_reads_and_verifies(name):
    text = traced(name)
    result = sage_opt(text)
    assert result.returncode == 0, result.stderr
    prepared = sage_opt(text, "--sage-prepare=arch=sm_90a num-warps=4")
    assert prepared.returncode == 0, prepared.stderr


def test_locations_point_at_the_kernel_source():
    text = traced("half_matmul")
    line = next(i for i, src in enumerate(Path(__file__).with_name(
        "test_language_kernels.py").read_text().splitlines(), 1) if "sl.matmul(at, bt" in src)
    assert re.search(rf'sage.matmul .* loc\("[^"]*test_language_kernels.py":{line}:\d+\)', text)
    result = sage_opt(text, "--mlir-print-debuginfo")
    assert f"test_language_kernels.py\":{line}:" in result.stdout


def _ptxas(ptx: str, arch: str, tmp_path: Path) -> None:
    if not Path(PTXAS).exists():
        return  # only this step needs the CUDA toolkit
    path = tmp_path / f"kernel_{arch}.ptx"
    path.write_text(ptx)
    result = subprocess.run([PTXAS, f"-arch={arch}", "-v", str(path), "-o", os.devnull],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_compiles_to_ptx_accepted_by_ptxas(library, name, arch, tmp_path):
    ptx = library.compile(traced(name, arch=arch), arch=arch)
    assert f"// sage.kernel name={KERNELS[name][0].__name__} " in ptx
    _ptxas(ptx, arch, tmp_path)


@pytest.mark.parametrize("function", ["exp", "log"])
def test_natural_exp_and_log_compile(function, tmp_path):
    script = (
        "import sage.language as sl\n"
        "from sage.compiler import CompilerLibrary\n"
        "def kernel(x, n):\n"
        "    t = sl.load(x, (32, 32), (0, 0), (32, 1), (n, 32))\n"
        f"    sl.store(x, sl.{function}(t), (0, 0), (32, 1), (n, 32))\n"
        "text = sl.trace(kernel, [sl.ArgSpec.pointer(sl.float32), "
        "sl.ArgSpec.scalar(sl.int32)], {})\n"
        "CompilerLibrary().compile(text, arch='sm_90a')\n")
    path = tmp_path / "kernel.py"
    path.write_text(script)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
    result = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                            env=env, timeout=300)
    assert result.returncode == 0, result.stderr


def test_the_collector_is_paused_around_the_loop_rewrites_ast_work():
    """CPython 3.11's AST conversions check their recursion depth, which a
    collection running finalizers midway can upset ("AST constructor
    recursion depth mismatch", seen in this suite): the rewrite parses and
    compiles with the collector paused, and restores it as it found it."""
    import gc

    from sage.language.loops import _collector_paused

    assert gc.isenabled()
    with _collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with _collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
