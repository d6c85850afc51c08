// Carrying out a CallCheckPlan (server/device/call_checks.h) on a CUDA device: the checked
// calls' inputs generated from seeds, outputs poisoned, guards written after every tensor, and
// after the calls the device-side checks (kernels/.../call_check_cuda.h) and their verdict.
// Every function works on one measurement's CudaWorkspace, on its stream, from the device's
// worker thread. With the checks off (w->checks.on false) each is a no-op where noted.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "server/cuda/cuda_workspace.h"
#include "server/device/backend.h"

namespace kerneleval::server {

// Before the buffers are allocated: w->checks.on from options.check_calls, and the plan,
// tolerance and secret seed where on.
absl::Status PlanCheckedCalls(const Problem& problem, const MeasureOptions& options,
                              CudaWorkspace* w);
// The kept weight's pristine copy, taken before any call of the submission can touch it.
absl::Status KeepPristineWeight(CudaWorkspace* w);
// Random bytes past each tensor of set `s`, so that even the result call finds them and
// never another buffer.
absl::Status FillInputGuards(const CudaBufferSet& s, CudaWorkspace* w);

// After the result call: the check records and, kChained, the input sets' inputs and guards,
// the chain's weight and the first batch's slots. No-op with the checks off.
absl::Status PrepareCheckedCalls(CudaWorkspace* w);

// kEveryCall, before the call on `set`: inputs generated from `key`, outputs poisoned and
// guards of fresh bytes from `guard_key`.
absl::Status WriteCheckedInputs(CudaWorkspace* w, std::size_t set, std::uint64_t key,
                                std::uint64_t guard_key);
// kEveryCall, after the call on `set`: its outputs, inputs and guards checked into `record`
// (beyond the plan's records: nothing).
absl::Status CheckCallOnDevice(CudaWorkspace* w, std::size_t set, std::uint64_t key,
                               std::uint64_t guard_key, std::size_t record);

// kChained (hot and graph replay): checks the calls launched since the slots were prepared
// (w->checks.pending), keeps the first failure, then poisons the slots (IN_PLACE: generates
// their inputs) and writes their guards again when `again`.
absl::Status CheckBatch(const MeasureOptions& options, CudaWorkspace* w, bool again);

// After the timed samples: the calls checked and the first failure into `m`. Later calls
// (the DRAM windows) go unchecked. No-op with the checks off.
absl::Status FinishCheckedCalls(const MeasureOptions& options, CudaWorkspace* w, Measurement* m);

// Test only (tests/gpu/call_checks_gpu_test.cc): called once a measurement's check records
// exist, before its first checked call, so that a test can hand their address to a planted
// cheat (a real one would have to find them; the boundary must not rely on it not finding
// them). Null: none. Set while no measurement runs.
using CheckRecordsHook = void (*)(const CudaWorkspace& w);
void SetCheckRecordsHookForTesting(CheckRecordsHook hook);

}  // namespace kerneleval::server
