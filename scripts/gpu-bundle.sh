#!/usr/bin/env bash
# Builds kerneleval for the GPU (sm_90a, sm_100a) and gathers the binaries with every shared
# library they need that is not part of glibc, libstdc++ or the NVIDIA driver into
# bundle/gpu (and bundle/gpu.tgz), so that they run on a GPU machine that has no gRPC,
# protobuf or Abseil. Then: scripts/gpu-run.sh there, from the repository root.
#
# Also, for the peers of scripts/torch_peers.py (the GPU machine has no internet):
#   FLASHINFER_INCLUDE=<flashinfer-python wheel>/flashinfer/data/include builds FlashInfer's
#     CUDA FusedAddRMSNorm into bundle/gpu/lib/libkerneleval_flashinfer.so;
#   PEER_WHEELS=<folder> copies its wheels (liger-kernel) into bundle/gpu/wheels.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build-gpu}
targets=(kerneleval-server kerneleval-device-host kerneleval-planted-device-host kerneleval
         kerneleval-compile
         submission_launcher_gpu_test kernels_gpu_test service_gpu_test call_checks_gpu_test
         tenants_gpu_test
         kerneleval-kernel-bench rpc_overhead_bench launch_path_bench)
# BUNDLE_TARGETS (space separated): only these, e.g. the server, CLI and device hosts without the
# GPU test binaries, to leave room for PEER_WHEELS within what a device call carries.
if [ -n "${BUNDLE_TARGETS:-}" ]; then read -ra targets <<<"$BUNDLE_TARGETS"; fi
# BUNDLE_ONLY=1: gather what "$build_dir" already holds (a missing target is skipped).
if [ -z "${BUNDLE_ONLY:-}" ]; then
  source scripts/lib/compiler-cache.sh
  mapfile -t extra < <(configure_args "$build_dir")
  cmake -S . -B "$build_dir" "${extra[@]}" -DKERNELEVAL_CUDA=ON -DCMAKE_BUILD_TYPE=Release \
    >/dev/null
  cmake --build "$build_dir" -j "$(nproc)" --target "${targets[@]}"
fi

bundle=bundle/gpu
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib"
for t in "${targets[@]}"; do
  find "$build_dir" -type f -name "$t" -perm -u+x -exec cp {} "$bundle/bin/" \;
done
# Debug sections left behind (a RelWithDebInfo tree's server is ~100 MB with them): a device
# call carries at most 64 MiB.
strip --strip-debug "$bundle"/bin/*
# glibc, libstdc++/libgcc and the driver's libraries come from the GPU machine itself, and
# so do NVRTC and nvJitLink (200 MB, more than a device call carries): its CUDA toolkit has
# them (gpu-env.sh puts /usr/local/cuda/lib64 on the loader path after the bundle).
skip='^(libc|libm|libdl|librt|libpthread|ld-linux.*|libstdc\+\+|libgcc_s|libcuda|libnvidia-.*|libnvrtc.*|libnvJitLink)\.so'
for b in "$bundle"/bin/*; do
  ldd "$b" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
  name=$(basename "$lib")
  [[ "$name" =~ $skip ]] || cp -L "$lib" "$bundle/lib/"
done
# CUPTI's range profiler (DRAM bytes) opens these at run time; ldd does not list them.
cupti=$(find "$bundle/lib" -name 'libcupti.so*' | head -n 1)
if [ -n "$cupti" ]; then
  cupti_dir=$(dirname "$(ldd "$bundle/bin/kerneleval-device-host" | awk '/libcupti/ {print $3}')")
  for lib in libnvperf_host.so libnvperf_target.so; do
    if [ -f "$cupti_dir/$lib" ]; then cp -L "$cupti_dir/$lib" "$bundle/lib/"; fi
  done
fi
# The Triton example's PTX and its `kerneleval submit` flags (scripts/gpu-cheat-matrix.sh ranks
# it), compiled here by the Python tests' Triton: the GPU machine's own Triton is another
# version, and the service takes PTX from any.
python=${PYTHON:-build/python-venv/bin/python}
if "$python" -c 'import triton, kerneleval.triton' 2>/dev/null; then
  "$python" examples/submissions/triton/add_rmsnorm.py --emit "$bundle/triton" 2>/dev/null
  "$python" tests/gpu/cheats/triton_cheats.py --emit "$bundle/triton" 2>/dev/null
fi
# The CuTe DSL and TileLang examples the same way (scripts/gpu-ptx-example.sh, the cheat
# matrix): their wheels are larger than what the GPU machine can be sent, and they need no GPU
# to compile. TileLang needs PyTorch, which the tests' virtualenv leaves out:
# TILELANG_PYTHON names an interpreter that has both.
if "$python" -c 'import cutlass.cute, kerneleval.cute' 2>/dev/null; then
  "$python" examples/submissions/cute/add_rmsnorm.py --emit "$bundle/cute" 2>/dev/null
fi
tilelang_python=${TILELANG_PYTHON:-$python}
if "$tilelang_python" -c 'import tilelang, kerneleval.tilelang' 2>/dev/null; then
  "$tilelang_python" examples/submissions/tilelang/add_rmsnorm.py --emit "$bundle/tilelang" \
    >/dev/null 2>&1
fi
if [ -n "${FLASHINFER_INCLUDE:-}" ]; then
  nvcc -O3 -std=c++17 -shared -Xcompiler -fPIC -gencode arch=compute_90a,code=sm_90a \
    -gencode arch=compute_100a,code=sm_100a -I"$FLASHINFER_INCLUDE" \
    -o "$bundle/lib/libkerneleval_flashinfer.so" scripts/peers/flashinfer_add_rmsnorm.cu
fi
if [ -n "${PEER_WHEELS:-}" ]; then
  mkdir -p "$bundle/wheels"
  cp "$PEER_WHEELS"/*.whl "$bundle/wheels/"
fi
# Stripped and compressed, the bundle travels well under the 64 MiB a device call carries.
strip --strip-unneeded "$bundle"/bin/* "$bundle"/lib/*.so* 2>/dev/null || true
tar -C bundle -czf bundle/gpu.tgz.partial gpu && mv bundle/gpu.tgz.partial bundle/gpu.tgz  # whole or not at all
du -sh "$bundle" bundle/gpu.tgz
