#!/usr/bin/env bash
# Builds the thin Python binding (sage._sage) in seconds: g++, the Python
# headers and pybind11 only. It needs neither MLIR/LLVM nor the CUDA toolkit:
# the compiler library and libcuda.so.1 are opened at run time.
#
#   bash scripts/build-binding.sh [OUTPUT_DIR]     (default: build/python)
#
# The Python side (sage.compiler.binding) imports it from $SAGE_BINDING_DIR,
# else build/python.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-${SAGE_BINDING_DIR:-build/python}}"
python="${PYTHON:-python3}"
mkdir -p "$out"
suffix="$("$python" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')"
includes="$("$python" -m pybind11 --includes)"
target="$out/_sage$suffix"
flags=(-O2 -std=c++17 -fPIC -fvisibility=hidden -Wall -Wextra -Werror -Iinclude)
# System includes: warnings in pybind11/Python headers are not ours.
read -r -a pyflags <<< "${includes//-I/-isystem }"
objects=()
pids=()
# One compiler per source, in parallel (pybind11 headers dominate the time).
for source in python/src/*.cpp; do
  object="$out/$(basename "$source" .cpp).o"
  "${CXX:-g++}" "${flags[@]}" "${pyflags[@]}" -c "$source" -o "$object" &
  pids+=($!)
  objects+=("$object")
done
for pid in "${pids[@]}"; do wait "$pid"; done
"${CXX:-g++}" -shared "${objects[@]}" -ldl -o "$target.tmp"
rm -f "${objects[@]}"
mv -f "$target.tmp" "$target"
echo "sage: binding built ($target)"
