// Reading what NVRTC says about a compiled program: the ptxas -v lines of its log (registers,
// spills, stack, shared memory per kernel). Pure text parsing, so that it is tested without
// NVRTC; what is read from the PTX itself is in ptx_code.h.
#pragma once

#include <map>
#include <string>
#include "absl/strings/string_view.h"

#include "kerneleval/v1/submissions.pb.h"

namespace kerneleval::server::submissions {

// Per lowered kernel name, from lines such as
//   ptxas info    : Compiling entry function '_Z1kPf' for 'sm_90a'
//   ptxas         .     0 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
//   ptxas info    : Used 32 registers, used 1 barriers, 256 bytes smem, 400 bytes cmem[0]
// Only lowered_name and the figures are filled in.
std::map<std::string, v1::KernelResources> ParsePtxasInfo(absl::string_view log);

}  // namespace kerneleval::server::submissions
