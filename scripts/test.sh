#!/usr/bin/env bash
# The test command: installs dependencies, builds, and runs every test (GPU tests skip
# where no GPU is present), then the bounded fuzz run and the sanitizer build. Extra
# arguments go to the first ctest, e.g. -L unit.
#
# Every stage is timed; the breakdown is printed at the end, pass or fail, and kept in
# ${BUILD_DIR:-build}/test-times.txt with the slowest tests of each ctest run.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
source scripts/lib/stage-timing.sh

stage install-deps scripts/install-deps.sh
stage python-deps scripts/install-python-deps.sh "$build_dir/python-venv"
stage build scripts/build.sh
stage tests ctest --test-dir "$build_dir" --output-on-failure --timeout 1200 -j "$(nproc)" "$@"
slowest_tests "$build_dir" tests
# Robustness in trees of their own: the request-validation fuzzer (clang, bounded time) and
# the unit, integration and robustness tests under ASan + UBSan with leak detection.
stage fuzz-build scripts/fuzz.sh build
stage fuzz-run env FUZZ_SECONDS="${FUZZ_SECONDS:-60}" scripts/fuzz.sh run
stage sanitizer-build scripts/sanitize.sh build
stage sanitizer-tests scripts/sanitize.sh test
slowest_tests "${SANITIZE_BUILD_DIR:-build-asan}" sanitizer-tests
