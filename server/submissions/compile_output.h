// Reading what NVRTC says about a compiled program: the ptxas -v lines of its log (registers,
// spills, stack, shared memory per kernel) and the parameter list of a kernel in its PTX.
// Pure text parsing, so that it is tested without NVRTC.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include "kerneleval/v1/submissions.pb.h"

namespace kerneleval::server::submissions {

// Per lowered kernel name, from lines such as
//   ptxas info    : Compiling entry function '_Z1kPf' for 'sm_90a'
//   ptxas         .     0 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
//   ptxas info    : Used 32 registers, used 1 barriers, 256 bytes smem, 400 bytes cmem[0]
// Only lowered_name and the figures are filled in.
std::map<std::string, v1::KernelResources> ParsePtxasInfo(absl::string_view log);

// The byte size of each .param of `.entry <lowered_name>(...)` in `ptx`, in order; nullopt
// when the PTX has no such entry.
std::optional<std::vector<long long>> PtxEntryParamBytes(absl::string_view ptx,
                                                         absl::string_view lowered_name);

// Whether `.entry <lowered_name>` of `ptx` can execute griddepcontrol.wait: the instruction is
// in its body or in a .func its body names, transitively (a name in an indirect call's
// target list counts; comments are not code). nullopt when the PTX has no such entry. A
// presence test only: a wait on a path never taken still counts, which the chained checks of
// hot and graph replay catch where overlap would pay (docs/submissions.md).
std::optional<bool> PtxEntryWaitsForGrid(absl::string_view ptx, absl::string_view lowered_name);

}  // namespace kerneleval::server::submissions
