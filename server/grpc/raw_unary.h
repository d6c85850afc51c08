// Unary methods that take their request as bytes and parse it themselves: a body that is not
// the message then gets INVALID_ARGUMENT naming the method, where gRPC's own parse would
// answer UNIMPLEMENTED or INTERNAL with no message. A service marks a method raw with the
// generated WithRawCallbackMethod_<Name> and answers it with RawUnary (the same rule
// server/rpc/kerneleval_service.cc applies to Run and Benchmark).
#pragma once

#include <functional>
#include <memory>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace kerneleval::server {

// INVALID_ARGUMENT naming `method` when `bytes` is not a `Request`.
template <typename Request>
grpc::Status ParseRawRequest(const grpc::ByteBuffer& bytes, const char* method, Request* out) {
  grpc::ByteBuffer copy = bytes;  // shares the slices
  grpc::ProtoBufferReader reader(&copy);
  if (!out->ParseFromZeroCopyStream(&reader)) {
    LogClientFault(absl::StrCat(method, ": request body does not parse"));
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat(method, ": the request body does not parse as ", out->GetTypeName(),
                     " (malformed bytes, or a string field that is not valid UTF-8)"));
  }
  return grpc::Status::OK;
}

enum class RawUnaryThread {
  kInline,  // quick work: answered on gRPC's callback thread
  kOwn,     // long work (a re-run that waits for devices): a thread of its own
};

// Parses, runs `handler` (typed, like a synchronous method), serializes its response and
// finishes the call.
template <typename Request, typename Response>
grpc::ServerUnaryReactor* RawUnary(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request_bytes,
    grpc::ByteBuffer* response_bytes, const char* method,
    std::function<grpc::Status(grpc::CallbackServerContext*, const Request&, Response*)> handler,
    RawUnaryThread thread = RawUnaryThread::kInline) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto request = std::make_shared<Request>();
  if (grpc::Status s = ParseRawRequest(*request_bytes, method, request.get()); !s.ok()) {
    reactor->Finish(s);
    return reactor;
  }
  auto run = [context, reactor, response_bytes, request, handler = std::move(handler)] {
    Response response;
    grpc::Status s = handler(context, *request, &response);
    if (s.ok()) {
      bool own = false;
      s = grpc::SerializationTraits<Response>::Serialize(response, response_bytes, &own);
    }
    reactor->Finish(s);
  };
  if (thread == RawUnaryThread::kOwn) {
    std::thread(std::move(run)).detach();
  } else {
    run();
  }
  return reactor;
}

}  // namespace kerneleval::server
