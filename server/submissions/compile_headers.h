// The headers a submission may include, read once into memory so that NVRTC gets them through
// nvrtcCreateProgram's headers/includeNames and is given no include path: a name the set
// lacks (any path of the filesystem, absolute or not) is "could not open source file" before
// the OS is even asked, and the compile jail (compile_jail.h) refuses the open where NVRTC
// would still try (an absolute path).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kerneleval::server::submissions {

// Parallel lists for nvrtcCreateProgram: names[i] is how an #include spells texts[i].
struct HeaderSet {
  std::vector<std::string> names;
  std::vector<std::string> texts;
};

// The allowed headers (AllowedIncludes(): exact names, and every file under a "prefix/*"
// entry) found under `include_dirs` (the toolkit's include directory and its cccl/, searched
// in that order), and every header they include, transitively. Each is named by its path
// relative to the directory it was found in; a quoted include relative to the including
// file ("info.h", "../cooperative_groups.h") is rewritten to that name, since NVRTC looks an
// in-memory header up by the name as written. An include that resolves to no file is left
// as it is (it fails only where the preprocessor reaches it). INVALID_ARGUMENT where an
// allowed exact name is found in no directory.
absl::StatusOr<HeaderSet> LoadAllowedHeaders(const std::vector<std::string>& include_dirs);

}  // namespace kerneleval::server::submissions
