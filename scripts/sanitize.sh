#!/usr/bin/env bash
# Builds the service and the unit, integration and robustness tests with AddressSanitizer +
# UndefinedBehaviorSanitizer (KERNELEVAL_SANITIZE, CUDA off) in its own tree and runs those
# tests there with leak detection on. The load test runs for KERNELEVAL_LOAD_SECONDS
# (default 8 here); its memory bound is not checked under ASan.
#
#   scripts/sanitize.sh [build|test]   (default: both)
#
# Environment: SANITIZE_BUILD_DIR (default build-asan at the repository root),
# JOBS (default: the number of cores), CTEST_ARGS (extra ctest arguments).
set -euo pipefail
step="${1:-all}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${SANITIZE_BUILD_DIR:-$root/build-asan}"
jobs="${JOBS:-$(nproc)}"
# The labels this tree runs, and so the only test binaries it builds.
labels="unit;integration;robustness"

if [ "$step" != test ]; then
  source "$root/scripts/lib/compiler-cache.sh"
  mapfile -t extra < <(configure_args "$build")
  cmake -S "$root" -B "$build" "${extra[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DKERNELEVAL_SANITIZE=ON -DKERNELEVAL_CUDA=OFF -DKERNELEVAL_BUILD_TESTS=ON \
    -DKERNELEVAL_TEST_LABELS="$labels" -DKERNELEVAL_TEST_TIMEOUT_SCALE=4
  cmake --build "$build" -j"$jobs"
fi
[ "$step" != build ] || exit 0

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$root/tests/robustness/lsan.supp:print_suppressions=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
export KERNELEVAL_LOAD_SECONDS="${KERNELEVAL_LOAD_SECONDS:-8}"
# shellcheck disable=SC2086
ctest --test-dir "$build" -L "^(${labels//;/|})\$" \
  --output-on-failure -j"$jobs" --timeout 900 ${CTEST_ARGS:-}
