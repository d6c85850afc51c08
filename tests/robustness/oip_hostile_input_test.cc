// The Open Inference Protocol front's catalogue of hostile input, through a real server on
// loopback and real gRPC clients (the generated GRPCInferenceService stub; raw bytes through
// gRPC's generic stub for bodies that do not parse): every method answers a body that is not
// its request with INVALID_ARGUMENT naming the method; 10 KB names, datatypes, parameter keys
// and values and shapes of 100,000 dimensions come back bounded with their field named, far
// under gRPC's 8 KiB metadata limit; the protocol's methods this front does not serve answer
// UNIMPLEMENTED with what to use instead. After each case the server still infers.
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kserve/v2/grpc_predict_v2.grpc.pb.h"
#include "raw_call.h"
#include "test_server.h"

namespace kerneleval::testing {
namespace {

using inference::ModelInferRequest;

// What one bounded echo of a 10 KB value may add to a message.
constexpr std::size_t kMaxEchoMessage = 512;
const std::string kLong(10240, 'x');
constexpr int kBatch = 2;
constexpr int kHidden = 8;

// A valid FP32 inference of the default model: hidden_states, residual [2, 8] and weight [8]
// as raw contents.
ModelInferRequest ValidInfer() {
  ModelInferRequest r;
  r.set_model_name("fused_add_rmsnorm");
  for (const char* name : {"hidden_states", "residual", "weight"}) {
    ModelInferRequest::InferInputTensor* in = r.add_inputs();
    in->set_name(name);
    in->set_datatype("FP32");
    if (std::strcmp(name, "weight") != 0) in->add_shape(kBatch);
    in->add_shape(kHidden);
    const std::size_t n = std::strcmp(name, "weight") != 0 ? kBatch * kHidden : kHidden;
    std::string bytes(n * sizeof(float), '\0');
    for (std::size_t i = 0; i < n; ++i) {
      const float v = 0.25f * static_cast<float>(i % 7) - 0.5f;
      std::memcpy(bytes.data() + i * sizeof(float), &v, sizeof(float));
    }
    r.add_raw_input_contents(std::move(bytes));
  }
  return r;
}

class OipHostileInput : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = StartServer();
    stub_ = inference::GRPCInferenceService::NewStub(
        grpc::CreateChannel(server_.target(), grpc::InsecureChannelCredentials()));
  }

  grpc::Status Infer(const ModelInferRequest& request, inference::ModelInferResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    return stub_->ModelInfer(&context, request, response);
  }

  void ExpectInfers() {
    inference::ModelInferResponse response;
    const grpc::Status s = Infer(ValidInfer(), &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_EQ(response.raw_output_contents_size(), 1);
    EXPECT_EQ(response.raw_output_contents(0).size(), kBatch * kHidden * sizeof(float));
  }

  TestServer server_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
};

TEST_F(OipHostileInput, BodiesThatDoNotParseAreInvalidArgumentNamingTheMethod) {
  ExpectInfers();
  // Methods whose field 1 is a string take the bad UTF-8 too; the others skip it as unknown.
  const std::vector<std::pair<const char*, bool>> methods = {
      {"ServerLive", false},     {"ServerReady", false},  {"ModelReady", true},
      {"ServerMetadata", false}, {"ModelMetadata", true}, {"ModelInfer", true}};
  int cases = 0;
  for (const auto& [method, string_field_1] : methods) {
    std::vector<std::string> bodies = MalformedBodies();
    if (string_field_1) bodies.push_back(BadUtf8InField1());
    for (const std::string& bytes : bodies) {
      SCOPED_TRACE(std::string(method) + ", " + std::to_string(bytes.size()) + " bytes");
      std::string reply;
      const grpc::Status status =
          RawCall(server_.target(), std::string("/inference.GRPCInferenceService/") + method, bytes,
                  &reply);
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
      EXPECT_NE(status.error_message().find(std::string(method) +
                                            ": the request body does not parse as inference."),
                std::string::npos)
          << status.error_message();
      EXPECT_LT(status.error_message().size(), 300u);
      ++cases;
    }
    ExpectInfers();
  }
  EXPECT_EQ(cases, 27);
  // Valid bytes on the same raw path answer.
  std::string reply;
  ASSERT_TRUE(RawCall(server_.target(), "/inference.GRPCInferenceService/ServerLive",
                      inference::ServerLiveRequest().SerializeAsString(), &reply)
                  .ok());
  inference::ServerLiveResponse live;
  ASSERT_TRUE(live.ParseFromString(reply));
  EXPECT_TRUE(live.live());
}

struct InferCase {
  const char* name;
  std::function<void(ModelInferRequest*)> mutate;
  grpc::StatusCode code;
  const char* field;  // what the message must name
};

void SetParameter(ModelInferRequest* r, const std::string& key, const std::string& value) {
  (*r->mutable_parameters())[key].set_string_param(value);
}

TEST_F(OipHostileInput, EchoedValuesAreBoundedAndNameTheirField) {
  const std::vector<InferCase> cases = {
      {"model name", [](ModelInferRequest* r) { r->set_model_name(kLong); },
       grpc::StatusCode::NOT_FOUND, "model_name: no model 'xxx"},
      {"model version", [](ModelInferRequest* r) { r->set_model_version(kLong); },
       grpc::StatusCode::NOT_FOUND, "model_version"},
      {"parameter key", [](ModelInferRequest* r) { SetParameter(r, kLong, "1"); },
       grpc::StatusCode::INVALID_ARGUMENT, "parameters.'xxx"},
      {"parameter key of bytes",
       [](ModelInferRequest* r) { SetParameter(r, "eps\n\x01" + kLong, "1"); },
       grpc::StatusCode::INVALID_ARGUMENT, "parameters.'eps\\x0a\\x01xxx"},
      {"eps", [](ModelInferRequest* r) { SetParameter(r, "eps", kLong); },
       grpc::StatusCode::INVALID_ARGUMENT, "parameters.eps: 'xxx"},
      {"repetitions", [](ModelInferRequest* r) { SetParameter(r, "repetitions", kLong); },
       grpc::StatusCode::INVALID_ARGUMENT, "parameters.repetitions: 'xxx"},
      {"mode", [](ModelInferRequest* r) { SetParameter(r, "mode", kLong); },
       grpc::StatusCode::INVALID_ARGUMENT, "parameters.mode: 'xxx"},
      {"timer", [](ModelInferRequest* r) { SetParameter(r, "timer", kLong); },
       grpc::StatusCode::INVALID_ARGUMENT, "parameters.timer: 'xxx"},
      {"device", [](ModelInferRequest* r) { SetParameter(r, "device", kLong); },
       grpc::StatusCode::NOT_FOUND, "device"},
      {"input name", [](ModelInferRequest* r) { r->mutable_inputs(0)->set_name(kLong); },
       grpc::StatusCode::INVALID_ARGUMENT, "inputs[0].name: 'xxx"},
      {"input datatype", [](ModelInferRequest* r) { r->mutable_inputs(1)->set_datatype(kLong); },
       grpc::StatusCode::INVALID_ARGUMENT, "inputs[1].datatype: 'xxx"},
      {"input parameter key",
       [](ModelInferRequest* r) {
         (*r->mutable_inputs(0)->mutable_parameters())[kLong].set_bool_param(true);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "inputs[0].parameters.'xxx"},
      {"output name", [](ModelInferRequest* r) { r->add_outputs()->set_name(kLong); },
       grpc::StatusCode::INVALID_ARGUMENT, "outputs[0].name: 'xxx"},
      {"output parameter key",
       [](ModelInferRequest* r) {
         ModelInferRequest::InferRequestedOutputTensor* out = r->add_outputs();
         out->set_name("output");
         (*out->mutable_parameters())[kLong].set_bool_param(true);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "outputs[0].parameters.'xxx"},
      {"shape of 100000 dims",
       [](ModelInferRequest* r) {
         for (int i = 0; i < 100000; ++i) r->mutable_inputs(0)->add_shape(1);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "(100002 dims)"},
      {"fp32 contents against a shape of 100000 dims",
       [](ModelInferRequest* r) {
         r->clear_raw_input_contents();
         for (ModelInferRequest::InferInputTensor& in : *r->mutable_inputs()) {
           in.mutable_contents()->add_fp32_contents(1.0f);
         }
         for (int i = 0; i < 100000; ++i) r->mutable_inputs(0)->add_shape(1);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "inputs[0].contents.fp32_contents"},
  };
  for (const InferCase& c : cases) {
    SCOPED_TRACE(c.name);
    ModelInferRequest request = ValidInfer();
    c.mutate(&request);
    inference::ModelInferResponse response;
    const grpc::Status status = Infer(request, &response);
    EXPECT_EQ(status.error_code(), c.code) << status.error_message().substr(0, 1024);
    EXPECT_NE(status.error_message().find(c.field), std::string::npos)
        << status.error_message().substr(0, 1024);
    EXPECT_LT(status.error_message().size(), kMaxEchoMessage)
        << status.error_message().substr(0, 1024);
    ExpectInfers();
  }

  // The metadata of a model that does not exist, named at length.
  grpc::ClientContext context;
  inference::ModelMetadataRequest metadata;
  metadata.set_name(kLong);
  inference::ModelMetadataResponse described;
  const grpc::Status status = stub_->ModelMetadata(&context, metadata, &described);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(status.error_message().find("name: no model 'xxx"), std::string::npos)
      << status.error_message().substr(0, 1024);
  EXPECT_NE(status.error_message().find("(10240 bytes)"), std::string::npos);
  EXPECT_LT(status.error_message().size(), kMaxEchoMessage);
  // Its readiness: a boolean, not an error.
  grpc::ClientContext ready_context;
  inference::ModelReadyRequest ready;
  ready.set_name(kLong);
  inference::ModelReadyResponse answer;
  ASSERT_TRUE(stub_->ModelReady(&ready_context, ready, &answer).ok());
  EXPECT_FALSE(answer.ready());
}

// The protocol's methods beyond this front's six (tritonclient calls several): UNIMPLEMENTED
// with a sentence saying what to use instead, never an empty message.
TEST_F(OipHostileInput, UnservedMethodsSayWhatToUseInstead) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"ModelStreamInfer", "call ModelInfer once per request"},
      {"ModelConfig", "ModelMetadata gives each model's inputs"},
      {"ModelStatistics", "Prometheus metrics"},
      {"RepositoryIndex", "ListImplementations"},
      {"RepositoryModelLoad", "nothing to load or unload"},
      {"RepositoryModelUnload", "nothing to load or unload"},
      {"SystemSharedMemoryStatus", "raw_input_contents"},
      {"CudaSharedMemoryRegister", "raw_input_contents"},
      {"TraceSetting", "ServerLive, ServerReady, ModelReady"},
      // A path past 8 KiB never reaches a server (gRPC refuses the request's headers).
      {std::string(4000, 'x'), "(4000 bytes)"},
  };
  for (const auto& [method, hint] : cases) {
    SCOPED_TRACE(method.substr(0, 64));
    std::string reply;
    const grpc::Status status =
        RawCall(server_.target(), "/inference.GRPCInferenceService/" + method, "", &reply);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED) << status.error_message();
    EXPECT_NE(status.error_message().find("inference.GRPCInferenceService/'"), std::string::npos)
        << status.error_message();
    EXPECT_NE(status.error_message().find(hint), std::string::npos) << status.error_message();
    EXPECT_LT(status.error_message().size(), kMaxEchoMessage);
  }
  ExpectInfers();
}

}  // namespace
}  // namespace kerneleval::testing
