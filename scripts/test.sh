#!/usr/bin/env bash
# The test command: installs dependencies, builds, and runs every test (GPU tests skip
# where no GPU is present), then the bounded fuzz run and the sanitizer build. Extra
# arguments go to the first ctest, e.g. -L unit.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/install-python-deps.sh "${BUILD_DIR:-build}/python-venv"
scripts/build.sh
(cd "${BUILD_DIR:-build}" && ctest --output-on-failure --timeout 1200 -j "$(nproc)" "$@")
# Robustness in trees of their own: the request-validation fuzzer (clang, bounded time) and
# the unit, integration and robustness tests under ASan + UBSan with leak detection.
FUZZ_SECONDS="${FUZZ_SECONDS:-60}" scripts/fuzz.sh
scripts/sanitize.sh
