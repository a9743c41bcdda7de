"""Makes `import sage` work from a source checkout without installing."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# Test helper modules (repo_files, test_language_kernels), also for tests in
# subfolders.
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def library():
    """The compiler library of this build (a missing one fails, not skips:
    the set-up command builds it)."""
    from sage.compiler import CompilerLibrary
    try:
        return CompilerLibrary()
    except FileNotFoundError as error:
        pytest.fail(str(error))
