#!/usr/bin/env bash
# All tests: lit (compiler) then pytest (Python). GPU tests skip without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --build build --target check-sage
python3 -m pytest python/test -q
