// The client against an in-process fake KernelEval service on a loopback port, with the real
// gRPC health service and server reflection: metadata, deadlines, streaming, large messages.
#include "client/kerneleval_client.h"

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <gtest/gtest.h>

namespace kerneleval::client {
namespace {

constexpr int kLargeBytes = 24 << 20;  // Well above gRPC's 4 MiB default receive limit.

class FakeService final : public v1::KernelEval::Service {
 public:
  grpc::Status Run(grpc::ServerContext* context, const v1::RunRequest* request,
                   v1::RunResponse* response) override {
    if (request->device() == "slow") std::this_thread::sleep_for(std::chrono::milliseconds(800));
    const auto auth = context->client_metadata().find("authorization");
    if (auth != context->client_metadata().end()) {
      response->set_implementation(std::string(auth->second.data(), auth->second.size()));
    }
    // Echo the input back so that large messages cross in both directions.
    *response->mutable_output() = request->hidden_states();
    return grpc::Status::OK;
  }

  grpc::Status Benchmark(grpc::ServerContext*, const v1::BenchmarkRequest* request,
                         grpc::ServerWriter<v1::BenchmarkEvent>* writer) override {
    for (uint32_t i = 0; i < 2; ++i) {
      v1::BenchmarkEvent event;
      event.mutable_progress()->set_workload_index(i);
      event.mutable_progress()->set_workload_count(2);
      writer->Write(event);
    }
    if (request->suite() == "no_report") return grpc::Status::OK;
    if (request->suite() == "missing") return grpc::Status(grpc::StatusCode::NOT_FOUND, "suite");
    v1::BenchmarkEvent event;
    event.mutable_report()->set_suite(request->suite());
    writer->Write(event);
    return grpc::Status::OK;
  }

  grpc::Status ListDevices(grpc::ServerContext*, const v1::ListDevicesRequest*,
                           v1::ListDevicesResponse* response) override {
    response->add_devices()->set_name("cpu");
    return grpc::Status::OK;
  }

  grpc::Status ListImplementations(grpc::ServerContext*,
                                   const v1::ListImplementationsRequest* request,
                                   v1::ListImplementationsResponse* response) override {
    response->add_implementations()->set_name("impl_for_" + request->device());
    return grpc::Status::OK;
  }
};

class ClientLoopbackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::EnableDefaultHealthCheckService(true);
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.SetMaxReceiveMessageSize(64 << 20);
    builder.SetMaxSendMessageSize(64 << 20);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    server_->GetHealthCheckService()->SetServingStatus("readiness", false);
  }
  void TearDown() override { server_->Shutdown(); }

  std::unique_ptr<KernelEvalClient> Client(ClientOptions options = {}) {
    options.target = "127.0.0.1:" + std::to_string(port_);
    std::unique_ptr<KernelEvalClient> client;
    EXPECT_TRUE(KernelEvalClient::Create(options, &client).ok());
    return client;
  }

  FakeService service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

TEST_F(ClientLoopbackTest, SendsBearerToken) {
  ClientOptions options;
  options.bearer_token = "secret";
  v1::RunResponse response;
  ASSERT_TRUE(Client(options)->Run(v1::RunRequest(), &response).ok());
  EXPECT_EQ(response.implementation(), "Bearer secret");
  ASSERT_TRUE(Client()->Run(v1::RunRequest(), &response).ok());
  EXPECT_EQ(response.implementation(), "") << "no token, no metadata";
}

TEST_F(ClientLoopbackTest, LargeMessagesCrossBothWays) {
  v1::RunRequest request;
  request.mutable_hidden_states()->mutable_data()->assign(kLargeBytes, 'x');
  v1::RunResponse response;
  const grpc::Status status = Client()->Run(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.output().data().size(), static_cast<size_t>(kLargeBytes));
}

TEST_F(ClientLoopbackTest, DeadlineApplies) {
  ClientOptions options;
  options.deadline_seconds = 0.2;
  v1::RunRequest request;
  request.set_device("slow");
  v1::RunResponse response;
  EXPECT_EQ(Client(options)->Run(request, &response).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
}

TEST_F(ClientLoopbackTest, BenchmarkStreamsEventsInOrder) {
  v1::BenchmarkRequest request;
  request.set_suite("s");
  std::vector<std::string> kinds;
  const grpc::Status status =
      Client()->Benchmark(request, [&kinds](const v1::BenchmarkEvent& event) {
        kinds.push_back(event.has_report() ? "report:" + event.report().suite() : "progress");
      });
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(kinds, (std::vector<std::string>{"progress", "progress", "report:s"}));
}

TEST_F(ClientLoopbackTest, BenchmarkWithoutReportOrWithErrorFails) {
  v1::BenchmarkRequest request;
  request.set_suite("no_report");
  EXPECT_EQ(Client()->Benchmark(request, nullptr).error_code(), grpc::StatusCode::INTERNAL);
  request.set_suite("missing");
  EXPECT_EQ(Client()->Benchmark(request, nullptr).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(ClientLoopbackTest, DiscoveryCalls) {
  v1::ListDevicesResponse devices;
  ASSERT_TRUE(Client()->ListDevices(&devices).ok());
  EXPECT_EQ(devices.devices(0).name(), "cpu");
  v1::ListImplementationsResponse impls;
  ASSERT_TRUE(Client()->ListImplementations("cuda:0", &impls).ok());
  EXPECT_EQ(impls.implementations(0).name(), "impl_for_cuda:0");
  v1::ListSuitesResponse suites;
  EXPECT_EQ(Client()->ListSuites(&suites).error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

TEST_F(ClientLoopbackTest, HealthCheck) {
  bool serving = false;
  ASSERT_TRUE(Client()->HealthCheck("", &serving).ok());
  EXPECT_TRUE(serving);
  ASSERT_TRUE(Client()->HealthCheck("readiness", &serving).ok());
  EXPECT_FALSE(serving);
  server_->GetHealthCheckService()->SetServingStatus("readiness", true);
  ASSERT_TRUE(Client()->HealthCheck("readiness", &serving).ok());
  EXPECT_TRUE(serving);
  EXPECT_EQ(Client()->HealthCheck("nope", &serving).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(ClientLoopbackTest, ReflectionListsServices) {
  std::vector<std::string> services;
  const grpc::Status status = Client()->ListReflectionServices(&services);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_NE(std::find(services.begin(), services.end(), "kerneleval.v1.KernelEval"),
            services.end());
  EXPECT_NE(std::find(services.begin(), services.end(), "grpc.health.v1.Health"), services.end());
}

TEST(ClientOptionsTest, RejectsBadOptions) {
  std::unique_ptr<KernelEvalClient> client;
  ClientOptions options;
  options.deadline_seconds = 0;
  EXPECT_EQ(KernelEvalClient::Create(options, &client).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  options = ClientOptions();
  options.tls = true;
  options.tls_ca_file = "/nonexistent/ca.pem";
  EXPECT_EQ(KernelEvalClient::Create(options, &client).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  options.tls_ca_file.clear();
  options.tls_cert_file = "cert.pem";
  EXPECT_EQ(KernelEvalClient::Create(options, &client).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace kerneleval::client
