// Module limits: what a compiled submission may ask of a GPU merely by being loaded. A 4 KB
// source declaring `__device__ char a[100ull << 30]` compiles in 50 ms and takes 100 GiB of
// device memory at cuModuleLoadData; `__device__ char a[64 << 20] = {1}` is a 64 MB cubin.
// Both are read from the cubin here, on the CPU, at registration: before any device host
// ever loads it. The cubin is hostile bytes (it is whatever came out of a compile of the
// caller's text), so the ELF is read with every offset and size checked.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kerneleval::server::submissions {

struct ModuleLimits {
  std::uint64_t max_cubin_bytes = std::uint64_t{4} << 20;     // --max-submission-cubin-bytes
  std::uint64_t max_static_bytes = std::uint64_t{256} << 20;  // --max-submission-static-bytes
};

// Bytes of device memory the module's variables take at load: for every section named
// .nv.global* (__device__, __managed__; .nv.global.init when initialized) or .nv.constant*
// (__constant__, the kernels' parameter banks), the larger of its size and the end of the
// furthest symbol the symbol table places in it, summed (saturating). Both are needed: NVRTC
// 13.0 writes a 100 GiB __device__ array as a symbol of that size in a .nv.global of 4 KB.
// INVALID_ARGUMENT where `elf` is no well-formed little-endian ELF64.
absl::StatusOr<std::uint64_t> CubinStaticDeviceBytes(absl::string_view elf);

// INVALID_ARGUMENT naming submission.source and the flag where the cubin is larger than
// max_cubin_bytes, is not a well-formed ELF64, or declares more than max_static_bytes.
absl::Status CheckModuleLimits(absl::string_view cubin, const ModuleLimits& limits);

}  // namespace kerneleval::server::submissions
