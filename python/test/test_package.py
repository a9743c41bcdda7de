"""The Python package: one version, its console commands (calls into the
compiler library), and what an installed copy holds. Under scripts/test.sh
(SAGE_TEST_INSTALLED=1) these run against the installed package."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import sage
from sage.compiler.library import default_library_path
from repo_files import ROOT

INSTALLED = os.environ.get("SAGE_TEST_INSTALLED") == "1"


def test_one_version_for_python_cmake_and_the_library(library):
    """sage.__version__ is what pyproject.toml (regex provider) and CMake read;
    the library reports it as its release."""
    assert re.fullmatch(r"\d+\.\d+\.\d+", sage.__version__)
    init = (ROOT / "python" / "sage" / "__init__.py").read_text()
    assert f'__version__ = "{sage.__version__}"' in init
    assert 'input = "python/sage/__init__.py"' in (ROOT / "pyproject.toml").read_text()
    assert library.version.startswith(sage.__version__ + "+")


def _console(tool: str) -> list[str]:
    """The console command: the installed script, else its entry point run
    on the `sage` these tests import."""
    if INSTALLED:
        path = shutil.which(tool)
        assert path, f"{tool} is not on PATH: the package's console scripts are missing"
        return [path]
    function = tool.replace("-", "_")
    source = str(Path(sage.__file__).resolve().parents[1])
    return [sys.executable, "-c", f"import sys; sys.path.insert(0, {source!r}); "
                                  f"from sage._cli import {function}; {function}()"]


def test_sage_opt_lists_the_dialect_through_the_library(library):
    out = subprocess.run(_console("sage-opt") + ["--show-dialects"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert re.search(r"Available Dialects: .*\bsage\b", out.stdout), out.stdout


def test_sage_translate_compiles_an_example(library, tmp_path):
    ptx = tmp_path / "qmm.ptx"
    out = subprocess.run(_console("sage-translate") + [
        str(ROOT / "examples" / "quant_matmul.mlir"), "--arch=sm_90a", "-o", str(ptx)],
        capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "// sage.kernel name=quant_matmul" in ptx.read_text()
    bad = subprocess.run(_console("sage-translate") + [str(tmp_path / "missing.mlir")],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and "sage-translate: cannot read" in bad.stderr


def test_console_command_without_the_library_says_where_it_looked(tmp_path):
    env = dict(os.environ, SAGE_COMPILER_LIBRARY=str(tmp_path / "nowhere.so"))
    out = subprocess.run(_console("sage-opt") + ["--show-dialects"], capture_output=True,
                         text=True, env=env, timeout=120)
    assert out.returncode == 1
    assert re.search(r"sage-opt: the sage compiler library is not at .*nowhere\.so "
                     r"\(reinstall the package, or set SAGE_COMPILER_LIBRARY\)", out.stderr)


@pytest.mark.skipif(not INSTALLED, reason="checks an installed package (scripts/test.sh)")
def test_installed_package_holds_the_library_and_the_binding():
    package = Path(sage.__file__).resolve().parent
    assert default_library_path() == package / "lib" / "libsage_compiler.so"
    assert default_library_path().exists()
    assert list(package.glob("_sage*.so")), "the binding is not in the package"
    for module in ("attention_ops", "integrations/transformers", "kernels/sagebwd/backward",
                   "_cli"):
        assert (package / f"{module}.py").exists(), module
