// The Results service's catalogue of bodies that do not parse, straight onto the wire
// through gRPC's generic stub against a real server on loopback: every method answers
// INVALID_ARGUMENT naming itself (gRPC's own parse would answer with no message), and the
// server answers a valid call after each. And methods no service registers: UNIMPLEMENTED
// with what to use instead. Bounded echoes, field names and literal filters have their tests
// in results_service_test and run_ids_test.
#include <condition_variable>
#include <mutex>

#include <grpcpp/generic/generic_stub.h>

#include "kerneleval/v1/results.pb.h"
#include "store_test_helpers.h"

namespace kerneleval::testing {
namespace {

grpc::Status RawCall(const std::string& target, const std::string& method, const std::string& bytes,
                     std::string* reply) {
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  grpc::Slice slice(bytes);
  const grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status status;
  stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response, [&](grpc::Status s) {
    std::lock_guard<std::mutex> lock(mu);
    status = std::move(s);
    done = true;
    cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  reply->clear();
  std::vector<grpc::Slice> slices;
  if (status.ok() && response.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) {
      reply->append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  return status;
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

  const std::vector<std::string> payloads = {
      std::string("\x0a\xff\xff\xff\xff\x0f", 6),  // length-delimited field past the end
      std::string("\x0a\x05\x08\x01", 4),          // truncated sub-message
      std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11),  // varint too long
      std::string(64, '\xff'),
      std::string("\x0a\x03\xc3\x28u", 5),  // field 1 a string (or message) of bad UTF-8
  };
  int cases = 0;
  for (const char* method : {"History", "Leaderboard", "Compare", "Reproduce", "Export"}) {
    for (const std::string& bytes : payloads) {
      SCOPED_TRACE(std::string(method) + ", " + std::to_string(bytes.size()) + " bytes");
      std::string reply;
      const grpc::Status status =
          RawCall(t.target(), std::string("/kerneleval.v1.Results/") + method, bytes, &reply);
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
      EXPECT_NE(status.error_message().find(std::string(method) + ": the request body does not "
                                                                  "parse"),
                std::string::npos)
          << status.error_message();
      EXPECT_LT(status.error_message().size(), 300u);
      ++cases;
    }
    expect_serves();
  }
  EXPECT_EQ(cases, 25);
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
