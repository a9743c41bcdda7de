#!/usr/bin/env bash
# Builds the thin Python binding (sage._sage) in seconds with CMake, pybind11
# and the Python headers (python/CMakeLists.txt, the same rules pip install .
# uses). It needs neither MLIR/LLVM nor the CUDA toolkit: the compiler
# library and libcuda.so.1 are opened at run time.
#
#   bash scripts/build-binding.sh [OUTPUT_DIR]     (default: build/python)
#
# The Python side (sage.compiler.binding) imports it from the installed
# package, else $SAGE_BINDING_DIR, else build/python.
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(realpath -m "${1:-${SAGE_BINDING_DIR:-build/python}}")"
python="$(command -v "${PYTHON:-python3}")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake "${generator[@]}" -S python -B "$work" -DPython_EXECUTABLE="$python" \
  -DSAGE_BINDING_OUTPUT_DIR="$out" >/dev/null
cmake --build "$work" -j "${SAGE_JOBS:-2}" >/dev/null
echo "sage: binding built ($(ls "$out"/_sage*.so))"
