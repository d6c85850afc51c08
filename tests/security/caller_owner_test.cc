// Every front charges and scopes a call by its authenticated caller (OwnerOfCall,
// server/identity/caller_identity.h), from the outside: a real server on loopback with a
// token file of two owners and a device-seconds budget that one job spends, so that whose
// budget a call spent shows in the next call's answer. For each front, a call by alice is
// charged to alice (her next job is refused naming her), never to "anonymous", and bob, who
// used nothing, is not refused. (OIP once charged every ModelInfer to "anonymous": one owner
// spent that shared budget and another was refused for an hour.)
#include <chrono>
#include <cstring>
#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kerneleval/v1/results.grpc.pb.h"
#include "kerneleval/v1/submissions.grpc.pb.h"
#include "kserve/v2/grpc_predict_v2.grpc.pb.h"
#include "server/store/result_store.h"
#include "store_test_helpers.h"
#include "two_owners.h"

namespace kerneleval::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A valid FP32 inference of the default model: [2, 8] of small values.
inference::ModelInferRequest SmallInfer() {
  inference::ModelInferRequest r;
  r.set_model_name("fused_add_rmsnorm");
  for (const char* name : {"hidden_states", "residual", "weight"}) {
    const bool weight = std::strcmp(name, "weight") == 0;
    inference::ModelInferRequest::InferInputTensor* in = r.add_inputs();
    in->set_name(name);
    in->set_datatype("FP32");
    if (!weight) in->add_shape(2);
    in->add_shape(8);
    const float one = 1.0f;
    std::string bytes;
    for (int i = 0; i < (weight ? 8 : 16); ++i) {
      bytes.append(reinterpret_cast<const char*>(&one), sizeof(one));
    }
    r.add_raw_input_contents(std::move(bytes));
  }
  return r;
}

// Two owners, a budget any one job spends, submissions on and results in a file of its own.
class CallerOwner : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir("caller-owner-" +
                   std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    server::ServerOptions o = LoopbackOptions();
    AdmitAliceAndBob(&o);
    o.owner_device_seconds_per_hour = 1e-6;
    o.submissions.enabled = true;
    o.submissions.compiler.tool_path = KERNELEVAL_TEST_COMPILE_TOOL;
    o.results.data_dir = dir_;
    client::ClientOptions client_options;
    client_options.bearer_token = kAliceToken;
    server_ = StartServer(o, {}, client_options);
    ASSERT_NE(server_.server, nullptr);
    channel_ = grpc::CreateChannel(server_.target(), grpc::InsecureChannelCredentials());
    kerneleval_ = v1::KernelEval::NewStub(channel_);
    oip_ = inference::GRPCInferenceService::NewStub(channel_);
    results_ = v1::Results::NewStub(channel_);
    submissions_ = v1::Submissions::NewStub(channel_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  grpc::Status Run(const char* token) {
    v1::RunResponse response;
    return kerneleval_->Run(As(token).get(), SmallRun(4, 64), &response);
  }
  grpc::Status Infer(const char* token) {
    inference::ModelInferResponse response;
    return oip_->ModelInfer(As(token).get(), SmallInfer(), &response);
  }

  // After one job of alice's: her budget is spent and says so by her name; bob's is whole.
  void ExpectChargedToAliceOnly() {
    const grpc::Status alice = Run(kAliceToken);
    EXPECT_EQ(alice.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << alice.error_message();
    EXPECT_THAT(alice.error_message(), HasSubstr("owner 'alice' has used"));
    EXPECT_THAT(alice.error_message(), HasSubstr("--owner-device-seconds-per-hour"));
    EXPECT_THAT(alice.error_message(), Not(HasSubstr("anonymous")));
    const grpc::Status bob = Run(kBobToken);
    EXPECT_TRUE(bob.ok()) << "bob used nothing: " << bob.error_message();
  }

  std::string dir_;
  TestServer server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::KernelEval::Stub> kerneleval_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> oip_;
  std::unique_ptr<v1::Results::Stub> results_;
  std::unique_ptr<v1::Submissions::Stub> submissions_;
};

TEST_F(CallerOwner, KernelEvalRunIsChargedToItsCaller) {
  const grpc::Status first = Run(kAliceToken);
  ASSERT_TRUE(first.ok()) << first.error_message();
  ExpectChargedToAliceOnly();
}

TEST_F(CallerOwner, OipModelInferIsChargedToItsCaller) {
  const grpc::Status first = Infer(kAliceToken);
  ASSERT_TRUE(first.ok()) << first.error_message();
  // Refused on the same front too, by her name; bob's first inference is his own.
  const grpc::Status again = Infer(kAliceToken);
  EXPECT_EQ(again.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << again.error_message();
  EXPECT_THAT(again.error_message(), HasSubstr("owner 'alice' has used"));
  const grpc::Status bobs = Infer(kBobToken);
  EXPECT_TRUE(bobs.ok()) << "bob used nothing: " << bobs.error_message();
}

TEST_F(CallerOwner, OipModelInferSpendsTheSameBudgetAsRun) {
  const grpc::Status first = Infer(kAliceToken);
  ASSERT_TRUE(first.ok()) << first.error_message();
  ExpectChargedToAliceOnly();
}

TEST_F(CallerOwner, ResultsReproduceIsChargedToItsCaller) {
  std::string run;
  {
    // A built-in's result, everyone's to reproduce, planted through a second connection.
    server::store::StoreOptions so;
    so.data_dir = dir_;
    auto store = server::store::ResultStore::Open(so, nullptr);
    ASSERT_TRUE(store.ok()) << store.status();
    v1::BenchmarkReport report = SyntheticReport(7, 10e-6, 0.02, 40);
    for (v1::WorkloadResult& r : *report.mutable_results()) r.set_implementation("cpu_fused");
    run = *(*store)->RecordNow(report, 1000, "bob");
  }
  v1::ReproduceRequest reproduce;
  reproduce.set_result_id(run + "/0");
  v1::ReproduceResponse reproduced;
  const grpc::Status s = results_->Reproduce(As(kAliceToken).get(), reproduce, &reproduced);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ExpectChargedToAliceOnly();
}

TEST_F(CallerOwner, SubmissionsRegisterBelongsToItsCaller) {
  v1::RegisterSubmissionRequest request;
  v1::SubmissionSpec* spec = request.mutable_submission();
  spec->set_name("mine");
  spec->set_source(
      "#include <kerneleval/submission_abi.h>\n"
      "extern \"C\" __global__ void tiny(const kerneleval_params p) {\n"
      "  if (threadIdx.x == 0) static_cast<float*>(p.output)[blockIdx.x] = p.eps;\n"
      "}\n");
  spec->set_dtype(v1::DTYPE_BF16);
  v1::KernelLaunch* k = spec->mutable_launch_plan()->add_kernels();
  k->set_entry("tiny");
  k->set_block_size(256);
  k->set_rows_per_block(1);
  v1::RegisterSubmissionResponse registered;
  const grpc::Status s =
      submissions_->RegisterSubmission(As(kAliceToken).get(), request, &registered);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(registered.submission().owner(), "alice");
  v1::ListSubmissionsResponse alices, bobs;
  ASSERT_TRUE(submissions_->ListSubmissions(As(kAliceToken).get(), {}, &alices).ok());
  ASSERT_TRUE(submissions_->ListSubmissions(As(kBobToken).get(), {}, &bobs).ok());
  EXPECT_EQ(alices.submissions_size(), 1);
  EXPECT_EQ(bobs.submissions_size(), 0);
}

}  // namespace
}  // namespace kerneleval::testing
