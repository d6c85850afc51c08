// A submission caught at one workload is caught in the whole run: none of its numbers is
// ranked, and the results it passed say where it was caught. Built-ins keep theirs.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "server/evaluation/benchmark_engine.h"

namespace kerneleval::server {
namespace {

v1::WorkloadResult Result(const std::string& impl, const std::string& workload,
                          v1::ResultStatus status, double median, const std::string& device) {
  v1::WorkloadResult r;
  r.set_implementation(impl);
  r.set_workload(workload);
  r.set_device(device);
  r.set_status(status);
  r.mutable_latency()->set_median_seconds(median);
  if (status == v1::RESULT_STATUS_REJECTED) r.set_error("call 3 of 50 of replay 1: output[0, 7]");
  return r;
}

TEST(RejectCaughtSubmissions, OneCatchUnranksEveryWorkloadOfThatSubmission) {
  std::vector<v1::WorkloadResult> results = {
      Result("cuda_fused", "batch_size=1", v1::RESULT_STATUS_PASSED, 1.1e-6, "cuda:0"),
      Result("overlaps", "batch_size=1", v1::RESULT_STATUS_REJECTED, 0.6e-6, "cuda:0"),
      Result("honest", "batch_size=1", v1::RESULT_STATUS_PASSED, 2e-6, "cuda:0"),
      Result("cuda_fused", "batch_size=16254", v1::RESULT_STATUS_PASSED, 47e-6, "cuda:0"),
      Result("overlaps", "batch_size=16254", v1::RESULT_STATUS_PASSED, 46e-6, "cuda:0"),
      Result("honest", "batch_size=16254", v1::RESULT_STATUS_PASSED, 50e-6, "cuda:0"),
      // Another device's run of the same submission was not caught there.
      Result("overlaps", "batch_size=1", v1::RESULT_STATUS_PASSED, 1.0e-6, "cuda:1"),
  };
  RejectCaughtSubmissions({"overlaps", "honest"}, &results);
  RankResults(&results);
  const v1::WorkloadResult& large = results[4];
  EXPECT_EQ(large.status(), v1::RESULT_STATUS_REJECTED);
  EXPECT_EQ(large.rank(), 0u);
  EXPECT_EQ(large.error().rfind("rejected with the whole run: caught at batch_size=1 (call 3", 0),
            0u)
      << large.error();
  EXPECT_EQ(results[3].rank(), 1u);  // cuda_fused first at 16254 now
  EXPECT_EQ(results[5].rank(), 2u);
  EXPECT_EQ(results[2].status(), v1::RESULT_STATUS_PASSED);
  EXPECT_EQ(results[6].status(), v1::RESULT_STATUS_PASSED);
  EXPECT_EQ(results[6].rank(), 1u);
}

TEST(RejectCaughtSubmissions, BuiltinsAreNotSubmissions) {
  std::vector<v1::WorkloadResult> results = {
      Result("cuda_fused", "batch_size=1", v1::RESULT_STATUS_REJECTED, 1e-6, "cuda:0"),
      Result("cuda_fused", "batch_size=6", v1::RESULT_STATUS_PASSED, 1e-6, "cuda:0"),
  };
  RejectCaughtSubmissions({"sub"}, &results);
  EXPECT_EQ(results[1].status(), v1::RESULT_STATUS_PASSED);
}

}  // namespace
}  // namespace kerneleval::server
