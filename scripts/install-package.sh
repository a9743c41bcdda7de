#!/usr/bin/env bash
# (Re)installs the Python package from this checkout into the current
# python3, building in build/ (pyproject.toml: build-dir), so only what is
# out of date is compiled. scripts/setup.sh runs it after the CMake build,
# scripts/test.sh before the tests (they test the installed package).
#
#   bash scripts/install-package.sh [extra pip arguments]
#
# Offline (the GPU machine: no network, no MLIR): the build backend must be
# installed already, and a built compiler library is packaged as it is:
#   bash scripts/install-package.sh -Ccmake.define.SAGE_PREBUILT_COMPILER=/path/libsage_compiler.so
set -euo pipefail
cd "$(dirname "$0")/.."
export CMAKE_BUILD_PARALLEL_LEVEL="${SAGE_JOBS:-2}"
# No build isolation: no network needed, and the build tree's CMake cache
# keeps pointing at this Python. Release unless SAGE_BUILD_TYPE says
# otherwise, as in setup.sh (another type would rebuild build/).
python3 -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps \
  -Ccmake.build-type="${SAGE_BUILD_TYPE:-Release}" "$@" .
