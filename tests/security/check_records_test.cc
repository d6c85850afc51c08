// The order in which a checked call's record is reset, checked and read back
// (server/cuda/check_record_ledger.h), against a simulated device whose "submitted kernel"
// writes the record memory between the service's steps, as a kernel in the same context can.
// The oracle is what the check itself wrote: a forgery before the reset and a wipe after the
// read-back must both leave the verdict unchanged. (The real kernels: tests/gpu,
// PlantedCheatsGpu.ForgedCheckRecordsAreRejected.)
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "server/cuda/check_record_ledger.h"

namespace kerneleval::server {
namespace {

// Device memory of the records, the steps done on it in order, and what the next check
// finds.
struct FakeDevice {
  std::vector<CallCheckCounts> memory;
  std::vector<std::string> steps;
  unsigned long long next_bad = 0;

  CheckRecordLedger::DeviceSteps For(std::size_t record) {
    CheckRecordLedger::DeviceSteps s;
    s.reset = [this, record] {
      steps.push_back("reset " + std::to_string(record));
      std::memset(&memory[record], 0, sizeof(CallCheckCounts));
      return absl::OkStatus();
    };
    s.check = [this, record] {
      steps.push_back("check " + std::to_string(record));
      memory[record].bad[kCheckOutput] += next_bad;  // the check kernels accumulate
      return absl::OkStatus();
    };
    s.read_back = [this, record](CallCheckCounts* out) {
      steps.push_back("read " + std::to_string(record));
      *out = memory[record];
      return absl::OkStatus();
    };
    return s;
  }
  // What a kernel in the context can do: every record all zero ("passed"), or a count that
  // the check's additions would wrap around to zero.
  void WipeAll() {
    for (CallCheckCounts& c : memory) std::memset(&c, 0, sizeof(c));
  }
};

TEST(CheckRecords, ResetCheckAndReadBackInOrderForEachCall) {
  FakeDevice device{std::vector<CallCheckCounts>(3)};
  CheckRecordLedger ledger;
  for (std::size_t i = 0; i < 3; ++i) ASSERT_TRUE(ledger.CheckCall(i, device.For(i)).ok());
  EXPECT_EQ(device.steps,
            (std::vector<std::string>{"reset 0", "check 0", "read 0", "reset 1", "check 1",
                                      "read 1", "reset 2", "check 2", "read 2"}));
  EXPECT_EQ(ledger.used(), 3u);
}

TEST(CheckRecords, AnEarlierCallsFindingsSurviveALaterWipe) {
  FakeDevice device{std::vector<CallCheckCounts>(3)};
  CheckRecordLedger ledger;
  device.next_bad = 17;  // call 0 leaves 17 elements wrong
  ASSERT_TRUE(ledger.CheckCall(0, device.For(0)).ok());
  device.next_bad = 0;
  for (std::size_t i = 1; i < 3; ++i) {
    device.WipeAll();  // call i runs and wipes every record
    ASSERT_TRUE(ledger.CheckCall(i, device.For(i)).ok());
  }
  EXPECT_EQ(device.memory[0].bad[kCheckOutput], 0u) << "the simulated wipe did not happen";
  EXPECT_EQ(ledger.record(0).bad[kCheckOutput], 17u);
}

TEST(CheckRecords, ARecordPresetBeforeItsCheckIsOverwritten) {
  FakeDevice device{std::vector<CallCheckCounts>(1)};
  CheckRecordLedger ledger;
  // The call pre-sets its own record so that the check's 5 additions wrap around to zero.
  device.memory[0].bad[kCheckOutput] = ~0ull - 4;
  device.next_bad = 5;
  ASSERT_TRUE(ledger.CheckCall(0, device.For(0)).ok());
  EXPECT_EQ(ledger.record(0).bad[kCheckOutput], 5u);
}

TEST(CheckRecords, AFailedStepKeepsTheRecordUnread) {
  FakeDevice device{std::vector<CallCheckCounts>(2)};
  CheckRecordLedger ledger;
  ASSERT_TRUE(ledger.CheckCall(0, device.For(0)).ok());
  CheckRecordLedger::DeviceSteps steps = device.For(1);
  steps.check = [] { return absl::InternalError("the check kernel did not launch"); };
  EXPECT_FALSE(ledger.CheckCall(1, steps).ok());
  EXPECT_TRUE(ledger.read(0));
  EXPECT_FALSE(ledger.read(1)) << "a record whose check failed must not count as read";
}

}  // namespace
}  // namespace kerneleval::server
