// Benchmark suites: FlashInfer-Bench-style definitions with their workloads.
//
// A suite file (one JSON object per file; the format is documented in suites/README.md) names
// the op, its axes (const or var), its input and output tensors, the mode and eps, and a list
// of workloads that fix the var axes. Files are parsed into v1::SuiteDefinition, the form the
// rest of the server (and the wire) uses. Suites that arrive in requests are checked with
// ValidateSuite, so files and requests obey the same rules.
//
// Errors are INVALID_ARGUMENT with a message that says where and what:
//   "suites/x.json: workloads[2].axes.batch_size: must be an integer in 1..2147483647, got 0"
//   "custom_suite.workloads[2].axes: missing var axis batch_size"
// Pure functions (LoadSuiteDirectory reads files); safe to call from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kerneleval/v1/kerneleval.pb.h"

namespace kerneleval {

inline constexpr char kBatchAxis[] = "batch_size";
inline constexpr char kHiddenAxis[] = "hidden_size";
inline constexpr double kDefaultEps = 1e-6;
// Axis values are 1 .. 2^31 - 1: rows and columns index with 32-bit integers in the kernels.
inline constexpr std::int64_t kMaxAxisValue = 2147483647;
// Bounds the work one request can ask for; the built-in suites have a handful each.
inline constexpr int kMaxWorkloads = 1024;

// Parses one suite file. `source` names the text in error messages (the file path, or e.g.
// "--suite-file"). The result has dtype, mode, eps (the file's or kDefaultEps), axes in the
// order batch_size, hidden_size, and every workload with its declared name (empty when the
// file gives none; see WorkloadName), seed and tolerance. It passes ValidateSuite.
absl::StatusOr<v1::SuiteDefinition> ParseSuiteJson(std::string_view text, std::string_view source);

// Parses every regular file named *.json directly in `dir`, in file-name order. Fails on the
// first bad file (the message starts with its path), on two files that define the same suite
// name, and when `dir` does not exist (NOT_FOUND) or is not a directory. Other files are
// ignored, so a README can sit beside the suites.
absl::StatusOr<std::vector<v1::SuiteDefinition>> LoadSuiteDirectory(const std::string& dir);

// Checks a definition, from a file or a request. `field` prefixes the field paths in the
// message ("custom_suite" gives "custom_suite.workloads[2].axes: ..."; empty gives
// "workloads[2].axes: ..."). Rules:
//   name: empty (the caller names it) or 1..128 characters of [A-Za-z0-9_.-];
//   dtype: BF16, FP16 or FP32; mode: any (UNSPECIFIED means OUTPUT);
//   eps: finite and >= 0 (0 means kDefaultEps: proto3 cannot tell unset from 0);
//   axes: exactly batch_size and hidden_size, const values in 1..kMaxAxisValue;
//   workloads: 1..kMaxWorkloads, each setting every var axis and nothing else to
//     1..kMaxAxisValue, with a bytes-moved count that fits in int64, a tolerance with finite
//     atol, rtol >= 0 and required_matched_ratio in [0, 1], and a name (declared or from
//     WorkloadName) unique in the suite and at most 128 characters.
absl::Status ValidateSuite(const v1::SuiteDefinition& suite, std::string_view field = "");

// The tensor shape of one workload: [batch, hidden] activations and a [hidden] weight.
struct WorkloadShape {
  std::int64_t batch = 0;
  std::int64_t hidden = 0;
};

// Reads batch and hidden from the suite's const axes and the workload's var axes.
// INVALID_ARGUMENT when an axis is missing or out of range (cannot happen after ValidateSuite).
absl::StatusOr<WorkloadShape> ResolveShape(const v1::SuiteDefinition& suite,
                                           const v1::Workload& workload);

// The workload's declared name, or one made from its var axes in the suite's axis order,
// e.g. "batch_size=79" or "hidden_size=4096" (all axes when none is var).
std::string WorkloadName(const v1::SuiteDefinition& suite, const v1::Workload& workload);

}  // namespace kerneleval
