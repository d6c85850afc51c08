// What the CPU implementation's SIMD code exposes besides the operation: the instruction set
// it dispatched to on this CPU, and its dtype conversions, so that tests can hold them to
// the scalar conversions of half_types.h bit for bit.
#pragma once

#include <cstddef>

#include "kerneleval/kernels/fused_add_rmsnorm.h"

namespace kerneleval {

// Highway's name of the target FusedAddRmsNormCpu runs on here, e.g. "AVX3", "AVX2", "NEON".
const char* CpuSimdTarget();

// n elements of `dtype` to fp32 and back (round to nearest even), as the kernel converts.
void CpuToFloat(DType dtype, const void* in, float* out, std::size_t n);
void CpuFromFloat(DType dtype, const float* in, void* out, std::size_t n);

}  // namespace kerneleval
