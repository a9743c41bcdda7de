#!/usr/bin/env bash
# All tests: lit (compiler) then pytest (Python). GPU tests skip without a GPU.
# pytest runs from outside the checkout against the installed package
# (refreshed first), so a file the package lacks fails here.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --build build --target check-sage
bash scripts/install-package.sh
root="$PWD"
outside="$(mktemp -d)"
trap 'rm -rf "$outside"' EXIT
cd "$outside"
SAGE_TEST_INSTALLED=1 python3 -m pytest "$root/python/test" -q -p no:cacheprovider
