#include "server/submissions/abi_flags.h"

#include <limits>

#include "kerneleval/submission_abi.h"

namespace kerneleval::server::submissions {
namespace {

bool Aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

}  // namespace

std::uint32_t AbiFlags(const FusedAddRmsNormArgs& args, const void* scratch) {
  std::uint32_t flags = 0;
  // Null pointers (residual_out in OUTPUT, no scratch) are aligned: nothing is read there.
  const bool aligned = Aligned16(args.hidden_states) && Aligned16(args.residual) &&
                       Aligned16(args.weight) && Aligned16(args.output) &&
                       Aligned16(args.residual_out) && Aligned16(scratch);
  const std::uint64_t row_bytes = static_cast<std::uint64_t>(args.hidden) * ElementSize(args.dtype);
  if (aligned && args.hidden > 0 && row_bytes % 16 == 0) flags |= KERNELEVAL_FLAG_ROWS_ALIGNED16;
  if (args.batch >= 0 && args.hidden > 0 &&
      args.batch <= std::numeric_limits<std::int32_t>::max() / args.hidden) {
    flags |= KERNELEVAL_FLAG_INDEX32;
  }
  return flags;
}

}  // namespace kerneleval::server::submissions
