"""Finds and imports the native binding ``sage._sage`` (built by
``scripts/build-binding.sh``).

The extension is built per Python version, so it is looked up by path: an
installed ``sage._sage`` (next to this package, ``pip install .``) first,
then ``$SAGE_BINDING_DIR``, then ``build/python`` of the checkout (a source
checkout or an editable install).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from sage.jit.knobs import knobs

_REPO_ROOT = Path(__file__).resolve().parents[3]
_MODULE = "sage._sage"


def binding_dirs() -> list[Path]:
    """Where the extension is looked for, in order."""
    configured = knobs.binding_dir.get()
    dirs = [configured] if configured else []
    return dirs + [_REPO_ROOT / "build" / "python"]


def load_binding() -> ModuleType:
    """Imports ``sage._sage`` (once per process).

    Raises:
        ImportError: with the command that builds it, when it is missing.
    """
    if _MODULE in sys.modules:
        return sys.modules[_MODULE]
    names = [f"_sage{suffix}" for suffix in importlib.machinery.EXTENSION_SUFFIXES]
    for directory in [Path(__file__).resolve().parents[1], *binding_dirs()]:
        for name in names:
            path = directory / name
            if path.exists():
                loader = importlib.machinery.ExtensionFileLoader(_MODULE, str(path))
                spec = importlib.util.spec_from_file_location(_MODULE, path, loader=loader)
                module = importlib.util.module_from_spec(spec)
                loader.exec_module(module)
                sys.modules[_MODULE] = module
                return module
    raise ImportError(
        f"the sage binding (_sage{importlib.machinery.EXTENSION_SUFFIXES[0]}) is not "
        f"built: run scripts/build-binding.sh (searched {[str(d) for d in binding_dirs()]})")
