// What a submission's id looks like: "sub-" and a content hash. Names of this form belong to
// the submissions registry, never to a device's own implementations; the store keeps a
// result's submission hash for them. One spelling for the server, the store and the client.
#pragma once

#include <string>

namespace kerneleval {

inline constexpr char kSubmissionIdPrefix[] = "sub-";

inline bool IsSubmissionId(const std::string& name) {
  return name.compare(0, sizeof(kSubmissionIdPrefix) - 1, kSubmissionIdPrefix) == 0;
}

}  // namespace kerneleval
