#!/usr/bin/env bash
# Builds the request-validation fuzzer with clang (libFuzzer + AddressSanitizer +
# UndefinedBehaviorSanitizer, the whole tree instrumented for coverage) in its own tree and
# runs it for a bounded time from a seed corpus of small valid requests and the built-in
# suites. Exits non-zero when the fuzzer finds a crash; the input is left in
# BUILD/fuzz-artifacts/ and can be replayed with `BUILD/tests/robustness/fuzz_request_validation FILE`.
#
#   scripts/fuzz.sh [build|run]   (default: both)
#
# Environment: FUZZ_SECONDS (default 60), FUZZ_BUILD_DIR (default build-fuzz at the
# repository root), JOBS (default: the number of cores).
set -euo pipefail
step="${1:-all}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${FUZZ_BUILD_DIR:-$root/build-fuzz}"
seconds="${FUZZ_SECONDS:-60}"
jobs="${JOBS:-$(nproc)}"

for tool in clang clang++; do
  command -v "$tool" >/dev/null || { echo "fuzz.sh: $tool not found" >&2; exit 2; }
done

if [ "$step" != run ]; then
  source "$root/scripts/lib/compiler-cache.sh"
  mapfile -t extra < <(configure_args "$build")
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" "${extra[@]}" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer" \
    -DKERNELEVAL_FUZZ=ON -DKERNELEVAL_CUDA=OFF -DKERNELEVAL_BUILD_TESTS=ON
  cmake --build "$build" -j"$jobs" --target fuzz_request_validation fuzz_seed_corpus
fi
[ "$step" != build ] || exit 0

fuzzer="$build/tests/robustness/fuzz_request_validation"
seeds="$build/fuzz-seeds"
corpus="$build/fuzz-corpus"  # kept between runs: what the fuzzer learnt stays
artifacts="$build/fuzz-artifacts"
mkdir -p "$seeds" "$corpus" "$artifacts"
"$build/tests/robustness/fuzz_seed_corpus" "$seeds"
cp "$root"/suites/*.json "$seeds/"

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
"$fuzzer" "$corpus" "$seeds" \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
  -print_final_stats=1 -artifact_prefix="$artifacts/"
