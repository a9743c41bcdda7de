"""The tests import the *installed* `sage` (scripts/test.sh installs it and
runs pytest from outside the checkout, so a file the package lacks fails);
PYTHONPATH=python runs them on the source tree instead (the GPU script
does), and so does a machine where the package is not installed at all."""

import importlib.util
import sys
from pathlib import Path

if importlib.util.find_spec("sage") is None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# Test helper modules (repo_files, test_language_kernels), also for tests in
# subfolders.
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pytest  # noqa: E402


def pytest_report_header(config):
    """Which `sage` the tests run against."""
    import sage
    return f"sage {sage.__version__} from {Path(sage.__file__).parent}"


@pytest.fixture(scope="session")
def library():
    """The compiler library of this build (a missing one fails, not skips:
    the set-up command builds it)."""
    from sage.compiler import CompilerLibrary
    try:
        return CompilerLibrary()
    except FileNotFoundError as error:
        pytest.fail(str(error))
