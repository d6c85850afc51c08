// Raw bytes onto the wire as a unary call's request, through gRPC's generic stub: what a
// hostile or broken client sends, with no serialization of ours in between. The catalogues of
// hostile input (Run and Benchmark, Results, Submissions, the Open Inference Protocol) share
// these calls and the bodies that are no message at all.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

namespace kerneleval::testing {

// Sends `bytes` as the request of `method` ("/package.Service/Method") to `target`; the one
// response message, if the call succeeds, goes to `reply`. `bearer_token`, when not empty,
// goes as the authorization header.
inline grpc::Status RawCall(const std::string& target, const std::string& method,
                            const std::string& bytes, std::string* reply,
                            const std::string& bearer_token = "") {
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  if (!bearer_token.empty()) context.AddMetadata("authorization", "Bearer " + bearer_token);
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

// Bodies that parse as no protobuf message whatever its fields.
inline std::vector<std::string> MalformedBodies() {
  return {
      std::string("\x0a\xff\xff\xff\xff\x0f", 6),  // length-delimited field past the end
      std::string("\x0a\x05\x08\x01", 4),          // truncated sub-message
      std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11),  // varint too long
      std::string(64, '\xff'),
  };
}

// Field 1 as 3 bytes that are not UTF-8: no parse where field 1 is a string (or a message of
// which these bytes are none); an unknown field, skipped, in a message with no field 1.
inline std::string BadUtf8InField1() { return std::string("\x0a\x03\xc3\x28u", 5); }

}  // namespace kerneleval::testing
