// A kernel's own parameter list, bound to the values of one call (KernelLaunch.params): how a
// kernel written in Triton, CuTe DSL, TileLang or plain CUDA receives the call's tensors and
// shape without the struct ABI. The struct ABI is the binding of one PARAM_SOURCE_ABI_PARAMS,
// and an empty list means that binding, so that every kernel launches through one path.
//
// Pure: checked at registration against the sizes read from the entry's PTX, at load against
// the module's own parameter records, and filled per launch; tested on the CPU.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kerneleval/kernels/fused_add_rmsnorm.h"
#include "kerneleval/submission_abi.h"
#include "kerneleval/v1/submissions.pb.h"

namespace kerneleval::server::submissions {

inline constexpr int kMaxKernelParams = 64;
// A PARAM_SOURCE_SCRATCH buffer: device memory the submission holds for as long as it is
// loaded, so bounded like its module.
inline constexpr std::uint64_t kMaxScratchParamBytes = std::uint64_t{64} << 20;
// A PARAM_SOURCE_STRUCT parameter: at most this many fields (128 bytes at 8 each), and at
// most this many structs per kernel (a CuTe DSL kernel passes one per tensor).
inline constexpr int kMaxStructFields = 16;
inline constexpr int kMaxStructParams = 16;

// Where a struct parameter's fields lie: each at a multiple of its size (C's natural
// alignment), the struct rounded up to its largest field.
struct StructLayout {
  std::vector<std::size_t> offsets;
  std::vector<std::size_t> field_bytes;
  std::size_t bytes = 0;
};
StructLayout LayoutOf(const v1::KernelParam& param);

// The binding of every kernel of `plan` alone: at most kMaxKernelParams parameters, each with
// a source, a name of letters, digits and _ (at most 64), a constant only where its source
// takes one, a scratch size of 1 byte to kMaxScratchParamBytes, a struct's 1 to
// kMaxStructFields fields each a pointer, integer or float of a valid size,
// PARAM_SOURCE_PLAN_SCRATCH only in a plan that asks for scratch, PARAM_SOURCE_ABI_PARAMS at most
// once. INVALID_ARGUMENT names `field`.kernels[i].params[j].
absl::Status ValidateParamBinding(const v1::LaunchPlan& plan, const std::string& field);

// Kernel `kernel`'s binding against the byte size of each parameter its entry takes
// (`param_bytes`: from the PTX at registration, from the loaded module at load): as many
// parameters as bound, a pointer in 8 bytes, an integer or float in 4 or 8, the struct in
// KERNELEVAL_PARAMS_BYTES, a bound struct in its layout's size. With no binding, the struct ABI's
// rule: exactly one kerneleval_params, and a block of an older ABI refused by its version.
// INVALID_ARGUMENT names `field`.params[j], or `field`.entry for the struct ABI.
absl::Status CheckParamSizes(const v1::KernelLaunch& kernel,
                             const std::vector<long long>& param_bytes, const std::string& field);

// The ABI parameters of one call of a plan's kernel `index` of `count`.
kerneleval_params MakeParams(const FusedAddRmsNormArgs& args, void* scratch,
                             std::int64_t scratch_bytes, int sm_count, int index, int count);

// What a binding reads of one launch.
struct CallValues {
  const FusedAddRmsNormArgs* args = nullptr;
  void* plan_scratch = nullptr;  // [batch, hidden] of the dtype, where the plan asks
  std::int64_t plan_scratch_bytes = 0;
  int sm_count = 0;
  int kernel_index = 0;
  int kernel_count = 1;
  // One device buffer per PARAM_SOURCE_SCRATCH parameter of this kernel, in parameter order.
  const std::vector<void*>* scratch_buffers = nullptr;
};

// The argument block of one launch: the bytes of every parameter and the pointer array
// cuLaunchKernel reads them through. Filled by BindParams; lives on the launcher's stack.
class ParamBlock {
 public:
  void** pointers() { return pointers_.data(); }

 private:
  friend bool BindParams(const v1::KernelLaunch&, const std::vector<std::size_t>&,
                         const CallValues&, ParamBlock*);
  // Left uninitialized: BindParams writes every entry a launch reads, and a launch path
  // should not clear 1 KiB it does not use.
  std::array<std::uint64_t, kMaxKernelParams> scalars_;
  std::array<std::array<std::uint64_t, kMaxStructFields>, kMaxStructParams> structs_;
  kerneleval_params abi_;
  std::array<void*, kMaxKernelParams> pointers_;
};

// Fills `block` for a launch of `kernel`, whose parameters have the sizes `param_bytes` (as
// CheckParamSizes accepted). False where a value does not fit its parameter: a batch, hidden
// or stride of 2^31 or more for a 4-byte integer, or a constant out of its range; the launch
// is then refused, never run on a truncated value.
bool BindParams(const v1::KernelLaunch& kernel, const std::vector<std::size_t>& param_bytes,
                const CallValues& call, ParamBlock* block);

// The binding's PARAM_SOURCE_SCRATCH sizes, in parameter order.
std::vector<std::uint64_t> ScratchParamBytes(const v1::KernelLaunch& kernel);

}  // namespace kerneleval::server::submissions
