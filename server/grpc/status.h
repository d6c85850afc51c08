// absl::Status -> grpc::Status, one rule for every service: the same code (the two enums share
// their numbers, so RESOURCE_EXHAUSTED stays RESOURCE_EXHAUSTED and ABORTED stays ABORTED) and
// the message, cut to `max_message_bytes` with a note saying so where a service bounds it.
#pragma once

#include <cstddef>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kerneleval::server {

inline grpc::Status ToGrpcStatus(const absl::Status& status,
                                 std::size_t max_message_bytes = std::string::npos) {
  if (status.ok()) return grpc::Status::OK;
  std::string message(status.message());
  if (message.size() > max_message_bytes) {
    const std::string note = absl::StrCat(" ... (message cut: ", message.size(), " bytes)");
    message = absl::StrCat(message.substr(0, max_message_bytes - note.size()), note);
  }
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::move(message));
}

}  // namespace kerneleval::server
