#!/usr/bin/env bash
# Builds kerneleval for the GPU (sm_90a, sm_100a) and gathers the binaries with every shared
# library they need that is not part of glibc, libstdc++ or the NVIDIA driver into
# bundle/gpu (and bundle/gpu.tgz), so that they run on a GPU machine that has no gRPC,
# protobuf or Abseil. Then: scripts/gpu-run.sh there, from the repository root.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build-gpu}
cmake -S . -B "$build_dir" -DKERNELEVAL_CUDA=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
targets=(kerneleval-server kerneleval-device-host kerneleval kernels_gpu_test service_gpu_test
         kerneleval-kernel-bench rpc_overhead_bench)
cmake --build "$build_dir" -j "$(nproc)" --target "${targets[@]}"

bundle=bundle/gpu
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib"
for t in "${targets[@]}"; do
  find "$build_dir" -type f -name "$t" -perm -u+x -exec cp {} "$bundle/bin/" \;
done
# glibc, libstdc++/libgcc and the driver's libraries come from the GPU machine itself.
skip='^(libc|libm|libdl|librt|libpthread|ld-linux.*|libstdc\+\+|libgcc_s|libcuda|libnvidia-.*)\.so'
for b in "$bundle"/bin/*; do
  ldd "$b" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
  name=$(basename "$lib")
  [[ "$name" =~ $skip ]] || cp -L "$lib" "$bundle/lib/"
done
# Stripped and compressed, the bundle travels well under the 64 MiB a device call carries.
strip --strip-unneeded "$bundle"/bin/* "$bundle"/lib/* 2>/dev/null || true
tar -C bundle -czf bundle/gpu.tgz gpu
du -sh "$bundle" bundle/gpu.tgz
