// What a submission may ask of the compiler: the includes, defines, names, entries and
// architectures it may use. Pure functions, shared by the service (which rejects early, with
// the field named) and kerneleval-compile (which checks again before NVRTC sees anything).
#pragma once

#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "kerneleval/v1/submissions.pb.h"

namespace kerneleval::server::submissions {

// The virtual include that carries kernels/include/kerneleval/submission_abi.h.
inline constexpr char kAbiInclude[] = "kerneleval/submission_abi.h";
// The name NVRTC gives the source in its log: "submission.cu(12): error: ...".
inline constexpr char kSourceName[] = "submission.cu";

// The ABI version whose kerneleval_params has `bytes` bytes, for the versions before this
// server's (1: 128 bytes, 2: 136); 0 for any other size. A kernel that takes such a block was
// compiled against an old header and would misread the fields the layout moved.
int OldAbiVersion(long long bytes);
// Why such a kernel is refused, naming `field`, the entry and its version: compile it again.
std::string OldAbiRefusal(absl::string_view field, absl::string_view entry, int version);

// A bounded echo of a caller's value for an error message: the first `max` bytes, quoted,
// with the full length when it was cut ("'abc...' (70000 bytes)").
std::string Quote(absl::string_view value, std::size_t max = 48);

// Every #include of `source` (after line splicing and comments) names kAbiInclude or one of
// the CUDA headers listed in AllowedIncludes(); a computed include (#include MACRO) is
// refused. INVALID_ARGUMENT names `field` and the line.
absl::Status CheckIncludes(absl::string_view source, absl::string_view field);
const std::vector<std::string>& AllowedIncludes();  // exact names, then "prefix/*" entries

// sm_90a (H100, H200) and sm_100a (B200): the arch-specific targets of the parts served.
bool IsSupportedArch(absl::string_view arch);
// "9.0" -> "sm_90a", "10.0" -> "sm_100a"; empty for anything else.
std::string ArchForComputeCapability(absl::string_view compute_capability);

// Names, entries, defines: INVALID_ARGUMENT naming the field.
absl::Status CheckSubmissionName(absl::string_view name, absl::string_view field);
absl::Status CheckEntry(absl::string_view entry, absl::string_view field);
absl::Status CheckDefines(const google::protobuf::RepeatedPtrField<v1::Define>& defines,
                          absl::string_view field);

// The NVRTC options for a checked request: built here, never taken from the caller. The
// service passes no include dir (its headers come from memory); -I is for tools.
std::vector<std::string> NvrtcOptions(absl::string_view arch, bool fast_math,
                                      const google::protobuf::RepeatedPtrField<v1::Define>& defines,
                                      absl::string_view cuda_include_dir);

}  // namespace kerneleval::server::submissions
