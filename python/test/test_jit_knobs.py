"""The debug switches: strict parsing, SAGE_DUMP (also on a cache hit),
SAGE_OVERRIDE_DIR, SAGE_INTERPRET."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import sage
import sage.language as sl
from sage.jit.knobs import DUMP_STAGES, KnobError, knobs


def scale(x, y, n, alpha, BLOCK: sl.constexpr = 64):
    row = sl.program_id(0) * BLOCK
    t = sl.load(x, shape=(1, BLOCK), offsets=(0, row), strides=(n, 1), bounds=(1, n))
    sl.store(y, t * alpha, offsets=(0, row), strides=(n, 1), bounds=(1, n))


@pytest.fixture(autouse=True)
def clean_env(tmp_path, monkeypatch):
    for knob in knobs.all():
        monkeypatch.delenv(knob.env, raising=False)
    monkeypatch.setenv("SAGE_CACHE_DIR", str(tmp_path / "cache"))


def compile_once(**kwargs):
    x, y = np.zeros(128, np.float32), np.zeros(128, np.float32)
    return sage.jit(scale).compile(x, y, 128, 2.0, arch="sm_90a", **kwargs)


@pytest.mark.parametrize("env, value, message", [
    ("SAGE_ALWAYS_COMPILE", "maybe", "expected one of 1, 0, true"),
    ("SAGE_INTERPRET", "2", "expected one of 1, 0, true"),
    ("SAGE_DUMP", "ptx,sass", r"unknown stage\(s\) \['sass'\]"),
    ("SAGE_DUMP", ",", "unknown stage"),
    ("SAGE_CUBIN", "sometimes", "expected one of 1, 0"),
    ("SAGE_AUTOTUNE_CACHE", "never", "expected one of 1, 0, true"),
    ("SAGE_PRINT_AUTOTUNING", "loud", "expected one of 1, 0, true"),
    ("SAGE_TUNE_ATTENTION", "auto", "expected one of 1, 0, true"),
])
def test_bad_values_are_errors_naming_the_variable(monkeypatch, env, value, message):
    monkeypatch.setenv(env, value)
    with pytest.raises(KnobError, match=f"{env}='{value}': {message}"):
        knobs.check()
    with pytest.raises(KnobError, match=env):
        compile_once()


def test_values_parse():
    assert knobs.dump.get() == frozenset() and knobs.always_compile.get() is False
    import os
    os.environ["SAGE_DUMP"] = "PTX, llvm"
    os.environ["SAGE_ALWAYS_COMPILE"] = "Yes"
    try:
        assert knobs.dump.get() == {"ptx", "llvm"} and knobs.always_compile.get() is True
        os.environ["SAGE_DUMP"] = "all"
        assert knobs.dump.get() == set(DUMP_STAGES)
    finally:
        del os.environ["SAGE_DUMP"], os.environ["SAGE_ALWAYS_COMPILE"]


def test_default_cache_dir_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("SAGE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert knobs.cache_dir.get() == tmp_path / "sage"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert knobs.cache_dir.get() == Path.home() / ".cache" / "sage"


def test_autotune_knobs_default_to_a_silent_disk_cache(monkeypatch):
    assert knobs.autotune_cache.get() is True and knobs.print_autotuning.get() is False
    assert knobs.tune_attention.get() is True
    monkeypatch.setenv("SAGE_AUTOTUNE_CACHE", "off")
    monkeypatch.setenv("SAGE_PRINT_AUTOTUNING", "on")
    monkeypatch.setenv("SAGE_TUNE_ATTENTION", "0")
    assert knobs.autotune_cache.get() is False and knobs.print_autotuning.get() is True
    assert knobs.tune_attention.get() is False
    assert knobs.output_environment() == (), "they change no compiled output"


def test_every_knob_is_documented():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "jit.md").read_text()
    for knob in knobs.all():
        assert f"`{knob.env}`" in doc, knob.env
        assert knob.doc


def test_output_changing_knobs_are_declared(monkeypatch):
    monkeypatch.setenv("SAGE_CUBIN", "0")
    monkeypatch.setenv("SAGE_DUMP", "ptx")
    assert knobs.output_environment() == (("SAGE_CUBIN", "0"),)


def test_dumps_on_compile_and_on_cache_hit(monkeypatch, tmp_path, capfd):
    monkeypatch.setenv("SAGE_DUMP", "all")
    for expected_origin in ("compiled", "cache"):
        dump = tmp_path / f"dump-{expected_origin}"
        monkeypatch.setenv("SAGE_DUMP_DIR", str(dump))
        kernel = compile_once()
        assert kernel.origin == expected_origin
        (folder,) = dump.iterdir()
        assert folder.name == f"scale-{kernel.key[:12]}"
        names = sorted(p.name for p in folder.iterdir())
        assert names == sorted(["scale.mlir", "scale.passes.mlir", "scale.llvm.mlir",
                                "scale.ll", "scale.ptx", "scale.cubin", "scale.ptxas.log",
                                "replay.sh"])
        assert (folder / "scale.mlir").read_text() == kernel.ir
        assert (folder / "scale.ptx").read_text() == kernel.ptx
        assert "IR Dump After" in (folder / "scale.passes.mlir").read_text()
        replay = (folder / "replay.sh").read_text()
        assert "--sage-to-nvvm='arch=sm_90a num-warps=4 ptx-version=84'" in replay
        assert "--num-warps=4 --ptx-version=84 -o scale.ptx" in replay
        assert f"sage: dumped ir, passes" in capfd.readouterr().err


def test_dump_of_passes_recompiles_an_entry_without_them(monkeypatch, tmp_path):
    compile_once()  # cached without the per-pass IR
    monkeypatch.setenv("SAGE_DUMP", "passes")
    monkeypatch.setenv("SAGE_DUMP_DIR", str(tmp_path / "dump"))
    assert compile_once().origin == "compiled"
    assert compile_once().origin == "cache"  # the entry now has them
    assert list((tmp_path / "dump").rglob("scale.passes.mlir"))


def test_dumped_ir_replays_with_sage_translate(monkeypatch, tmp_path):
    import subprocess
    root = Path(__file__).resolve().parents[2]
    monkeypatch.setenv("SAGE_DUMP", "ir,ptx")
    monkeypatch.setenv("SAGE_DUMP_DIR", str(tmp_path / "dump"))
    monkeypatch.setenv("SAGE_CUBIN", "0")
    kernel = compile_once()
    (ir,) = (tmp_path / "dump").rglob("scale.mlir")
    ptx = subprocess.run([str(root / "build/bin/sage-translate"), str(ir), "--arch=sm_90a",
                          "--ptx-version=84"],  # the JIT's PTX_VERSION, as replay.sh says
                         capture_output=True, text=True, check=True).stdout
    assert ptx == kernel.ptx


def test_override_mlir_and_ptx(monkeypatch, tmp_path, capfd):
    base = compile_once()
    overrides = tmp_path / "override"
    overrides.mkdir()
    monkeypatch.setenv("SAGE_OVERRIDE_DIR", str(overrides))
    assert compile_once().key != base.key  # the knob is part of the key
    edited = base.ir.replace("sage.num_warps = 4", "sage.num_warps = 8")
    (overrides / "scale.mlir").write_text(edited)
    from_mlir = compile_once()
    assert from_mlir.origin.startswith("override:") and from_mlir.info.threads == 256
    assert "using the override" in capfd.readouterr().err
    (overrides / "scale.mlir").write_text(edited.replace("sage.num_warps = 8",
                                                         "sage.num_warps = 2"))
    assert compile_once().info.threads == 64  # an edit is a new key
    (overrides / "scale.ptx").write_text(base.ptx.replace("threads=128", "threads=32"))
    from_ptx = compile_once()
    assert from_ptx.info.threads == 32 and from_ptx.cubin == b""
    (overrides / "scale.mlir").write_text("func.func @scale( {")
    (overrides / "scale.ptx").unlink()
    with pytest.raises(sage.compiler.CompilationError,
                       match=r"override/scale.mlir:1:\d+: error"):
        compile_once()


def test_interpret_runs_numpy_arguments(monkeypatch):
    monkeypatch.setenv("SAGE_INTERPRET", "1")
    monkeypatch.setenv("SAGE_COMPILER_LIBRARY", "/nonexistent/libsage_compiler.so")
    kernel = sage.jit(scale)
    x = np.arange(200, dtype=np.float32)
    y = np.zeros_like(x)
    kernel[lambda meta: ((meta["n"] + meta["BLOCK"] - 1) // meta["BLOCK"],)](
        x, y, 200, 0.5, BLOCK=32)
    np.testing.assert_array_equal(y, x * np.float32(0.5))
    halves = np.float32([1.0, 2.5, -3.0, 0.5])  # exact in bf16
    y = np.zeros(4, np.float32)
    kernel[(1,)](sl.Buffer(halves, sl.bfloat16), y, 4, 2.0)
    np.testing.assert_array_equal(y, halves * 2)
