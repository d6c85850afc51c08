// The Results service's catalogue of bodies that do not parse, straight onto the wire
// through gRPC's generic stub against a real server on loopback: every method answers
// INVALID_ARGUMENT naming itself (gRPC's own parse would answer with no message), and the
// server answers a valid call after each. And methods no service registers: UNIMPLEMENTED
// with what to use instead. Bounded echoes, field names and literal filters have their tests
// in results_service_test and run_ids_test.
#include "kerneleval/v1/queue.pb.h"
#include "kerneleval/v1/results.pb.h"
#include "raw_call.h"
#include "store_test_helpers.h"

namespace kerneleval::testing {
namespace {

// Each of `payloads` sent to `service`'s `method`: INVALID_ARGUMENT naming the method, the
// message bounded. The number of calls made.
int ExpectEachRefusedNamingTheMethod(const std::string& target, const std::string& service,
                                     const std::string& method,
                                     const std::vector<std::string>& payloads) {
  for (const std::string& bytes : payloads) {
    SCOPED_TRACE(method + ", " + std::to_string(bytes.size()) + " bytes");
    std::string reply;
    const grpc::Status status = RawCall(target, "/" + service + "/" + method, bytes, &reply);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_NE(status.error_message().find(method + ": the request body does not parse"),
              std::string::npos)
        << status.error_message();
    EXPECT_LT(status.error_message().size(), 300u);
  }
  return static_cast<int>(payloads.size());
}

TEST(ResultsHostileInput, BodiesThatDoNotParseAreInvalidArgumentNamingTheMethod) {
  TestServer t = StartServer();
  Bench(t, {"cpu_fused"});
  ASSERT_GE(WaitForResults(t.target(), "store_small", 2), 2u);

  // Valid bytes on the same raw path: a History page with the two results.
  const auto expect_serves = [&] {
    v1::HistoryRequest valid;
    valid.mutable_filter()->set_suite("store_small");
    std::string reply;
    const grpc::Status s =
        RawCall(t.target(), "/kerneleval.v1.Results/History", valid.SerializeAsString(), &reply);
    ASSERT_TRUE(s.ok()) << s.error_message();
    v1::HistoryResponse page;
    ASSERT_TRUE(page.ParseFromString(reply));
    EXPECT_EQ(page.results_size(), 2);
  };
  expect_serves();

  std::vector<std::string> payloads = MalformedBodies();
  payloads.push_back(BadUtf8InField1());  // every method's field 1 is a string or a message
  int cases = 0;
  for (const char* method : {"History", "Leaderboard", "Compare", "Reproduce", "Export"}) {
    cases +=
        ExpectEachRefusedNamingTheMethod(t.target(), "kerneleval.v1.Results", method, payloads);
    expect_serves();
  }
  EXPECT_EQ(cases, 25);
}

// The Queue service the same way: each method (Watch streams) names itself; a request that
// parses but asks for what is not there names its field.
TEST(ResultsHostileInput, QueueBodiesThatDoNotParseAreInvalidArgumentNamingTheMethod) {
  TestServer t = StartServer();
  for (const char* method : {"Enqueue", "Watch", "Cancel", "List"}) {
    std::vector<std::string> payloads = MalformedBodies();
    // Field 1 of Enqueue, Watch and Cancel is a message or a string; List's is a number, where
    // these bytes are an unknown field that parses.
    if (std::string(method) != "List") payloads.push_back(BadUtf8InField1());
    ExpectEachRefusedNamingTheMethod(t.target(), "kerneleval.v1.Queue", method, payloads);
  }
  v1::EnqueueRequest bad_priority;
  bad_priority.mutable_benchmark()->set_suite("store_small");
  bad_priority.set_priority(static_cast<v1::JobPriority>(7));
  std::string reply;
  grpc::Status s =
      RawCall(t.target(), "/kerneleval.v1.Queue/Enqueue", bad_priority.SerializeAsString(), &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("priority: 7"), std::string::npos) << s.error_message();
  v1::EnqueueRequest unknown_suite;
  unknown_suite.mutable_benchmark()->set_suite(std::string(5000, 'x'));
  s = RawCall(t.target(), "/kerneleval.v1.Queue/Enqueue", unknown_suite.SerializeAsString(),
              &reply);
  EXPECT_NE(s.error_code(), grpc::StatusCode::OK);
  EXPECT_NE(s.error_message().find("suite"), std::string::npos) << s.error_message();
  EXPECT_LT(s.error_message().size(), 1000u);
  v1::WatchJobRequest no_such;
  no_such.set_run_id(std::string(5000, 'a'));
  s = RawCall(t.target(), "/kerneleval.v1.Queue/Watch", no_such.SerializeAsString(), &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_LT(s.error_message().size(), 300u);
}

// Methods no service registers (tritonclient's beyond the Open Inference Protocol's six, a
// typo): UNIMPLEMENTED with a sentence saying what to use instead, the name bounded.
TEST(ResultsHostileInput, UnservedMethodsSayWhatToUseInstead) {
  TestServer t = StartServer();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/inference.GRPCInferenceService/ModelConfig", "ModelMetadata"},
      {"/inference.GRPCInferenceService/ModelStatistics", "/metrics"},
      {"/inference.GRPCInferenceService/RepositoryIndex", "ListImplementations"},
      {"/inference.GRPCInferenceService/RepositoryModelLoad", "submissions"},
      {"/inference.GRPCInferenceService/SystemSharedMemoryRegister", "raw_input_contents"},
      {"/inference.GRPCInferenceService/ModelStreamInfer", "ModelInfer"},
      {"/inference.GRPCInferenceService/" + std::string(4000, 'x'), "(4000 bytes)"},
      {"/kerneleval.v1.KernelEval/Runn", "is not a method of this server"},
  };
  for (const auto& [method, hint] : cases) {
    SCOPED_TRACE(method.substr(0, 80));
    std::string reply;
    const grpc::Status status = RawCall(t.target(), method, "", &reply);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED) << status.error_message();
    EXPECT_NE(status.error_message().find(hint), std::string::npos) << status.error_message();
    EXPECT_LT(status.error_message().size(), 400u);
  }
  // Served methods still answer.
  std::string reply;
  EXPECT_TRUE(RawCall(t.target(), "/inference.GRPCInferenceService/ServerLive", "", &reply).ok());
}

}  // namespace
}  // namespace kerneleval::testing
