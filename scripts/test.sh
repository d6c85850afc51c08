#!/usr/bin/env bash
# The test command: installs dependencies, builds, and runs every test (GPU tests skip
# where no GPU is present). Extra arguments go to ctest, e.g. -L unit.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure --timeout 1200 -j "$(nproc)" "$@"
