#!/usr/bin/env bash
# Configures and builds kerneleval into ${BUILD_DIR:-build} through the shared compiler cache
# (scripts/lib/compiler-cache.sh). Extra arguments go to CMake; BUILD_TARGETS (space
# separated) builds only those targets.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/compiler-cache.sh
build_dir=${BUILD_DIR:-build}
mapfile -t extra < <(configure_args "$build_dir")
cmake -S . -B "$build_dir" "${extra[@]}" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" "$@"
targets=()
for t in ${BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$build_dir" -j "$(nproc)" "${targets[@]}"
