#include "server/queue/runs_on.h"

#include <set>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/bounded_text.h"

namespace kerneleval::server {
namespace {

bool AllDigits(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!absl::ascii_isdigit(c)) return false;
  }
  return true;
}

// A node name as Kubernetes writes one (a DNS subdomain): letters, digits, '-' and '.'.
bool IsNodeName(absl::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  for (char c : s) {
    if (!absl::ascii_isalnum(c) && c != '-' && c != '.' && c != '_') return false;
  }
  return true;
}

}  // namespace

std::string RunsOn::Text() const {
  std::string text = kind;
  if (!arch.empty()) absl::StrAppend(&text, ":", arch);
  if (!node.empty()) absl::StrAppend(&text, "@", node);
  return text;
}

absl::StatusOr<RunsOn> ParseRunsOn(absl::string_view text, absl::string_view field) {
  auto refuse = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": ", Quote(std::string_view(text.data(), text.size())), " ", why,
        "; write cpu, cuda or cuda:sm_XY (a GPU architecture, e.g. cuda:sm_90), optionally "
        "followed by @NODE"));
  };
  RunsOn r;
  absl::string_view device = text;
  if (const std::size_t at = text.find('@'); at != absl::string_view::npos) {
    device = text.substr(0, at);
    r.node = std::string(text.substr(at + 1));
    if (!IsNodeName(r.node)) return refuse("has no node name after '@' that a node could have");
  }
  absl::string_view arch;
  const std::size_t colon = device.find(':');
  const bool has_arch = colon != absl::string_view::npos;
  if (has_arch) {
    arch = device.substr(colon + 1);
    device = device.substr(0, colon);
  }
  if (device != "cpu" && device != "cuda") return refuse("names no kind of device");
  r.kind = std::string(device);
  if (has_arch) {
    if (r.kind != "cuda") return refuse("gives an architecture to a device that has none");
    if (!absl::StartsWith(arch, "sm_") || !AllDigits(arch.substr(3)) || arch.size() < 5 ||
        arch.size() > 6) {
      return refuse("has an architecture that is not sm_ and a compute capability");
    }
    r.arch = std::string(arch);
  }
  return r;
}

std::string ArchOfCapability(absl::string_view compute_capability) {
  const std::vector<absl::string_view> parts = absl::StrSplit(compute_capability, '.');
  if (parts.size() != 2 || !AllDigits(parts[0]) || !AllDigits(parts[1])) return "";
  return absl::StrCat("sm_", parts[0], parts[1]);
}

std::vector<std::string> ClaimableKinds(const std::vector<DeviceOffer>& devices,
                                        absl::string_view node) {
  std::set<std::string> kinds;
  for (const DeviceOffer& d : devices) {
    RunsOn r{d.kind, "", ""};
    kinds.insert(r.Text());
    if (d.kind == "cuda") {
      r.arch = ArchOfCapability(d.compute_capability);
      if (!r.arch.empty()) kinds.insert(r.Text());
    }
  }
  if (!node.empty()) {
    const std::set<std::string> anywhere = kinds;
    for (const std::string& kind : anywhere) kinds.insert(absl::StrCat(kind, "@", node));
  }
  return {kinds.begin(), kinds.end()};
}

std::string KindLabel(absl::string_view device_kind) {
  return std::string(device_kind.substr(0, device_kind.find('@')));
}

}  // namespace kerneleval::server
