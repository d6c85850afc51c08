// The promises of kerneleval_params.flags (kernels/include/kerneleval/submission_abi.h),
// worked out for one call from its pointers and shapes: a flag is set only where it holds,
// so a kernel may trust it instead of checking per thread.
//
// Pure; safe to call from any thread.
#pragma once

#include <cstdint>

#include "kerneleval/kernels/fused_add_rmsnorm.h"

namespace kerneleval::server::submissions {

// KERNELEVAL_FLAG_ROWS_ALIGNED16 where every tensor of `args` (and `scratch`, if not null) is
// 16-byte aligned and a row is a whole number of 16-byte vectors (every stride is `hidden`);
// KERNELEVAL_FLAG_INDEX32 where batch * hidden < 2^31.
std::uint32_t AbiFlags(const FusedAddRmsNormArgs& args, const void* scratch);

}  // namespace kerneleval::server::submissions
