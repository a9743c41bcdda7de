#!/usr/bin/env bash
# Set-up on a fresh Debian 12 machine: apt and pip dependencies, then the
# build (Release, warnings are errors). Re-running it is cheap.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

as_root apt-get update -qq
as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools \
  cmake ninja-build g++ zlib1g-dev libzstd-dev libgtest-dev >/dev/null

python3 -m pip install -q --disable-pip-version-check -r python/requirements-dev.txt

BUILD_TYPE="${SAGE_BUILD_TYPE:-Release}"
cmake -G Ninja -S . -B build -DCMAKE_BUILD_TYPE="$BUILD_TYPE"
# Two jobs: a translation unit with MLIR headers takes ~2 GB to compile.
cmake --build build -j "${SAGE_JOBS:-2}"
# The Python package `sage` (distribution sage-mlir, pyproject.toml) with the
# console commands sage-opt and sage-translate. scikit-build-core builds in
# the same tree (build/), so the C++ above is not compiled again: pip adds
# the binding (sage._sage) and installs the package with the library.
bash scripts/install-package.sh
echo "sage: set-up done (build/bin/sage-opt; python3 -c 'import sage' anywhere)"
