#include "client/queue_command.h"

#include <ctime>
#include <ostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cli_output.h"
#include "client/interrupt_watcher.h"
#include "client/queue_client.h"
#include "client/report_format.h"
#include "client/text_table.h"
#include "common/enum_names.h"

namespace kerneleval::client::cli {
namespace {

// As every format prints the contract's enums (common/enum_names.h): "queued", "waited_for".
std::string StateName(v1::JobState state) {
  return EnumShortName(*v1::JobState_descriptor(), state);
}

std::string PriorityName(v1::JobPriority priority) {
  return EnumShortName(*v1::JobPriority_descriptor(), priority);
}

std::string Estimate(const v1::Job& job) {
  if (job.state() != v1::JOB_STATE_QUEUED || job.estimated_start_seconds() <= 0) return "-";
  return absl::StrCat("~", FormatSeconds(job.estimated_start_seconds()));
}

// One line of what a job is doing now.
std::string Describe(const v1::Job& job) {
  std::string line = absl::StrCat("run ", job.run_id(), ": ", StateName(job.state()));
  switch (job.state()) {
    case v1::JOB_STATE_QUEUED:
      absl::StrAppend(&line, ", position ", job.position(), " among ", job.device_kind(), " jobs");
      if (job.estimated_start_seconds() > 0) {
        absl::StrAppend(&line, ", starts in ", Estimate(job).substr(1));
      }
      break;
    case v1::JOB_STATE_RUNNING:
      absl::StrAppend(&line, " on ", job.worker(), " (attempt ", job.attempts(), " of ",
                      job.max_attempts(), ")");
      if (job.cancel_requested()) line += ", cancel requested";
      break;
    default:
      break;
  }
  if (!job.message().empty()) absl::StrAppend(&line, ": ", job.message());
  return line + "\n";
}

// done: 0; cancelled (what finished is stored): incomplete; failed: infrastructure.
int ExitOf(const v1::Job& job) {
  switch (job.state()) {
    case v1::JOB_STATE_DONE:
      return job.message().empty() ? kExitOk : kExitIncomplete;
    case v1::JOB_STATE_CANCELLED:
      return kExitIncomplete;
    default:
      return kExitInfrastructure;
  }
}

std::string FormatJobs(const v1::ListJobsResponse& response) {
  TextTable table({"run", "state", "position", "starts in", "suite", "kind", "priority", "worker",
                   "attempts", "message"});
  for (const v1::Job& job : response.jobs()) {
    table.AddRow({job.run_id().substr(0, 12), StateName(job.state()),
                  job.position() > 0 ? std::to_string(job.position()) : "-", Estimate(job),
                  job.suite(), job.device_kind(), PriorityName(job.priority()),
                  job.worker().empty() ? "-" : job.worker(),
                  absl::StrCat(job.attempts(), "/", job.max_attempts()), job.message()});
  }
  return absl::StrCat(table.Render(), "\n", response.jobs_size(), " of your jobs; the queue holds ",
                      response.queued_total(), " queued and ", response.running_total(),
                      " running jobs of every owner\n");
}

std::unique_ptr<QueueClient> Connect(const CliConfig& config, std::ostream& err) {
  const ClientOptions options = ToClientOptions(config.global);
  std::shared_ptr<grpc::Channel> channel;
  if (grpc::Status s = MakeChannel(options, &channel); !s.ok()) {
    err << "error: " << s.error_message() << "\n";
    return nullptr;
  }
  return std::make_unique<QueueClient>(channel, options);
}

int Watch(const CliConfig& config, const QueueClient& client, std::ostream& out,
          std::ostream& err) {
  v1::Job last;
  CallCanceller canceller;
  grpc::Status status;
  bool printed_error = false;
  {
    InterruptWatcher watcher([&canceller] { canceller.Cancel(); });
    status = client.Watch(
        config.queue.run,
        [&](const v1::Job& job) {
          last = job;
          if (!config.global.json) {
            out << Describe(job) << std::flush;
          } else if (PrintJson(config.global, out, err, job) != kExitOk) {
            printed_error = true;
          }
        },
        &canceller);
  }
  if (canceller.cancelled()) {
    err << "stopped watching; the job goes on (kerneleval watch " << config.queue.run << ")\n";
    return kExitInterrupted;
  }
  if (!status.ok()) return RpcError(err, status);
  if (printed_error) return kExitInfrastructure;
  if (last.state() == v1::JOB_STATE_DONE || last.state() == v1::JOB_STATE_CANCELLED) {
    if (!config.global.json) {
      err << "results: kerneleval history --run " << last.run_id() << "\n";
    }
  }
  return ExitOf(last);
}

}  // namespace

const std::vector<std::string>& PrioritySpellings() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    const google::protobuf::EnumDescriptor& type = *v1::JobPriority_descriptor();
    for (int i = 0; i < type.value_count(); ++i) {
      out.push_back(EnumShortName(type, type.value(i)->number()));
    }
    return out;
  }();
  return names;
}

void AddQueueCommands(CLI::App* app, QueueFlags* flags) {
  CLI::App* watch =
      app->add_subcommand("watch", "Follow a queued job (bench --detach) until it ends");
  watch->add_option("run", flags->run, "Run id (or its first 8 characters or more)")->required();
  CLI::App* cancel = app->add_subcommand("cancel", "Cancel a queued or running job of yours");
  cancel->add_option("run", flags->run, "Run id (or its first 8 characters or more)")->required();
  CLI::App* queue =
      app->add_subcommand("queue", "Your queued and running jobs, with positions and estimates");
  queue
      ->add_option("--ended-within", flags->ended_within_seconds,
                   "Also jobs that ended within this many seconds")
      ->check(CLI::Range(1u, 30u * 86400u))
      ->capture_default_str();
  queue->add_option("--limit", flags->limit, "At most this many jobs")
      ->check(CLI::Range(1u, 1000u))
      ->capture_default_str();
}

bool IsQueueCommand(const std::string& command) {
  return command == "watch" || command == "cancel" || command == "queue";
}

int RunQueueCommand(const CliConfig& config, std::ostream& out, std::ostream& err) {
  const std::unique_ptr<QueueClient> client = Connect(config, err);
  if (client == nullptr) return kExitUsage;
  if (config.command == "watch") return Watch(config, *client, out, err);
  if (config.command == "cancel") {
    v1::Job job;
    if (grpc::Status s = client->Cancel(config.queue.run, &job); !s.ok()) return RpcError(err, s);
    if (config.global.json) return PrintJson(config.global, out, err, job);
    out << Describe(job);
    return kExitOk;
  }
  v1::ListJobsRequest request;
  request.set_ended_within_seconds(config.queue.ended_within_seconds);
  request.set_limit(config.queue.limit);
  v1::ListJobsResponse response;
  if (grpc::Status s = client->List(request, &response); !s.ok()) return RpcError(err, s);
  if (config.global.json) return PrintJson(config.global, out, err, response);
  out << FormatJobs(response);
  return kExitOk;
}

int RunBenchDetached(const CliConfig& config, const v1::BenchmarkRequest& request,
                     std::ostream& out, std::ostream& err) {
  const std::unique_ptr<QueueClient> client = Connect(config, err);
  if (client == nullptr) return kExitUsage;
  v1::EnqueueRequest enqueue;
  *enqueue.mutable_benchmark() = request;
  for (v1::JobPriority p :
       {v1::JOB_PRIORITY_WAITED_FOR, v1::JOB_PRIORITY_SCHEDULED, v1::JOB_PRIORITY_REPRODUCTION}) {
    if (PriorityName(p) == config.bench.priority) enqueue.set_priority(p);
  }
  enqueue.set_runs_on(config.bench.runs_on);
  v1::Job job;
  if (grpc::Status s = client->Enqueue(enqueue, &job); !s.ok()) return RpcError(err, s);
  if (config.global.json) return PrintJson(config.global, out, err, job);
  out << Describe(job);
  err << "follow it: kerneleval watch " << job.run_id() << "\n";
  return kExitOk;
}

}  // namespace kerneleval::client::cli
