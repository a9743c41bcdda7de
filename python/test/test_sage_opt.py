"""sage-opt as a user meets it: robustness on broken input, and docs in sync.

These tests need the compiler built by scripts/setup.sh (CI always builds).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("SAGE_BUILD_DIR", ROOT / "build"))
SAGE_OPT = BUILD / "bin" / "sage-opt"


@pytest.fixture(scope="module")
def sage_opt() -> Path:
    if not SAGE_OPT.exists():
        pytest.fail(f"{SAGE_OPT} is missing: run scripts/setup.sh first")
    return SAGE_OPT


def _run(sage_opt: Path, text: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(sage_opt), "-", *args], input=text, text=True,
                          capture_output=True, timeout=60)


def _cut_points(text: str) -> list[int]:
    """Every line end and the middle of every line."""
    points, start = [], 0
    for line in text.splitlines(keepends=True):
        points += [start + len(line) // 2, start + len(line)]
        start += len(line)
    return points


@pytest.mark.parametrize("source", ["test/Dialect/Sage/ops.mlir",
                                    "examples/sagebwd_forward.mlir"])
def test_truncated_input_is_a_diagnostic_not_a_crash(sage_opt, source):
    text = (ROOT / source).read_text()
    for cut in _cut_points(text):
        result = _run(sage_opt, text[:cut], "--sage-prepare")
        assert result.returncode in (0, 1), (
            f"cut at {cut}: exit {result.returncode}\n{result.stderr[-2000:]}")
        assert "Stack dump" not in result.stderr, f"cut at {cut}"
        if result.returncode == 1:
            assert "error:" in result.stderr, f"cut at {cut}: silent failure"


def test_dialect_and_passes_are_registered(sage_opt):
    dialects = subprocess.run([str(sage_opt), "--show-dialects"], text=True,
                              capture_output=True, check=True).stdout
    listed = dialects.split(":", 1)[1].strip().split(",")
    assert "sage" in listed and "sagegpu" in listed
    help_text = subprocess.run([str(sage_opt), "--help"], text=True,
                               capture_output=True, check=True).stdout
    for name in ("--sage-decompose", "--sage-attach-target", "--sage-prepare",
                 "--sage-select-mma", "--sagegpu-assign-layouts",
                 "--convert-sage-to-llvm", "--sage-finalize-kernels",
                 "--sage-to-nvvm"):
        assert name in help_text


def test_committed_dialect_docs_are_current(sage_opt):
    """docs/dialect is generated from ODS; refresh with the sage-docs target."""
    subprocess.run(["cmake", "--build", str(BUILD), "--target", "mlir-doc"],
                   check=True, capture_output=True)
    for name in ("Sage.md", "SagePasses.md", "SageToLLVMPasses.md", "SageGPU.md",
                 "SageGPUPasses.md"):
        generated = (BUILD / "docs" / "dialect" / name).read_text()
        committed = (ROOT / "docs" / "dialect" / name).read_text()
        assert committed == generated, (
            f"docs/dialect/{name} is stale: run "
            "`cmake --build build --target sage-docs`")
