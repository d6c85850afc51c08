#include "client/bench_command.h"

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/bench_gate.h"
#include "client/cli_output.h"
#include "client/fanout.h"
#include "client/interrupt_watcher.h"
#include "client/kerneleval_client.h"
#include "client/push.h"
#include "client/queue_command.h"
#include "client/report_format.h"
#include "client/text_table.h"
#include "common/bounded_text.h"
#include "common/conversions.h"
#include "common/suites.h"

namespace kerneleval::client::cli {
namespace {

absl::Status BuildBenchRequest(const BenchFlags& flags, v1::BenchmarkRequest* request) {
  if (!flags.suite_file.empty()) {
    std::ifstream file(flags.suite_file, std::ios::binary);
    std::ostringstream text;
    text << file.rdbuf();
    if (!file) return absl::NotFoundError("cannot read '" + flags.suite_file + "'");
    absl::StatusOr<v1::SuiteDefinition> suite = ParseSuiteJson(text.str(), flags.suite_file);
    if (!suite.ok()) return suite.status();
    *request->mutable_custom_suite() = *std::move(suite);
  } else {
    request->set_suite(flags.suite);
  }
  for (const std::string& impl : flags.implementations) request->add_implementations(impl);
  request->set_device(flags.device);
  request->set_all_devices(flags.all_devices);
  v1::Protocol* p = request->mutable_protocol();
  if (flags.warmup) p->set_warmup(*flags.warmup);
  if (flags.repetitions) p->set_repetitions(*flags.repetitions);
  if (flags.adaptive) {
    v1::AdaptiveStop* a = p->mutable_adaptive();
    a->set_min_samples(flags.min_samples);
    a->set_max_samples(flags.max_samples);
    a->set_target_relative_spread(flags.target_spread);
    a->set_max_seconds(flags.max_seconds);
  }
  p->set_cache(flags.hot ? v1::CACHE_MODE_HOT : v1::CACHE_MODE_COLD);
  p->set_cuda_graph(flags.graph);
  p->set_graph_calls(flags.graph_calls);
  p->set_rotate_inputs(flags.rotate);
  p->set_timer(TimerFromFlag(flags.timer));
  if (flags.seed) p->set_seed(*flags.seed);
  p->set_measure_copy_bandwidth(flags.measure_copy);
  p->set_measure_dram_bytes(flags.measure_dram_bytes);
  p->set_profile(flags.profile);
  p->set_check_every_call(flags.check_every_call);
  p->set_max_total_seconds(flags.max_total_seconds);
  return absl::OkStatus();
}

// A one-line bar redrawn in place; only used when stderr is a terminal.
void DrawProgress(std::ostream& err, const v1::BenchmarkProgress& progress) {
  constexpr int kWidth = 30;
  const uint32_t done = progress.workload_index() + 1;
  const uint32_t total = std::max<uint32_t>(progress.workload_count(), done);
  const int filled = static_cast<int>(kWidth * static_cast<double>(done) / total);
  err << "\r\033[K[" << std::string(filled, '#') << std::string(kWidth - filled, '.') << "] "
      << done << "/" << total << " " << progress.workload();
  if (!progress.device().empty()) err << " on " << progress.device();
  err << std::flush;
}

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Pushes every successful target's report; false (after saying why on `err`) if any failed.
bool PushResults(const BenchFlags& flags, const std::vector<TargetResult>& results,
                 std::ostream& err) {
  absl::StatusOr<PushgatewayAddress> gateway = ParsePushgatewayUrl(flags.pushgateway);
  if (!gateway.ok()) {
    LocalError(err, gateway.status(), kExitInfrastructure);
    return false;
  }
  bool ok = true;
  size_t pushed = 0;
  for (const TargetResult& r : results) {
    if (!r.status.ok()) continue;
    absl::Status status =
        PushReport(*gateway, flags.push_job, r.target, r.report, r.finished_unix_seconds);
    if (status.ok()) {
      ++pushed;
    } else {
      err << "error: pushgateway: " << r.target << ": " << absl::StatusCodeToString(status.code())
          << ": " << status.message() << "\n";
      ok = false;
    }
  }
  err << "pushed the results of " << pushed << " target" << (pushed == 1 ? "" : "s") << " to "
      << flags.pushgateway << " (job " << flags.push_job << ")\n";
  return ok;
}

// Writes `text` to --out or `out`; an exit code.
int EmitReport(const BenchFlags& flags, const std::string& text, std::ostream& out,
               std::ostream& err) {
  if (flags.out.empty()) {
    out << text;
  } else if (absl::Status written = WriteText(flags.out, text); !written.ok()) {
    return LocalError(err, written, kExitInfrastructure);
  } else {
    err << "wrote " << flags.out << "\n";
  }
  return kExitOk;
}

int RunBenchFanOut(const CliConfig& config, const std::vector<BenchTarget>& targets,
                   const v1::BenchmarkRequest& request, ReportFormat format, std::ostream& out,
                   std::ostream& err) {
  const BenchFlags& flags = config.bench;
  if (format == ReportFormat::kHtml) {
    err << "error: --format html: one target only; " << config.global.targets.front()
        << " stands for " << targets.size() << " targets\n";
    return kExitUsage;
  }
  if (!flags.compare_to.empty()) {
    err << "error: --compare-to: one target only; " << config.global.targets.front()
        << " stands for " << targets.size() << " targets\n";
    return kExitUsage;
  }
  FanOutOptions options;
  options.concurrency = flags.concurrency;
  if (isatty(STDERR_FILENO) == 1) {
    options.on_done = [&err](const TargetResult& r, size_t done, size_t total) {
      err << "[" << done << "/" << total << "] " << r.target << ": " << StatusText(r.status) << " ("
          << Fixed(r.seconds, 1) << " s)\n"
          << std::flush;
    };
  }
  const std::vector<TargetResult> results =
      RunFanOut(targets, ToClientOptions(config.global), request, options);
  for (const TargetResult& r : results) {
    if (!r.status.ok()) err << "error: " << r.target << ": " << StatusText(r.status) << "\n";
  }
  absl::StatusOr<std::string> text = FormatFanOut(results, format);
  if (!text.ok()) return LocalError(err, text.status(), kExitInfrastructure);
  int code = EmitReport(flags, *text, out, err);
  if (!flags.pushgateway.empty() && !PushResults(flags, results, err)) code = kExitInfrastructure;
  if (code != kExitOk) return code;
  return FanOutExitCode(results);
}

// A bench that ended before its report (Ctrl-C, or the --deadline passed): the results the
// progress events carried, the partial run the server keeps (it stores what a cancelled bench
// measured), and `code`. JSON always gets its document (a script parsing stdout sees complete:
// false, not nothing), even with no results yet. The server sends the run id first
// (BenchmarkStarted) and with each progress event; without it the server has no results
// store, or predates BenchmarkStarted and the first workload had not finished: the client says
// so and where to look.
int Partial(const BenchFlags& flags, v1::BenchmarkReport partial, ReportFormat format,
            const std::string& why, int code, std::ostream& out, std::ostream& err) {
  partial.set_complete(false);
  err << why << " after " << partial.results_size()
      << (partial.results_size() == 1 ? " result" : " results") << "\n";
  if (partial.results_size() > 0 || format == ReportFormat::kJson) {
    if (absl::StatusOr<std::string> text = FormatReport(partial, format); text.ok()) {
      (void)EmitReport(flags, *text, out, err);
    }
  }
  if (!partial.run_id().empty()) {
    err << "partial run stored as run " << partial.run_id() << "\n";
  } else {
    err << "no run id: the server sent none (it keeps no results store, or predates the "
           "started event and no workload had finished); if it kept one, `kerneleval history "
           "--runs --suite "
        << partial.suite() << "` lists it (complete: NO)\n";
  }
  return code;
}

// "incomplete: 1 of 6 results measured, 5 skipped (...)": why a report that came back is not
// a full run, on stderr beside its run id.
void SayIncomplete(const v1::BenchmarkReport& report, std::ostream& err) {
  int skipped = 0;
  for (const v1::WorkloadResult& r : report.results()) {
    skipped += r.status() == v1::RESULT_STATUS_SKIPPED ? 1 : 0;
  }
  err << "incomplete: " << report.results_size() - skipped << " of " << report.results_size()
      << " results measured, " << skipped << " skipped"
      << (report.protocol().max_total_seconds() > 0 ? " (--max-total-seconds cut the run)" : "")
      << "; run " << (report.run_id().empty() ? "not stored" : report.run_id()) << "\n";
}

int RunBench(const CliConfig& config, const KernelEvalClient& client, std::ostream& out,
             std::ostream& err) {
  const BenchFlags& flags = config.bench;
  v1::BenchmarkRequest request;
  if (absl::Status status = BuildBenchRequest(flags, &request); !status.ok()) {
    return LocalError(err, status, kExitUsage);
  }
  if (flags.detach) return RunBenchDetached(config, request, out, err);
  const std::string format_name = !flags.format.empty() ? flags.format
                                  : config.global.jsonl ? "jsonl"
                                  : config.global.json  ? "json"
                                                        : "table";
  const ReportFormat format = ParseReportFormat(format_name).value_or(ReportFormat::kTable);

  // Several targets (or one name with several addresses): the fan-out. One: as always.
  const std::vector<BenchTarget> targets = ExpandTargets(config.global.targets);
  if (targets.size() > 1) return RunBenchFanOut(config, targets, request, format, out, err);

  // A bar redrawn in place on a terminal; elsewhere (a log file, CI) one line per workload.
  const bool terminal = isatty(STDERR_FILENO) == 1;
  bool drew = false;
  v1::BenchmarkReport report;
  v1::BenchmarkReport partial;  // what the progress events carried, for Ctrl-C
  partial.set_suite(request.suite().empty() ? request.custom_suite().name() : request.suite());
  CallCanceller canceller;
  grpc::Status status;
  bool interrupted = false;
  {
    InterruptWatcher watcher([&canceller] { canceller.Cancel(); });
    status = client.Benchmark(
        request,
        [&](const v1::BenchmarkEvent& event) {
          if (event.has_report()) report = event.report();
          if (event.has_started()) {
            // Before any measurement: a Ctrl-C from now on can name the partial run.
            const v1::BenchmarkStarted& started = event.started();
            if (!started.run_id().empty()) partial.set_run_id(started.run_id());
            if (!started.suite().empty()) partial.set_suite(started.suite());
            if (started.has_protocol()) *partial.mutable_protocol() = started.protocol();
            err << FormatStarted(started) << "\n" << std::flush;
          }
          // Anything else (a report, or an event newer than this client) carries no results.
          if (!event.has_progress()) return;
          const v1::BenchmarkProgress& p = event.progress();
          if (!p.run_id().empty()) partial.set_run_id(p.run_id());
          for (const v1::WorkloadResult& r : p.results()) *partial.add_results() = r;
          if (terminal) {
            DrawProgress(err, p);
            drew = true;
          } else {
            err << FormatProgress(p) << "\n" << std::flush;
          }
        },
        &canceller);
    interrupted = watcher.interrupted();
  }
  if (drew) err << "\r\033[K" << std::flush;
  if (interrupted) {
    return Partial(flags, partial, format, "interrupted: cancelled the benchmark", kExitInterrupted,
                   out, err);
  }
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    err << "error: DEADLINE_EXCEEDED: " << status.error_message() << "\n";
    return Partial(
        flags, partial, format,
        absl::StrCat("incomplete: --deadline ", config.global.deadline_seconds, " s passed"),
        kExitIncomplete, out, err);
  }
  if (!status.ok()) return RpcError(err, status);

  absl::StatusOr<std::string> text = FormatReport(report, format);
  if (!text.ok()) return LocalError(err, text.status(), kExitInfrastructure);
  if (const int code = EmitReport(flags, *text, out, err); code != kExitOk) return code;
  // JSON carries run_id itself; the other formats say it beside the report.
  if (!report.run_id().empty() && format != ReportFormat::kJson) {
    err << "stored as run " << report.run_id() << "\n";
  }
  if (!flags.pushgateway.empty()) {
    TargetResult result;
    result.target = client.options().target;
    result.report = std::move(report);
    result.finished_unix_seconds = UnixNow();
    const bool pushed = PushResults(flags, {result}, err);
    report = std::move(result.report);
    if (!pushed) return kExitInfrastructure;
  }
  if (HasFailedResult(report)) return kExitIncorrect;
  if (IsIncomplete(report)) {
    SayIncomplete(report, err);
    if (!flags.compare_to.empty()) err << "not compared: the run is incomplete\n";
    return kExitIncomplete;
  }
  if (!flags.compare_to.empty()) {
    return GateAgainstBaseline(config, report.run_id(), format == ReportFormat::kTable, out, err);
  }
  return kExitOk;
}

}  // namespace

int RunBenchCommand(const CliConfig& config, std::ostream& out, std::ostream& err) {
  std::unique_ptr<KernelEvalClient> client;
  if (grpc::Status status = KernelEvalClient::Create(ToClientOptions(config.global), &client);
      !status.ok()) {
    err << "error: " << status.error_message() << "\n";
    return kExitUsage;
  }
  return RunBench(config, *client, out, err);
}

}  // namespace kerneleval::client::cli
