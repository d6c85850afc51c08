// Which servers may claim a queued job: the job's `device_kind` in the jobs table, written
//
//   cpu | cuda | cuda:sm_XY        a kind of device, or a GPU architecture (compute
//                                  capability X.Y, e.g. cuda:sm_90 for H100 and H200,
//                                  cuda:sm_100 for B200)
//   ...@NODE                       and only on the server whose --node-name is NODE (a fleet
//                                  check of one node)
//
// A server claims the jobs whose text is one of ClaimableKinds() of its devices; a job whose
// kind no server has waits, visibly, with its position among jobs of that kind.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kerneleval::server {

struct RunsOn {
  std::string kind;  // "cpu" or "cuda"
  std::string arch;  // "sm_90", or empty: any architecture
  std::string node;  // a node name, or empty: any server

  std::string Text() const;  // as the jobs table and the Job message write it
};

// INVALID_ARGUMENT naming `field` (e.g. "runs_on") and quoting the text, bounded.
absl::StatusOr<RunsOn> ParseRunsOn(absl::string_view text, absl::string_view field);

// What a device offers: its kind and, for a GPU, its compute capability ("9.0").
struct DeviceOffer {
  std::string kind;
  std::string compute_capability;
};
// "sm_90" from "9.0"; empty when the capability is not X.Y.
std::string ArchOfCapability(absl::string_view compute_capability);

// Every job kind a server with these devices on `node` (may be empty) claims: the kinds, the
// GPU architectures, and each of them pinned to `node`. Sorted, without repeats.
std::vector<std::string> ClaimableKinds(const std::vector<DeviceOffer>& devices,
                                        absl::string_view node);

// The kind without its node, for metric labels: one series per kind and architecture, not one
// per node of the fleet.
std::string KindLabel(absl::string_view device_kind);

}  // namespace kerneleval::server
