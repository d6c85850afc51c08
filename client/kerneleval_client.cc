#include "client/kerneleval_client.h"

#include <chrono>
#include <climits>
#include <fstream>
#include <mutex>
#include <sstream>
#include <utility>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/client_callback.h>

#include "client/call_completion.h"
#include "client/raw_messages.h"

namespace kerneleval::client {
namespace {

grpc::Status ReadFile(const std::string& path, const char* what, std::string* contents) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        std::string(what) + ": cannot read '" + path + "'");
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  *contents = buffer.str();
  return grpc::Status::OK;
}

grpc::ByteBuffer ToByteBuffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

grpc::Status FromByteBuffer(const grpc::ByteBuffer& buffer, std::string* bytes) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "cannot read the response bytes");
  }
  bytes->clear();
  for (const grpc::Slice& slice : slices) {
    bytes->append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return grpc::Status::OK;
}

grpc::Status FromAbsl(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

// Sends one request, half-closes, and collects every response until the server finishes.
class OneRequestBidi : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  OneRequestBidi(grpc::GenericStub* stub, grpc::ClientContext* context, const char* method,
                 const std::string& request)
      : request_(ToByteBuffer(request)) {
    stub->PrepareBidiStreamingCall(context, method, grpc::StubOptions(), this);
    StartWriteLast(&request_, grpc::WriteOptions());
    StartRead(&response_);
    StartCall();
  }

  grpc::Status Wait(std::vector<std::string>* responses) {
    grpc::Status status = completion_.Wait();
    *responses = std::move(responses_);
    return status;
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // The stream is over; OnDone follows.
    std::string bytes;
    if (FromByteBuffer(response_, &bytes).ok()) responses_.push_back(std::move(bytes));
    StartRead(&response_);
  }
  void OnDone(const grpc::Status& status) override { completion_.Done(status); }

 private:
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
  std::vector<std::string> responses_;
  CallCompletion completion_;
};

}  // namespace

grpc::Status MakeChannel(const ClientOptions& options, std::shared_ptr<grpc::Channel>* channel) {
  if (!(options.deadline_seconds > 0)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "deadline_seconds must be > 0");
  }
  if (options.max_message_bytes <= 0) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "max_message_bytes must be > 0");
  }
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "tls_cert_file and tls_key_file go together");
  }
  grpc::ChannelArguments args;
  // gRPC takes the limits as int; 1 GiB (the default) fits, larger values are clamped.
  const int max_bytes = static_cast<int>(std::min<int64_t>(options.max_message_bytes, INT_MAX));
  args.SetMaxReceiveMessageSize(max_bytes);
  args.SetMaxSendMessageSize(max_bytes);
  args.SetUserAgentPrefix("kerneleval-client/" KERNELEVAL_VERSION);

  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (options.tls) {
    grpc::SslCredentialsOptions ssl;
    if (!options.tls_ca_file.empty()) {
      grpc::Status status = ReadFile(options.tls_ca_file, "tls_ca_file", &ssl.pem_root_certs);
      if (!status.ok()) return status;
    }
    if (!options.tls_cert_file.empty()) {
      grpc::Status status = ReadFile(options.tls_cert_file, "tls_cert_file", &ssl.pem_cert_chain);
      if (!status.ok()) return status;
      status = ReadFile(options.tls_key_file, "tls_key_file", &ssl.pem_private_key);
      if (!status.ok()) return status;
    }
    if (!options.tls_server_name.empty()) args.SetSslTargetNameOverride(options.tls_server_name);
    credentials = grpc::SslCredentials(ssl);
  } else {
    credentials = grpc::InsecureChannelCredentials();
  }
  *channel = grpc::CreateCustomChannel(options.target, credentials, args);
  return grpc::Status::OK;
}

grpc::Status KernelEvalClient::Create(const ClientOptions& options,
                                      std::unique_ptr<KernelEvalClient>* client) {
  std::shared_ptr<grpc::Channel> channel;
  grpc::Status status = MakeChannel(options, &channel);
  if (!status.ok()) return status;
  *client = std::make_unique<KernelEvalClient>(std::move(channel), options);
  return grpc::Status::OK;
}

KernelEvalClient::KernelEvalClient(std::shared_ptr<grpc::Channel> channel, ClientOptions options)
    : channel_(std::move(channel)),
      options_(std::move(options)),
      stub_(v1::KernelEval::NewStub(channel_)),
      generic_stub_(std::make_unique<grpc::GenericStub>(channel_)) {}

bool KernelEvalClient::WaitForConnection(double seconds) const {
  return channel_->WaitForConnected(std::chrono::system_clock::now() +
                                    std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                        std::chrono::duration<double>(seconds)));
}

std::unique_ptr<grpc::ClientContext> NewCallContext(const ClientOptions& options) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::duration_cast<std::chrono::system_clock::duration>(
                            std::chrono::duration<double>(options.deadline_seconds)));
  if (!options.bearer_token.empty()) {
    context->AddMetadata("authorization", "Bearer " + options.bearer_token);
  }
  return context;
}

std::unique_ptr<grpc::ClientContext> KernelEvalClient::NewContext() const {
  return NewCallContext(options_);
}

grpc::Status KernelEvalClient::Run(const v1::RunRequest& request, v1::RunResponse* response) const {
  return stub_->Run(NewContext().get(), request, response);
}

void CallCanceller::Cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_ = true;
  if (context_ != nullptr) context_->TryCancel();
}

bool CallCanceller::cancelled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

void CallCanceller::Attach(grpc::ClientContext* context) {
  std::lock_guard<std::mutex> lock(mu_);
  context_ = context;
  if (cancelled_) context_->TryCancel();
}

void CallCanceller::Detach() {
  std::lock_guard<std::mutex> lock(mu_);
  context_ = nullptr;
}

grpc::Status KernelEvalClient::Benchmark(
    const v1::BenchmarkRequest& request,
    const std::function<void(const v1::BenchmarkEvent&)>& on_event,
    CallCanceller* canceller) const {
  std::unique_ptr<grpc::ClientContext> context = NewContext();
  std::unique_ptr<grpc::ClientReader<v1::BenchmarkEvent>> reader =
      stub_->Benchmark(context.get(), request);
  if (canceller != nullptr) canceller->Attach(context.get());
  v1::BenchmarkEvent event;
  bool saw_report = false;
  while (reader->Read(&event)) {
    saw_report = saw_report || event.has_report();
    if (on_event) on_event(event);
  }
  grpc::Status status = reader->Finish();
  if (canceller != nullptr) canceller->Detach();
  if (status.ok() && !saw_report) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "the benchmark stream ended without a report");
  }
  return status;
}

grpc::Status KernelEvalClient::ListSuites(v1::ListSuitesResponse* response) const {
  return stub_->ListSuites(NewContext().get(), v1::ListSuitesRequest(), response);
}

grpc::Status KernelEvalClient::ListDevices(v1::ListDevicesResponse* response) const {
  return stub_->ListDevices(NewContext().get(), v1::ListDevicesRequest(), response);
}

grpc::Status KernelEvalClient::ListImplementations(
    const std::string& device, v1::ListImplementationsResponse* response) const {
  v1::ListImplementationsRequest request;
  request.set_device(device);
  return stub_->ListImplementations(NewContext().get(), request, response);
}

grpc::Status KernelEvalClient::HealthCheck(const std::string& service, bool* serving) const {
  *serving = false;
  std::unique_ptr<grpc::ClientContext> context = NewContext();
  const grpc::ByteBuffer request = ToByteBuffer(EncodeHealthCheckRequest(service));
  grpc::ByteBuffer response;
  CallCompletion completion;
  generic_stub_->UnaryCall(context.get(), kHealthCheckMethod, grpc::StubOptions(), &request,
                           &response, [&completion](grpc::Status s) { completion.Done(s); });
  grpc::Status status = completion.Wait();
  if (!status.ok()) return status;
  std::string bytes;
  status = FromByteBuffer(response, &bytes);
  if (!status.ok()) return status;
  absl::StatusOr<ServingStatus> decoded = DecodeHealthCheckResponse(bytes);
  if (!decoded.ok()) return FromAbsl(decoded.status());
  *serving = *decoded == ServingStatus::kServing;
  return grpc::Status::OK;
}

grpc::Status KernelEvalClient::ListReflectionServices(std::vector<std::string>* services) const {
  services->clear();
  std::unique_ptr<grpc::ClientContext> context = NewContext();
  OneRequestBidi call(generic_stub_.get(), context.get(), kReflectionMethod,
                      EncodeListServicesRequest());
  std::vector<std::string> responses;
  grpc::Status status = call.Wait(&responses);
  if (!status.ok()) return status;
  if (responses.empty()) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "reflection answered no response");
  }
  for (const std::string& bytes : responses) {
    absl::StatusOr<std::vector<std::string>> names = DecodeListServicesResponse(bytes);
    if (!names.ok()) return FromAbsl(names.status());
    services->insert(services->end(), names->begin(), names->end());
  }
  return grpc::Status::OK;
}

}  // namespace kerneleval::client
