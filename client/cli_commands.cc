// Command execution for the CLI: builds requests from parsed flags, calls the client, formats.
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/bench_command.h"
#include "client/cli.h"
#include "client/fanout.h"
#include "client/interrupt_watcher.h"
#include "client/kerneleval_client.h"
#include "client/npy.h"
#include "client/push.h"
#include "client/report_format.h"
#include "client/safetensors.h"
#include "client/tensors.h"
#include "client/text_table.h"
#include "common/bounded_text.h"
#include "common/conversions.h"
#include "common/suites.h"

namespace kerneleval::client::cli {
namespace {

// Prints `message` as JSON or via `format` (a text formatter).
template <typename Message, typename Format>
int Print(const CliConfig& config, std::ostream& out, std::ostream& err, const Message& message,
          Format format) {
  if (config.global.json) return PrintJson(config.global, out, err, message);
  out << format(message);
  return kExitOk;
}

absl::Status BuildRunRequest(const RunFlags& flags, v1::RunRequest* request) {
  const std::optional<v1::Mode> mode = ParseModeName(flags.mode);
  if (!mode) return absl::InvalidArgumentError("--mode: unknown mode " + Quote(flags.mode));
  request->set_mode(*mode);
  if (!flags.hidden_states_npy.empty()) {
    for (const auto& [path, tensor] :
         {std::pair{&flags.hidden_states_npy, request->mutable_hidden_states()},
          {&flags.residual_npy, request->mutable_residual()},
          {&flags.weight_npy, request->mutable_weight()}}) {
      absl::StatusOr<v1::Tensor> read = ReadNpy(*path);
      if (!read.ok()) return read.status();
      *tensor = std::move(*read);
    }
  } else if (absl::EndsWith(flags.input, ".npy") || absl::EndsWith(flags.input, ".npz")) {
    return absl::InvalidArgumentError(
        flags.input +
        ": --input takes a safetensors file; give NumPy arrays as --hidden-states, --residual "
        "and --weight, one .npy file each");
  } else if (!flags.input.empty()) {
    absl::StatusOr<SafetensorsFile> file = ReadSafetensors(flags.input);
    if (!file.ok()) return file.status();
    for (const char* name : {"hidden_states", "residual", "weight"}) {
      if (file->tensors.count(name) == 0) {
        return absl::InvalidArgumentError(flags.input + ": no tensor named " + name);
      }
    }
    *request->mutable_hidden_states() = std::move(file->tensors["hidden_states"]);
    *request->mutable_residual() = std::move(file->tensors["residual"]);
    *request->mutable_weight() = std::move(file->tensors["weight"]);
  } else {
    const std::optional<v1::DType> dtype = ParseDTypeName(flags.dtype);
    if (!dtype) return absl::InvalidArgumentError("--dtype: unknown dtype " + Quote(flags.dtype));
    SetRandomInputs(*dtype, flags.batch, flags.hidden, flags.seed, request);
  }
  if (flags.eps > 0) request->set_eps(flags.eps);
  request->set_device(flags.device);
  request->set_implementation(flags.implementation);
  request->set_check_correctness(flags.check);
  request->set_warmup(flags.warmup);
  request->set_repetitions(flags.repetitions);
  request->set_timer(TimerFromFlag(flags.timer));
  request->set_profile(flags.profile);
  // Outputs cross the wire only when they are going to be saved.
  request->set_omit_outputs(flags.output.empty());
  return absl::OkStatus();
}

int RunRun(const CliConfig& config, const KernelEvalClient& client, std::ostream& out,
           std::ostream& err) {
  v1::RunRequest request;
  if (absl::Status status = BuildRunRequest(config.run, &request); !status.ok()) {
    return LocalError(err, status, kExitUsage);
  }
  v1::RunResponse response;
  if (grpc::Status status = client.Run(request, &response); !status.ok()) {
    return RpcError(err, status);
  }
  if (!config.run.output.empty()) {
    SafetensorsFile file;
    file.tensors["output"] = response.output();
    if (response.has_residual_out() && !response.residual_out().data().empty()) {
      file.tensors["residual_out"] = response.residual_out();
    }
    file.metadata = {{"device", response.device()},
                     {"implementation", response.implementation()},
                     {"mode", ModeShortName(request.mode())}};
    if (absl::Status status = WriteSafetensors(config.run.output, file); !status.ok()) {
      return LocalError(err, status, kExitInfrastructure);
    }
  }
  // Tensor bytes are not for a terminal (they went to --output if asked for).
  if (response.has_output()) response.mutable_output()->clear_data();
  if (response.has_residual_out()) response.mutable_residual_out()->clear_data();
  const int printed = Print(config, out, err, response, FormatRunResponse);
  if (printed != kExitOk) return printed;
  // `run` checks an answer; its default of one timed call is no measurement, and says so.
  if (config.run.repetitions == 1) {
    err << "note: one timed call (--repetitions 1) after " << config.run.warmup
        << " warm-up calls: its latency is a single sample; for a stable figure use "
           "--warmup 10 --repetitions 50, or `kerneleval bench`\n";
  }
  // A wrong answer, or one an anti-cheat check caught, is not a result a script may use.
  const v1::Correctness& c = response.correctness();
  const bool failed = (c.checked() && !c.passed()) ||
                      response.status() == v1::RESULT_STATUS_INCORRECT ||
                      response.status() == v1::RESULT_STATUS_REJECTED;
  return failed ? kExitIncorrect : kExitOk;
}

int RunHealth(const CliConfig& config, const KernelEvalClient& client, std::ostream& out,
              std::ostream& err) {
  bool serving = false;
  if (grpc::Status status = client.HealthCheck(config.health_service, &serving); !status.ok()) {
    return RpcError(err, status);
  }
  const char* word = serving ? "SERVING" : "NOT_SERVING";
  if (config.global.json) {
    out << "{\"status\": \"" << word << "\"}\n";
  } else {
    out << word << "\n";
  }
  return serving ? kExitOk : kExitInfrastructure;
}

int RunServices(const CliConfig& config, const KernelEvalClient& client, std::ostream& out,
                std::ostream& err) {
  std::vector<std::string> services;
  if (grpc::Status status = client.ListReflectionServices(&services); !status.ok()) {
    return RpcError(err, status);
  }
  if (config.global.json) {
    out << "[";
    for (size_t i = 0; i < services.size(); ++i) {
      out << (i ? ", " : "") << "\"" << services[i] << "\"";
    }
    out << "]\n";
  } else {
    for (const std::string& s : services) out << s << "\n";
  }
  return kExitOk;
}

}  // namespace

int RunCommand(const CliConfig& config, std::ostream& out, std::ostream& err) {
  std::unique_ptr<KernelEvalClient> client;
  if (grpc::Status status = KernelEvalClient::Create(ToClientOptions(config.global), &client);
      !status.ok()) {
    err << "error: " << status.error_message() << "\n";
    return kExitUsage;
  }
  const std::string& command = config.command;
  if (command == "devices") {
    v1::ListDevicesResponse response;
    if (grpc::Status s = client->ListDevices(&response); !s.ok()) return RpcError(err, s);
    return Print(config, out, err, response, FormatDevices);
  }
  if (command == "suites") {
    v1::ListSuitesResponse response;
    if (grpc::Status s = client->ListSuites(&response); !s.ok()) return RpcError(err, s);
    return Print(config, out, err, response, FormatSuites);
  }
  if (command == "implementations") {
    v1::ListImplementationsResponse response;
    if (grpc::Status s = client->ListImplementations(config.implementations_device, &response);
        !s.ok()) {
      return RpcError(err, s);
    }
    return Print(config, out, err, response, FormatImplementations);
  }
  if (command == "health") return RunHealth(config, *client, out, err);
  if (command == "services") return RunServices(config, *client, out, err);
  if (command == "run") return RunRun(config, *client, out, err);
  if (command == "bench") return RunBenchCommand(config, out, err);
  err << "error: unknown command '" << command << "'\n";
  return kExitUsage;
}

}  // namespace kerneleval::client::cli
