"""The Python examples the README points at run and pass their own checks
(on the CPU interpreter here; scripts/gpu/run.sh runs them on the GPU)."""

from __future__ import annotations

import pytest
from repo_files import load_example

@pytest.mark.parametrize("name", ["attention"])
def test_example_passes_in_the_interpreter(name, monkeypatch, capsys):
    monkeypatch.setenv("SAGE_INTERPRET", "1")
    assert load_example(name).main() == 0
    assert "CPU interpreter" in capsys.readouterr().out
