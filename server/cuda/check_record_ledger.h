// The host's copy of each checked call's record (kEveryCall, server/device/call_checks.h).
// A record lives in device memory of the submission's own context, where its kernels can
// write too: a call could pre-set its record to "passed", or a later call wipe an earlier
// call's findings before they are read. So each record is reset to "not yet checked" (all
// zero) after its call has finished, the check kernels accumulate into it, and it is read
// back to the host before anything else runs on the stream; only the host's copy is judged.
//
// Free of CUDA (the device steps come as functions, in stream order), so that the order is
// tested on any build. Not thread-safe: one measurement's, on the device's worker thread.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "kerneleval/kernels/call_check.h"

namespace kerneleval::server {

class CheckRecordLedger {
 public:
  // One call's steps on the device, each queued on the measurement's stream after the
  // call. `read_back` returns only once the record's bytes are on the host.
  struct DeviceSteps {
    std::function<absl::Status()> reset;  // the record: all zero ("not yet checked")
    std::function<absl::Status()> check;  // the check kernels, accumulating into it
    std::function<absl::Status(CallCheckCounts*)> read_back;
  };

  // Reset, check, read back, in that order, for `record`; the copy kept as its verdict.
  absl::Status CheckCall(std::size_t record, const DeviceSteps& steps) {
    if (record >= read_.size()) {
      records_.resize(record + 1);
      read_.resize(record + 1, false);
    }
    read_[record] = false;
    if (absl::Status s = steps.reset(); !s.ok()) return s;
    if (absl::Status s = steps.check(); !s.ok()) return s;
    CallCheckCounts copy{};
    if (absl::Status s = steps.read_back(&copy); !s.ok()) return s;
    records_[record] = copy;
    read_[record] = true;
    return absl::OkStatus();
  }

  // Records up to the last one checked.
  std::size_t used() const { return records_.size(); }
  // Whether `record`'s copy came back (a gap means its call was never checked).
  bool read(std::size_t record) const { return record < read_.size() && read_[record]; }
  const CallCheckCounts& record(std::size_t i) const { return records_[i]; }

 private:
  std::vector<CallCheckCounts> records_;
  std::vector<bool> read_;
};

}  // namespace kerneleval::server
