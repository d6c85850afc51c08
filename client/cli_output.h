// What every command shares once it has its flags (defined in client/cli_output.cc).
#pragma once

#include <iosfwd>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "client/cli_config.h"
#include "client/kerneleval_client.h"
#include "google/protobuf/message.h"
#include "kerneleval/v1/kerneleval.pb.h"

namespace kerneleval::client::cli {

// What every command shares: the connection the global flags
// describe, and an RPC error printed as "error: CODE: message" (returns
// kExitInfrastructure).
// RpcError adds what to do where the code says it: UNAVAILABLE asks whether the server runs
// at the address (SetRpcErrorTarget, which parsing sets), RESOURCE_EXHAUSTED names the
// message-size flags of both sides.
ClientOptions ToClientOptions(const GlobalFlags& g);
int RpcError(std::ostream& err, const grpc::Status& status);
void SetRpcErrorTarget(const std::string& target);
// `message` as JSON (report_format.h MessageToJson) and a newline, or with --jsonl as JSON
// Lines (MessageToJsonLines); kExitOk, or kExitInfrastructure with "error: message" when it cannot
// be printed.
int PrintJson(const GlobalFlags& g, std::ostream& out, std::ostream& err,
              const google::protobuf::Message& message);

// "error: CODE: message" for a failure found here (a file, a flag), returning `code`.
int LocalError(std::ostream& err, const absl::Status& status, int code);

// Writes `text` to `path` (replacing it); PERMISSION_DENIED naming the path when it cannot.
absl::Status WriteText(const std::string& path, const std::string& text);

// --timer: auto (the server's choice), or a timer's name or alias (common/enum_names.h);
// the flag's check admits nothing else.
v1::Timer TimerFromFlag(const std::string& flag);

}  // namespace kerneleval::client::cli
