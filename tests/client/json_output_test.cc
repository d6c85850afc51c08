// The CLI's JSON for programs, through a real server on loopback: every JSON output
// (bench --format json and jsonl, run, devices, history, history --runs, compare,
// leaderboard, export) is walked beside the message's descriptor, and every 64-bit integer
// must be a JSON number and every enum the contract's short name. The oracle for the names
// is the contract itself (the value's name without the enum's prefix, in lower case), not
// the table the CLI prints from. The bug this stops: `jq '.batch_size > 100'` matching a
// batch of 1 because protobuf's mapping prints int64 as "1".
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <thread>

#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "client/cli.h"
#include "client/report_format.h"
#include "client/results_command.h"
#include "client/submit_command.h"
#include "kerneleval/v1/results.pb.h"
#include "kerneleval/v1/submissions.pb.h"
#include "test_server.h"

namespace kerneleval::testing {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::EnumDescriptor;
using google::protobuf::FieldDescriptor;
using Json = nlohmann::json;

struct Outcome {
  int rc = -1;
  std::string out, err;
};

// `kerneleval --target T ARGS...`, parsed and dispatched as main does.
Outcome Cli(const std::string& target, std::vector<std::string> args) {
  args.insert(args.begin(), {"--target", target});
  client::cli::CliConfig config;
  Outcome o;
  if (absl::Status s = client::cli::ParseArgs(args, &config); !s.ok()) {
    o.rc = client::cli::kExitUsage;
    o.err = std::string(s.message());
    return o;
  }
  std::ostringstream out, err;
  if (client::cli::IsResultsCommand(config.command)) {
    o.rc = client::cli::RunResultsCommand(config, *client::cli::ProcessResultsFlags(), out, err);
  } else if (client::cli::IsSubmitCommand(config.command)) {
    o.rc = client::cli::RunSubmitCommand(config, out, err);
  } else {
    o.rc = client::cli::RunCommand(config, out, err);
  }
  o.out = out.str();
  o.err = err.str();
  return o;
}

// "CacheMode" -> "CACHE_MODE_", "DType" -> "DTYPE_": the prefix protobuf's style guide
// gives an enum's values (a word starts at an upper-case letter after a lower-case one).
std::string StylePrefix(const EnumDescriptor& type) {
  std::string prefix;
  const std::string& name = type.name();
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (i > 0 && absl::ascii_isupper(name[i]) && absl::ascii_islower(name[i - 1])) prefix += '_';
    prefix += absl::ascii_toupper(name[i]);
  }
  return prefix + "_";
}

// The names a value of `type` may print as: each value's contract name without the prefix,
// in lower case, and what the contract says the unspecified values mean.
std::set<std::string> AllowedNames(const EnumDescriptor& type) {
  std::set<std::string> names = {"auto", "output", "cold"};
  const std::string prefix = StylePrefix(type);
  for (int i = 0; i < type.value_count(); ++i) {
    const std::string name = type.value(i)->name();
    EXPECT_EQ(name.rfind(prefix, 0), 0u) << name << " lacks " << prefix;
    names.insert(absl::AsciiStrToLower(name.substr(prefix.size())));
  }
  return names;
}

struct Seen {
  int integers = 0;  // 64-bit integer values checked
  int enums = 0;
};

void Walk(const Descriptor& type, const Json& object, const std::string& path, Seen* seen);

void CheckValue(const FieldDescriptor& field, const Json& value, const std::string& path,
                Seen* seen) {
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT64:
    case FieldDescriptor::CPPTYPE_UINT64:
      EXPECT_TRUE(value.is_number_integer()) << path << " = " << value.dump();
      ++seen->integers;
      return;
    case FieldDescriptor::CPPTYPE_ENUM:
      ASSERT_TRUE(value.is_string()) << path << " = " << value.dump();
      EXPECT_TRUE(AllowedNames(*field.enum_type()).count(value.get<std::string>()))
          << path << " = " << value.dump();
      ++seen->enums;
      return;
    case FieldDescriptor::CPPTYPE_DOUBLE:
    case FieldDescriptor::CPPTYPE_FLOAT:
      EXPECT_TRUE(value.is_number() || value.is_null()) << path << " = " << value.dump();
      return;
    case FieldDescriptor::CPPTYPE_MESSAGE:
      Walk(*field.message_type(), value, path, seen);
      return;
    default:
      return;
  }
}

void Walk(const Descriptor& type, const Json& object, const std::string& path, Seen* seen) {
  ASSERT_TRUE(object.is_object()) << path;
  for (const auto& [key, value] : object.items()) {
    const FieldDescriptor* field = type.FindFieldByName(key);
    if (field == nullptr) continue;  // jsonl's run_id and suite beside a result's fields
    const std::string at = path + "." + key;
    if (field->is_map()) {
      for (const auto& [k, v] : value.items()) {
        CheckValue(*field->message_type()->map_value(), v, at + "." + k, seen);
      }
    } else if (field->is_repeated()) {
      ASSERT_TRUE(value.is_array()) << at;
      for (std::size_t i = 0; i < value.size(); ++i) {
        CheckValue(*field, value[i], at + "[" + std::to_string(i) + "]", seen);
      }
    } else {
      CheckValue(*field, value, at, seen);
    }
  }
}

// Parses `text` as one document of `type` and checks it; what it saw.
Seen CheckDocument(const Descriptor& type, const std::string& text) {
  Seen seen;
  const Json doc = Json::parse(text, nullptr, false);
  EXPECT_FALSE(doc.is_discarded()) << text.substr(0, 400);
  if (!doc.is_discarded()) Walk(type, doc, type.name(), &seen);
  EXPECT_EQ(text.find("\"TIMER_"), std::string::npos);
  EXPECT_EQ(text.find("\"DTYPE_"), std::string::npos);
  EXPECT_EQ(text.find("\"RESULT_STATUS_"), std::string::npos);
  return seen;
}

std::string SuiteFile() {
  const std::string path = ::testing::TempDir() + "/json_output_suite.json";
  std::ofstream(path) << R"({"name": "json_output", "op_type": "fused_add_rmsnorm",
  "mode": "output",
  "axes": {"batch_size": {"type": "var"}, "hidden_size": {"type": "const", "value": 64}},
  "inputs": {
    "hidden_states": {"shape": ["batch_size", "hidden_size"], "dtype": "float32"},
    "residual": {"shape": ["batch_size", "hidden_size"], "dtype": "float32"},
    "weight": {"shape": ["hidden_size"], "dtype": "float32"}
  },
  "outputs": {"output": {"shape": ["batch_size", "hidden_size"], "dtype": "float32"}},
  "workloads": [{"axes": {"batch_size": 1}}, {"axes": {"batch_size": 257}}]})";
  return path;
}

std::vector<std::string> BenchArgs(const std::string& format) {
  return {"bench", "--suite-file",  SuiteFile(), "--impl",  "cpu_fused", "--warmup",
          "1",     "--repetitions", "5",         "--timer", "host",      "--format",
          format};
}

// The store's writer thread records a run after the Benchmark answer: polls history.
void WaitForRun(const std::string& target, const std::string& run_id) {
  for (int i = 0; i < 100; ++i) {
    const Outcome o = Cli(target, {"history", "--run", run_id, "--json"});
    if (o.rc == 0 && o.out.find("\"result\"") != std::string::npos) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ADD_FAILURE() << "run " << run_id << " never appeared in history";
}

TEST(CliJson, EveryOutputPrintsIntegersAsNumbersAndEnumsByTheirShortNames) {
  TestServer t = StartServer();
  ASSERT_NE(t.server, nullptr);
  const std::string target = t.target();

  const Outcome bench = Cli(target, BenchArgs("json"));
  ASSERT_EQ(bench.rc, 0) << bench.err;
  const Seen bench_seen = CheckDocument(*v1::BenchmarkReport::descriptor(), bench.out);
  EXPECT_GT(bench_seen.integers, 4);
  EXPECT_GT(bench_seen.enums, 4);
  const Json report = Json::parse(bench.out);
  // What `jq '.results[] | select(.axes.batch_size > 100)'` sees: the batch of 257 only.
  int large = 0;
  for (const Json& r : report["results"]) large += r["axes"]["batch_size"].get<int64_t>() > 100;
  EXPECT_EQ(large, 1) << report["results"].dump();
  EXPECT_EQ(report["protocol"]["timer"], "host_clock");
  EXPECT_EQ(report["definition"]["dtype"], "fp32");
  EXPECT_EQ(report["results"][0]["status"], "passed");
  EXPECT_TRUE(report["results"][0]["bytes_moved"].is_number_unsigned());
  const std::string run_id = report["run_id"];
  ASSERT_FALSE(run_id.empty());

  const Outcome lines = Cli(target, BenchArgs("jsonl"));
  ASSERT_EQ(lines.rc, 0) << lines.err;
  std::vector<std::string> rows = absl::StrSplit(lines.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(rows.size(), 2u) << lines.out;
  std::string second_run;
  for (const std::string& row : rows) {
    const Seen seen = CheckDocument(*v1::WorkloadResult::descriptor(), row);
    EXPECT_GT(seen.integers, 1);
    const Json j = Json::parse(row);
    EXPECT_EQ(j["suite"], "json_output");
    EXPECT_TRUE(j["axes"]["batch_size"].is_number_integer());
    second_run = j["run_id"];
  }
  ASSERT_FALSE(second_run.empty());
  EXPECT_NE(second_run, run_id);

  const Outcome run =
      Cli(target, {"run", "--batch", "3", "--hidden", "8", "--check", "--timer", "host", "--json"});
  ASSERT_EQ(run.rc, 0) << run.err;
  CheckDocument(*v1::RunResponse::descriptor(), run.out);

  const Outcome devices = Cli(target, {"devices", "--json"});
  ASSERT_EQ(devices.rc, 0) << devices.err;
  EXPECT_GT(CheckDocument(*v1::ListDevicesResponse::descriptor(), devices.out).integers, 0);

  WaitForRun(target, run_id);
  WaitForRun(target, second_run);
  const Outcome history = Cli(target, {"history", "--suite", "json_output", "--json"});
  ASSERT_EQ(history.rc, 0) << history.err;
  const Seen history_seen = CheckDocument(*v1::HistoryResponse::descriptor(), history.out);
  EXPECT_GT(history_seen.integers, 4);  // created_unix_seconds, axes, bytes_moved, ...
  const Json stored = Json::parse(history.out);
  EXPECT_TRUE(stored["results"][0]["created_unix_seconds"].is_number_integer());

  const Outcome runs = Cli(target, {"history", "--runs", "--json"});
  ASSERT_EQ(runs.rc, 0) << runs.err;
  EXPECT_GT(CheckDocument(*v1::HistoryResponse::descriptor(), runs.out).integers, 0);

  const Outcome compare =
      Cli(target, {"compare", run_id, second_run, "--json", "--fail-on", "none"});
  ASSERT_EQ(compare.rc, 0) << compare.err;
  const Seen compare_seen = CheckDocument(*v1::CompareResponse::descriptor(), compare.out);
  EXPECT_GT(compare_seen.enums, 1);  // verdict, statuses
  // Kept in a variable: a range-for over a member of a temporary reads freed memory.
  const Json compared = Json::parse(compare.out);
  for (const Json& c : compared["comparisons"]) {
    EXPECT_TRUE(
        std::set<std::string>({"same", "faster", "slower", "inconclusive", "incomparable", "noisy"})
            .count(c["verdict"].get<std::string>()))
        << c.dump();
  }

  const Outcome board = Cli(target, {"leaderboard", "--suite", "json_output", "--json"});
  ASSERT_EQ(board.rc, 0) << board.err;
  EXPECT_GT(CheckDocument(*v1::LeaderboardResponse::descriptor(), board.out).integers, 0);

  // --jsonl: one row of the listing per line, every line checked the same way.
  const auto lines_of = [&](std::vector<std::string> args, const Descriptor& row) {
    args.push_back("--jsonl");
    const Outcome o = Cli(target, args);
    EXPECT_EQ(o.rc, 0) << o.err;
    std::vector<std::string> lines = absl::StrSplit(o.out, '\n', absl::SkipEmpty());
    for (const std::string& line : lines) CheckDocument(row, line);
    return lines.size();
  };
  EXPECT_EQ(lines_of({"history", "--suite", "json_output"}, *v1::StoredResult::descriptor()), 4u);
  EXPECT_GE(lines_of({"history", "--runs"}, *v1::RunSummary::descriptor()), 2u);
  // The format is the point, not the verdict: two CPU runs on a busy machine may differ.
  EXPECT_EQ(lines_of({"compare", run_id, second_run, "--fail-on", "none"},
                     *v1::SampleComparison::descriptor()),
            2u);
  EXPECT_EQ(
      lines_of({"leaderboard", "--suite", "json_output"}, *v1::LeaderboardEntry::descriptor()), 1u);
  EXPECT_EQ(lines_of({"devices"}, *v1::Device::descriptor()), 1u);
  EXPECT_EQ(lines_of({"run", "--batch", "2", "--hidden", "8"}, *v1::RunResponse::descriptor()), 1u);
  EXPECT_EQ(lines_of({"history", "--suite", "json_output", "--until", "86400"},
                     *v1::StoredResult::descriptor()),
            0u);
  std::vector<std::string> bench_jsonl = BenchArgs("jsonl");
  bench_jsonl.resize(bench_jsonl.size() - 2);  // no --format: --jsonl picks it
  EXPECT_EQ(lines_of(bench_jsonl, *v1::WorkloadResult::descriptor()), 2u);

  // export's rows are the server's flat schema: the same rule holds for them.
  const Outcome exported = Cli(target, {"export", "--suite", "json_output"});
  ASSERT_EQ(exported.rc, 0) << exported.err;
  for (absl::string_view row : absl::StrSplit(exported.out, '\n', absl::SkipEmpty())) {
    const Json j = Json::parse(row);
    EXPECT_TRUE(j["created_unix_seconds"].is_number_integer()) << row;
    EXPECT_TRUE(j["bytes_moved"].is_number_integer()) << row;
    EXPECT_EQ(j["status"], "passed") << row;
  }
}

// The submissions' JSON (their service needs a GPU to compile, so the message is built
// here): created_unix_seconds and the CompileDiagnostics' byte counts are int64, the
// language an enum of its own with no table in common/enum_names.
TEST(CliJson, SubmissionsPrintTheirIntegersAndLanguageTheSameWay) {
  v1::ListSubmissionsResponse response;
  v1::Submission* s = response.add_submissions();
  s->set_id("sub-0123456789abcdef01234567");
  s->set_created_unix_seconds(1764633600);
  s->mutable_spec()->set_language(v1::SOURCE_LANGUAGE_PTX);
  s->mutable_spec()->set_dtype(v1::DTYPE_BF16);
  s->mutable_diagnostics()->add_kernels()->set_spill_store_bytes(12);
  const absl::StatusOr<std::string> text = client::MessageToJson(response);
  ASSERT_TRUE(text.ok()) << text.status();
  const Seen seen = CheckDocument(*v1::ListSubmissionsResponse::descriptor(), *text);
  EXPECT_GE(seen.integers, 5);
  const Json doc = Json::parse(*text);
  EXPECT_EQ(doc["submissions"][0]["created_unix_seconds"], 1764633600);
  EXPECT_EQ(doc["submissions"][0]["spec"]["language"], "ptx");
  EXPECT_EQ(doc["submissions"][0]["spec"]["dtype"], "bf16");
  EXPECT_EQ(doc["submissions"][0]["spec"]["mode"], "output");
}

// Values past 2^53 and non-finite doubles: exact integers, and null rather than a string.
TEST(CliJson, LargeIntegersStayExactAndNonFiniteDoublesAreNull) {
  v1::SampleComparison c;
  c.set_ratio(std::numeric_limits<double>::infinity());
  c.set_p_value(std::numeric_limits<double>::quiet_NaN());
  c.set_verdict(v1::VERDICT_INCONCLUSIVE);
  const absl::StatusOr<std::string> comparison = client::MessageToJsonLine(c);
  ASSERT_TRUE(comparison.ok());
  EXPECT_EQ(comparison->find('\n'), std::string::npos);
  const Json j = Json::parse(*comparison);
  EXPECT_TRUE(j["ratio"].is_null());
  EXPECT_TRUE(j["p_value"].is_null());
  EXPECT_EQ(j["verdict"], "inconclusive");

  v1::WorkloadResult r;
  r.set_bytes_moved(18446744073709551615ull);
  (*r.mutable_axes())["batch_size"] = -9007199254740993LL;
  const absl::StatusOr<std::string> result = client::MessageToJson(r);
  ASSERT_TRUE(result.ok());
  EXPECT_NE(result->find("\"bytes_moved\": 18446744073709551615"), std::string::npos) << *result;
  EXPECT_NE(result->find("\"batch_size\": -9007199254740993"), std::string::npos) << *result;
}

}  // namespace
}  // namespace kerneleval::testing
