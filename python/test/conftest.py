"""Which `sage` the tests import: scripts/test.sh sets SAGE_TEST_INSTALLED=1
and runs pytest from outside the checkout, so they test the *installed*
package (a file the package lacks fails there); run by hand, they test the
source tree (python/), whatever is installed."""

import os
import sys
from pathlib import Path

_SOURCE = Path(__file__).resolve().parents[1]
INSTALLED = os.environ.get("SAGE_TEST_INSTALLED") == "1"
if not INSTALLED:
    sys.path.insert(0, str(_SOURCE))
# Test helper modules (repo_files, test_language_kernels), also for tests in
# subfolders.
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pytest  # noqa: E402


def pytest_report_header(config):
    """Which `sage` the tests run against (installed: never the checkout's)."""
    import sage
    where = Path(sage.__file__).resolve().parent
    if INSTALLED and where.is_relative_to(_SOURCE):
        raise pytest.UsageError(f"SAGE_TEST_INSTALLED=1 but sage comes from the checkout "
                                f"({where}): install it (scripts/install-package.sh)")
    return f"sage {sage.__version__} from {where}"


@pytest.fixture(scope="session")
def library():
    """The compiler library of this build (a missing one fails, not skips:
    the set-up command builds it)."""
    from sage.compiler import CompilerLibrary
    try:
        return CompilerLibrary()
    except FileNotFoundError as error:
        pytest.fail(str(error))
