"""The JIT's disk cache: hits, a miss on every key change, atomic entries
under concurrent writers, corrupted entries recompiled."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import sage
import sage.language as sl
from sage.compiler import CompilerLibrary
from sage.jit.cache import FileCache

HERE = Path(__file__).resolve().parent


def scale(x, y, n, alpha, BLOCK: sl.constexpr = 64):
    row = sl.program_id(0) * BLOCK
    t = sl.load(x, shape=(1, BLOCK), offsets=(0, row), strides=(n, 1), bounds=(1, n))
    sl.store(y, t * alpha, offsets=(0, row), strides=(n, 1), bounds=(1, n))


def scale_plus_one(x, y, n, alpha, BLOCK: sl.constexpr = 64):
    row = sl.program_id(0) * BLOCK
    t = sl.load(x, shape=(1, BLOCK), offsets=(0, row), strides=(n, 1), bounds=(1, n))
    sl.store(y, t * alpha + 1.0, offsets=(0, row), strides=(n, 1), bounds=(1, n))


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch) -> Path:
    for knob in ("SAGE_DUMP", "SAGE_OVERRIDE_DIR", "SAGE_ALWAYS_COMPILE", "SAGE_CUBIN",
                 "SAGE_INTERPRET"):
        monkeypatch.delenv(knob, raising=False)
    monkeypatch.setenv("SAGE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def compile_once(fn=scale, *args, arch="sm_90a", name="scale", **kwargs):
    """A fresh JITFunction (empty in-memory cache) compiling one call."""
    x, y = np.zeros(128, np.float32), np.zeros(128, np.float32)
    args = args or (x, y, 128, 2.0)
    return sage.jit(fn, name=name).compile(*args, arch=arch, **kwargs)


def entries(root: Path) -> list[Path]:
    return sorted(root.rglob("*.sage"))


def test_entry_round_trip_and_damage(tmp_path):
    cache = FileCache(tmp_path)
    blobs = {"ptx": b"// ptx", "cubin": bytes(range(256)), "ir": b""}
    path = cache.put("ab" * 32, blobs)
    assert cache.get("ab" * 32) == blobs and cache.get("cd" * 32) is None
    data = path.read_bytes()
    for damaged in (data[:-1], data[:10], data[:-3] + b"xyz", b"garbage", b""):
        path.write_bytes(damaged)
        assert cache.get("ab" * 32) is None
        assert not path.exists(), "an invalid entry is removed"
    assert not list(tmp_path.rglob("*.tmp"))


def test_second_compilation_is_a_cache_hit(cache_dir):
    first = compile_once()
    assert first.origin == "compiled" and first.cubin[:4] == b"\x7fELF"
    second = compile_once()
    assert second.origin == "cache" and second.key == first.key
    assert second.ptx == first.ptx and second.cubin == first.cubin and second.ir == first.ir
    assert len([e for e in entries(cache_dir) if e.stem == first.key]) == 1


@pytest.mark.parametrize("change", [
    "source", "constexpr", "dtype", "divisibility", "alignment", "num_warps", "maxnreg",
    "target",
    "python_sources", "library_version", "environment"])
def test_every_key_change_is_a_miss(change, monkeypatch):
    base = compile_once()
    assert compile_once().origin == "cache"
    x, y = np.zeros(128, np.float32), np.zeros(128, np.float32)
    if change == "source":
        changed = compile_once(scale_plus_one)
    elif change == "constexpr":
        changed = compile_once(BLOCK=32)
    elif change == "dtype":
        changed = compile_once(scale, x.astype(np.float16), y, 128, 2.0)
    elif change == "divisibility":
        changed = compile_once(scale, x, y, 100, 2.0)
    elif change == "alignment":
        changed = compile_once(scale, x[4:], y, 124, 2.0)
    elif change == "num_warps":
        changed = compile_once(num_warps=8)
    elif change == "maxnreg":
        changed = compile_once(maxnreg=64)
        assert ".maxnreg 64" in changed.ptx and ".maxnreg" not in base.ptx
    elif change == "target":
        changed = compile_once(arch="sm_80")
    elif change == "python_sources":
        monkeypatch.setattr("sage.jit.compiler.python_sources_hash", lambda: "other")
        changed = compile_once()
    elif change == "library_version":
        monkeypatch.setattr(CompilerLibrary, "version", property(lambda self: "0.2.0+x"))
        changed = compile_once()
    else:
        monkeypatch.setenv("SAGE_CUBIN", "0")
        changed = compile_once()
        assert changed.cubin == b""
    assert changed.origin == "compiled" and changed.key != base.key


def row_sums(x, out, n, BLOCK: sl.constexpr = 16):
    acc = sl.zeros((1, BLOCK), sl.float32)
    for r in sl.range(0, n, 1):
        acc = acc + sl.load(x, (1, BLOCK), (r, 0), (BLOCK, 1), (n, BLOCK))
    sl.store(out, acc, (0, 0), (BLOCK, 1), (1, BLOCK))


def test_num_stages_is_a_specialisation_and_in_the_disk_key():
    """A launch's num_stages is another specialisation (in memory); on disk it
    is another entry where it changes the IR (a kernel with loops), and the
    same entry where it cannot (a kernel without)."""
    kernel = sage.jit(row_sums)
    x, out = np.zeros((8, 16), np.float32), np.zeros(16, np.float32)
    plain = kernel.compile(x, out, 8, arch="sm_90a")
    staged = kernel.compile(x, out, 8, arch="sm_90a", num_stages=3)
    assert staged.compiled is not plain.compiled and staged.key != plain.key
    assert (plain.num_stages, staged.num_stages) == (1, 3)
    assert "sage.num_stages = 3 : i32" in staged.ir and "num_stages" not in plain.ir
    assert kernel.compile(x, out, 8, arch="sm_90a", num_stages=3).compiled is staged.compiled
    loopless = sage.jit(scale)
    base = loopless.compile(*np.zeros((2, 128), np.float32), 128, 2.0, arch="sm_90a")
    other = loopless.compile(*np.zeros((2, 128), np.float32), 128, 2.0, arch="sm_90a",
                             num_stages=3)
    assert other.compiled is not base.compiled and other.num_stages == 3
    assert (other.origin, other.key) == ("cache", base.key)


def test_knobs_that_keep_output_keep_the_key(monkeypatch, tmp_path):
    base = compile_once()
    monkeypatch.setenv("SAGE_DUMP", "ptx")
    monkeypatch.setenv("SAGE_DUMP_DIR", str(tmp_path / "dump"))
    again = compile_once()
    assert again.origin == "cache" and again.key == base.key


def test_always_compile_skips_both_caches(monkeypatch):
    kernel = sage.jit(scale)
    x, y = np.zeros(128, np.float32), np.zeros(128, np.float32)
    first = kernel.compile(x, y, 128, 2.0, arch="sm_90a")
    assert kernel.compile(x, y, 128, 2.0, arch="sm_90a").compiled is first.compiled
    monkeypatch.setenv("SAGE_ALWAYS_COMPILE", "1")
    again = kernel.compile(x, y, 128, 2.0, arch="sm_90a")
    assert again.compiled is not first.compiled and again.origin == "compiled"


def test_corrupted_entry_is_recompiled(cache_dir):
    first = compile_once()
    (path,) = [e for e in entries(cache_dir) if e.stem == first.key]
    data = bytearray(path.read_bytes())
    data[-100] ^= 0xFF  # one flipped bit pattern in the cubin/ptx payload
    path.write_bytes(bytes(data))
    again = compile_once()
    assert again.origin == "compiled" and again.ptx == first.ptx
    assert compile_once().origin == "cache"
    path.write_bytes(path.read_bytes()[:len(data) // 2])  # truncated
    assert compile_once().origin == "compiled"


_WORKER = """
import sys
sys.path.insert(0, {python!r})
sys.path.insert(0, {tests!r})
from test_jit_cache import compile_once
kernel = compile_once()
print(kernel.key, kernel.origin)
"""


def test_concurrent_writers_leave_one_valid_entry(cache_dir):
    # The workers import the `sage` this process tests (installed or source).
    script = _WORKER.format(python=str(Path(sage.__file__).resolve().parents[1]),
                            tests=str(HERE))
    env = dict(os.environ, SAGE_CACHE_DIR=str(cache_dir))
    workers = [subprocess.Popen([sys.executable, "-c", script], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for _ in range(4)]
    results = [worker.communicate(timeout=300) for worker in workers]
    assert all(worker.returncode == 0 for worker in workers), results
    keys = {out.split()[0] for out, _ in results}
    assert len(keys) == 1
    (key,) = keys
    assert [e.stem for e in entries(cache_dir)].count(key) == 1
    assert not list(cache_dir.rglob("*.tmp"))
    assert FileCache(cache_dir).get(key)["ptx"].startswith(b"// sage.kernel name=scale")
    assert compile_once().origin == "cache"
