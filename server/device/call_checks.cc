#include "server/device/call_checks.h"

#include <algorithm>
#include <atomic>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kerneleval::server {
namespace {

constexpr std::size_t kMinGuardBytes = 64 * 1024;

const char* TensorName(int tensor) {
  switch (tensor) {
    case kCheckHiddenStates:
      return "hidden_states";
    case kCheckResidual:
      return "residual";
    case kCheckWeight:
      return "weight";
    case kCheckOutput:
      return "output";
    default:
      return "residual_out";
  }
}

std::string Element(const Problem& problem, int tensor, unsigned long long index) {
  if (tensor == kCheckWeight || problem.hidden <= 0) return absl::StrCat("[", index, "]");
  const auto hidden = static_cast<unsigned long long>(problem.hidden);
  return absl::StrCat("[", index / hidden, ", ", index % hidden, "]");
}

std::uint64_t SplitMix(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

std::size_t GuardBytes(const Problem& problem) {
  const std::size_t row = static_cast<std::size_t>(std::max<std::int64_t>(problem.hidden, 0)) *
                          ElementSize(problem.dtype);
  return (std::max(kMinGuardBytes, row) + 255) / 256 * 256;
}

absl::StatusOr<CallCheckPlan> PlanCallChecks(const Problem& problem, const MeasureOptions& options,
                                             std::size_t slot_budget_bytes) {
  CallCheckPlan plan;
  const bool in_place = problem.mode == Mode::kInPlace;
  plan.timing =
      options.cold && !options.graph ? CallCheckTiming::kEveryCall : CallCheckTiming::kChained;
  plan.check_inputs = !in_place;
  plan.check_outputs = true;
  plan.guard_bytes = GuardBytes(problem);
  const std::size_t timed =
      options.adaptive.enabled ? options.adaptive.max_samples : options.repetitions;
  if (plan.timing == CallCheckTiming::kEveryCall) {
    plan.records = std::size_t{options.warmup} + timed;
    return plan;
  }
  // A slot: output (and residual_out), or in IN_PLACE its own hidden_states and residual.
  plan.slot_tensors = in_place || WritesResidual(problem.mode) ? 2 : 1;
  plan.slot_stride = (problem.TensorBytes() + plan.guard_bytes + 255) / 256 * 256;
  const std::size_t slot_bytes = plan.slot_tensors * plan.slot_stride;
  const std::size_t fit = slot_bytes > 0 ? slot_budget_bytes / slot_bytes : 0;
  if (options.graph) {
    plan.batch_calls = std::max<std::uint32_t>(1, options.graph_calls);
    if (plan.batch_calls > fit) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "protocol.graph_calls: ", plan.batch_calls, " calls of ", problem.batch, " x ",
          problem.hidden, " each need an output slot of their own to be checked (", slot_bytes,
          " bytes each), and only ", fit, " fit in a quarter of the free device memory"));
    }
  } else {
    // Calls beyond what fits are checked in later batches (the slots poisoned again between
    // two samples, outside the timed windows); kMaxBatchCalls bounds the allocation.
    constexpr std::size_t kMaxBatchCalls = 4096;
    if (fit == 0) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "a checked call of ", problem.batch, " x ", problem.hidden, " needs ", slot_bytes,
          " bytes for its outputs, more than a quarter of the free "
          "device memory"));
    }
    plan.batch_calls = std::clamp<std::size_t>(std::size_t{options.warmup} + timed, 1,
                                               std::min(fit, kMaxBatchCalls));
  }
  plan.records = plan.batch_calls + 1;
  return plan;
}

std::string CheckedCallName(const CallCheckPlan& plan, const MeasureOptions& options,
                            std::size_t record) {
  if (record < options.warmup) {
    return absl::StrCat("warm-up call ", record + 1, " of ", options.warmup);
  }
  return absl::StrCat("timed call ", record - options.warmup + 1, " of ",
                      plan.records - options.warmup);
}

std::string ChainedCallName(const MeasureOptions& options, const ChainedCall& c) {
  const std::uint32_t timed =
      options.adaptive.enabled ? options.adaptive.max_samples : options.repetitions;
  const bool warm = c.sample < options.warmup;
  const std::string sample = warm ? absl::StrCat(c.sample + 1, " of ", options.warmup)
                                  : absl::StrCat(c.sample - options.warmup + 1, " of ", timed);
  if (!options.graph) return absl::StrCat(warm ? "warm-up" : "timed", " call ", sample);
  const std::string window = c.first_launch
                                 ? absl::StrCat("the graph's first launch before the ",
                                                c.sample == 0 ? "warm-up" : "timed replays")
                                 : absl::StrCat(warm ? "warm-up" : "timed", " replay ", sample);
  return absl::StrCat("call ", c.call + 1, " of ", c.calls, " of ", window);
}

std::string DescribeCallCheck(const CallCheckCounts& c, const Problem& problem,
                              const CallCheckPlan& plan, const v1::Tolerance& tolerance) {
  std::vector<std::string> findings;
  const auto n = static_cast<double>(problem.TensorElements());
  for (int t : {kCheckOutput, kCheckResidualOut}) {
    if (!plan.check_outputs || c.bad[t] == 0) continue;
    const double matched = n > 0 ? (n - static_cast<double>(c.bad[t])) / n : 1.0;
    const double required =
        tolerance.required_matched_ratio() > 0 ? tolerance.required_matched_ratio() : 1.0;
    if (c.nonfinite[t] == 0 && matched >= required) continue;
    findings.push_back(absl::StrCat(
        TensorName(t), Element(problem, t, ~c.first_bad_complement[t]), " wrong (", c.bad[t],
        " of ", problem.TensorElements(), " elements outside atol ", tolerance.atol(), " + rtol ",
        tolerance.rtol(), " x |ref|",
        c.nonfinite[t] > 0 ? absl::StrCat(", ", c.nonfinite[t], " NaN or Inf") : "", ")"));
  }
  for (int t : {kCheckHiddenStates, kCheckResidual, kCheckWeight}) {
    if (c.bad[t] == 0) continue;
    if (t != kCheckWeight && !plan.check_inputs) continue;
    findings.push_back(absl::StrCat("input ", TensorName(t), " changed by the call (", c.bad[t],
                                    " elements, first ",
                                    Element(problem, t, ~c.first_bad_complement[t]), ")"));
  }
  for (int t = 0; t < kCheckTensors; ++t) {
    if (c.guard_changed[t] == 0) continue;
    findings.push_back(absl::StrCat("wrote past the end of ", TensorName(t), " (",
                                    c.guard_changed[t],
                                    " bytes of the guard region after it changed, the first ",
                                    ~c.first_guard_complement[t], " bytes past its end)"));
  }
  return absl::StrJoin(findings, "; ");
}

bool RepeatsInputs(std::uint64_t seed, std::uint64_t call) {
  return call > 0 && (SplitMix(seed ^ SplitMix(call)) % 4 == 0 || call % 8 == 7);
}

std::uint64_t SecretSeed() {
  static std::atomic<std::uint64_t> next{[] {
    std::random_device device;
    return (std::uint64_t{device()} << 32) ^ device();
  }()};
  return next.fetch_add(0x9e3779b97f4a7c15ull);
}

std::uint64_t CallTensorSeed(std::uint64_t base, std::uint64_t call_or_set, int tensor) {
  return SplitMix(SplitMix(base ^ SplitMix(call_or_set)) + static_cast<std::uint64_t>(tensor));
}

}  // namespace kerneleval::server
