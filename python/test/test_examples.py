"""The Python examples the README points at run and pass their own checks
(on the CPU interpreter here; scripts/gpu/run.sh runs them on the GPU)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["attention"])
def test_example_passes_in_the_interpreter(name, monkeypatch, capsys):
    monkeypatch.setenv("SAGE_INTERPRET", "1")
    assert _load(name).main() == 0
    assert "CPU interpreter" in capsys.readouterr().out
