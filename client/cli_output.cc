#include "client/cli_output.h"

#include <fstream>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "client/report_format.h"
#include "common/enum_names.h"

namespace kerneleval::client::cli {

ClientOptions ToClientOptions(const GlobalFlags& g) {
  ClientOptions options;
  options.target = g.targets.empty() ? options.target : g.targets.front();
  options.deadline_seconds = g.deadline_seconds;
  options.max_message_bytes = g.max_message_mib << 20;
  options.bearer_token = g.token;
  options.tls = g.tls;
  options.tls_ca_file = g.tls_ca;
  options.tls_cert_file = g.tls_cert;
  options.tls_key_file = g.tls_key;
  options.tls_server_name = g.tls_server_name;
  return options;
}

namespace {
// The one address this command dials ("" for several): set once, before any call.
std::string& RpcErrorTarget() {
  static std::string target;
  return target;
}
}  // namespace

void SetRpcErrorTarget(const std::string& target) { RpcErrorTarget() = target; }

int RpcError(std::ostream& err, const grpc::Status& status) {
  err << "error: " << absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code()))
      << ": " << status.error_message() << "\n";
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    const std::string& target = RpcErrorTarget();
    err << "hint: is the server running at " << (target.empty() ? "the --target address" : target)
        << "? (kerneleval-server --listen; --target HOST:PORT, default port 50051)\n";
  } else if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
             absl::StrContains(status.error_message(), "message")) {
    err << "hint: a message exceeded a size limit: raise the server's with "
           "kerneleval-server --max-message-bytes and this client's with --max-message-mib\n";
  }
  return kExitInfrastructure;
}

int PrintJson(const GlobalFlags& g, std::ostream& out, std::ostream& err,
              const google::protobuf::Message& message) {
  absl::StatusOr<std::string> json = g.jsonl ? MessageToJsonLines(message) : MessageToJson(message);
  if (!json.ok()) {
    err << "error: " << json.status().message() << "\n";
    return kExitInfrastructure;
  }
  out << *json << (g.jsonl ? "" : "\n");
  return kExitOk;
}

int LocalError(std::ostream& err, const absl::Status& status, int code) {
  err << "error: " << absl::StatusCodeToString(status.code()) << ": " << status.message() << "\n";
  return code;
}

absl::Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << text;
  file.close();
  if (!file) return absl::PermissionDeniedError("cannot write '" + path + "'");
  return absl::OkStatus();
}

v1::Timer TimerFromFlag(const std::string& flag) {
  return ParseTimerName(flag).value_or(v1::TIMER_UNSPECIFIED);
}

}  // namespace kerneleval::client::cli
