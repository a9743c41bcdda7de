"""Makes `import sage` work from a source checkout without installing."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# Test helper modules (repo_files, test_language_kernels), also for tests in
# subfolders.
sys.path.insert(0, str(Path(__file__).resolve().parent))
