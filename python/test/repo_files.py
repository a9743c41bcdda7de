"""Loads the repository's script files (examples, benchmarks) as modules for
tests: they live outside the `sage` package and are run as scripts."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load_script(path: Path, name: str) -> ModuleType:
    """Imports the file at ``path`` as module ``name`` (registered in
    ``sys.modules`` so dataclasses and pickling inside it work)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_example(name: str) -> ModuleType:
    """``python/examples/<name>.py``."""
    return load_script(ROOT / "python" / "examples" / f"{name}.py", f"example_{name}")


def load_bench(name: str) -> ModuleType:
    """``bench/<name>.py``."""
    return load_script(ROOT / "bench" / f"{name}.py", f"bench_{name}")
