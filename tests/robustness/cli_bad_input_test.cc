// Bad local input given to the real binaries: truncated or incomplete safetensors files for
// `kerneleval run --input`, malformed suite JSON for `kerneleval bench --suite-file`, a
// token file without a token, or malformed, for `kerneleval-server --auth-token-file`, a file
// without 'user:password' for `--metrics-basic-auth-file`. Each must end with
// the usage exit code (2) and a message naming the file, before anything is sent.
// And the catalogue of bad Run requests (bad_run_catalogue.h) sent through `kerneleval run`
// to a real server: the RPC error's exit code (1), the status code and the field.
//
// Usage: cli_bad_input_test PATH_TO_kerneleval PATH_TO_kerneleval-server [gtest flags]
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <optional>

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "bad_run_catalogue.h"
#include "client/safetensors.h"
#include "robustness_util.h"

namespace kerneleval::testing {
namespace {

std::string g_cli;
std::string g_server;

struct Outcome {
  int exit_code = -1;
  std::string err;
};

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs `binary args` with a 120 s cap (exit 124 when it is hit), stdout discarded.
Outcome RunBinary(const TempDir& dir, const std::string& binary,
                  const std::vector<std::string>& args) {
  std::string cmd = "timeout 120 " + Quote(binary);
  for (const std::string& a : args) cmd += " " + Quote(a);
  const std::string err_file = dir.File("stderr.txt");
  cmd += " >/dev/null 2>" + Quote(err_file) + " </dev/null";
  const int status = std::system(cmd.c_str());
  Outcome o;
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  o.err = ReadWholeFile(err_file);
  return o;
}

// The CLI would talk to this address, but every case fails before the first call (nothing
// listens there: a call that is made fails at once, well within the deadline).
Outcome RunCli(const TempDir& dir, std::vector<std::string> args) {
  args.insert(args.begin(), {"--target", "127.0.0.1:1", "--deadline", "60"});
  return RunBinary(dir, g_cli, args);
}

std::string ValidSafetensors() {
  const v1::RunRequest r = MakeRunRequest(v1::DTYPE_BF16, v1::MODE_OUTPUT, 4, 64, 3);
  client::SafetensorsFile f;
  f.tensors["hidden_states"] = r.hidden_states();
  f.tensors["residual"] = r.residual();
  f.tensors["weight"] = r.weight();
  return *client::SerializeSafetensors(f);
}

TEST(CliBadInput, TruncatedSafetensorsNamesTheFile) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string bytes = ValidSafetensors();
  std::uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = header << 8 | static_cast<unsigned char>(bytes[i]);
  const std::vector<std::pair<const char*, std::size_t>> cuts = {
      {"empty", 0},
      {"inside the length prefix", 5},
      {"inside the JSON header", 8 + header / 2},
      {"inside the tensor data", 8 + header + 100},
      {"one byte short", bytes.size() - 1},
  };
  for (const auto& [what, size] : cuts) {
    SCOPED_TRACE(what);
    const std::string path = dir.File(std::string("cut-") + std::to_string(size) + ".safetensors");
    ASSERT_TRUE(WriteWholeFile(path, bytes.substr(0, size)));
    const Outcome o = RunCli(dir, {"run", "--input", path});
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find(path), std::string::npos) << o.err;
    EXPECT_NE(o.err.find("error"), std::string::npos) << o.err;
  }
  // The untouched file gets past the local checks (and then fails to connect: exit 5).
  const std::string whole = dir.File("whole.safetensors");
  ASSERT_TRUE(WriteWholeFile(whole, bytes));
  const Outcome o = RunCli(dir, {"run", "--input", whole});
  EXPECT_EQ(o.exit_code, 5) << o.err;  // infrastructure
  EXPECT_NE(o.err.find("UNAVAILABLE"), std::string::npos) << o.err;
}

TEST(CliBadInput, SafetensorsWithoutAWeightNamesTheTensor) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const v1::RunRequest r = MakeRunRequest(v1::DTYPE_FP32, v1::MODE_OUTPUT, 2, 8, 3);
  client::SafetensorsFile f;
  f.tensors["hidden_states"] = r.hidden_states();
  f.tensors["residual"] = r.residual();
  const std::string path = dir.File("no-weight.safetensors");
  ASSERT_TRUE(client::WriteSafetensors(path, f).ok());
  const Outcome o = RunCli(dir, {"run", "--input", path});
  EXPECT_EQ(o.exit_code, 2) << o.err;
  EXPECT_NE(o.err.find(path), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("weight"), std::string::npos) << o.err;
}

TEST(CliBadInput, GarbageHeaderNamesTheFile) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  std::string bytes(8, '\0');
  bytes[0] = 12;
  bytes += "{not json!!}";
  const std::string path = dir.File("garbage.safetensors");
  ASSERT_TRUE(WriteWholeFile(path, bytes));
  const Outcome o = RunCli(dir, {"run", "--input", path});
  EXPECT_EQ(o.exit_code, 2) << o.err;
  EXPECT_NE(o.err.find(path), std::string::npos) << o.err;
}

TEST(CliBadInput, MissingInputFileIsAUsageError) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("absent.safetensors");
  const Outcome o = RunCli(dir, {"run", "--input", path});
  EXPECT_EQ(o.exit_code, 2) << o.err;
  EXPECT_NE(o.err.find(path), std::string::npos) << o.err;
}

constexpr char kSuite[] = R"({
  "name": "robustness_suite",
  "op_type": "fused_add_rmsnorm",
  "mode": "output",
  "axes": {"batch_size": {"type": "var"}, "hidden_size": {"type": "const", "value": 64}},
  "inputs": {
    "hidden_states": {"shape": ["batch_size", "hidden_size"], "dtype": "bfloat16"},
    "residual": {"shape": ["batch_size", "hidden_size"], "dtype": "bfloat16"},
    "weight": {"shape": ["hidden_size"], "dtype": "bfloat16"}
  },
  "outputs": {"output": {"shape": ["batch_size", "hidden_size"], "dtype": "bfloat16"}},
  "workloads": [{"axes": {"batch_size": 3}}]
})";

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  const std::size_t at = text.find(from);
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(CliBadInput, MalformedSuiteFileNamesTheFileAndTheField) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string suite = kSuite;
  struct Case {
    const char* name;
    std::string text;
    const char* field;  // must appear in the message too ("" for none)
  };
  const std::vector<Case> cases = {
      {"empty file", "", ""},
      {"truncated JSON", suite.substr(0, suite.size() / 2), ""},
      {"not an object", "[1, 2, 3]", ""},
      {"trailing garbage", suite + "}", ""},
      {"zero batch", Replace(suite, "\"batch_size\": 3", "\"batch_size\": 0"), "batch_size"},
      {"fractional batch", Replace(suite, "\"batch_size\": 3", "\"batch_size\": 2.5"),
       "batch_size"},
      {"unknown dtype", Replace(suite, "\"dtype\": \"bfloat16\"", "\"dtype\": \"int8\""), "dtype"},
      {"missing axis", Replace(suite, "\"batch_size\": {\"type\": \"var\"}, ", ""), "axes"},
      {"duplicate workload",
       Replace(suite, "[{\"axes\": {\"batch_size\": 3}}]",
               "[{\"axes\": {\"batch_size\": 3}}, {\"axes\": {\"batch_size\": 3}}]"),
       "workloads[1]"},
      {"bad tolerance",
       Replace(suite, "{\"axes\": {\"batch_size\": 3}}",
               "{\"axes\": {\"batch_size\": 3}, \"tolerance\": {\"max_rtol\": -1}}"),
       "max_rtol"},
      {"wrong op", Replace(suite, "\"fused_add_rmsnorm\"", "\"softmax\""), "op_type"},
      // A number beyond double's range: the JSON parser reports it as out of range, not as a
      // parse error.
      {"number beyond double",
       Replace(suite, "\"batch_size\": 3", "\"batch_size\": 1" + std::string(400, '0')), ""},
  };
  int index = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir.File("suite-" + std::to_string(index++) + ".json");
    ASSERT_TRUE(WriteWholeFile(path, c.text));
    const Outcome o = RunCli(dir, {"bench", "--suite-file", path});
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find(path), std::string::npos) << o.err;
    EXPECT_NE(o.err.find(c.field), std::string::npos) << o.err;
  }
  // The intact suite gets past the local checks (and then fails to connect: exit 5).
  const std::string good = dir.File("good.json");
  ASSERT_TRUE(WriteWholeFile(good, suite));
  const Outcome o = RunCli(dir, {"bench", "--suite-file", good});
  EXPECT_EQ(o.exit_code, 5) << o.err;  // infrastructure
}

// True when `t` can be written to a safetensors file as it is: a dtype, no negative
// dimension, and exactly the bytes its shape needs.
bool FitsSafetensors(const v1::Tensor& t) {
  const std::uint64_t size = DTypeSize(t.dtype());
  if (size == 0) return false;
  std::uint64_t bytes = size;
  for (const std::int64_t d : t.shape()) {
    if (d < 0 || __builtin_mul_overflow(bytes, static_cast<std::uint64_t>(d), &bytes)) {
      return false;
    }
  }
  return bytes == t.data().size();
}

// The `kerneleval run` arguments that send `r`, its tensors written to `path`; nullopt where
// the command line cannot express the request: a tensor missing or not describable in a
// safetensors file, a value its own flag checks refuse (eps not a positive number,
// repetitions outside 1..1000), or an enum value it has no name for.
std::optional<std::vector<std::string>> CliArgsFor(const v1::RunRequest& r,
                                                   const std::string& path) {
  if (!r.has_hidden_states() || !r.has_residual() || !r.has_weight()) return std::nullopt;
  client::SafetensorsFile file;
  for (const auto& [name, tensor] :
       {std::pair<const char*, const v1::Tensor*>{"hidden_states", &r.hidden_states()},
        std::pair<const char*, const v1::Tensor*>{"residual", &r.residual()},
        std::pair<const char*, const v1::Tensor*>{"weight", &r.weight()}}) {
    if (!FitsSafetensors(*tensor)) return std::nullopt;
    file.tensors[name] = *tensor;
  }
  if (!client::WriteSafetensors(path, file).ok()) return std::nullopt;
  std::vector<std::string> args = {"run", "--input", path};
  switch (r.mode()) {
    case v1::MODE_UNSPECIFIED:
    case v1::MODE_OUTPUT:
      break;
    case v1::MODE_OUTPUT_AND_RESIDUAL:
      args.insert(args.end(), {"--mode", "output_and_residual"});
      break;
    case v1::MODE_IN_PLACE:
      args.insert(args.end(), {"--mode", "in_place"});
      break;
    default:
      return std::nullopt;
  }
  if (r.has_eps()) {
    if (!std::isfinite(r.eps()) || r.eps() <= 0) return std::nullopt;
    char eps[40];
    std::snprintf(eps, sizeof(eps), "%.17g", r.eps());
    args.insert(args.end(), {"--eps", eps});
  }
  if (!r.device().empty()) args.insert(args.end(), {"--device", r.device()});
  if (!r.implementation().empty()) args.insert(args.end(), {"--impl", r.implementation()});
  if (r.repetitions() != 0) {
    if (r.repetitions() > 1000) return std::nullopt;
    args.insert(args.end(), {"--repetitions", std::to_string(r.repetitions())});
  }
  if (r.warmup() != 0) args.insert(args.end(), {"--warmup", std::to_string(r.warmup())});
  switch (r.timer()) {
    case v1::TIMER_UNSPECIFIED:
      break;
    case v1::TIMER_CUPTI:
      args.insert(args.end(), {"--timer", "cupti"});
      break;
    case v1::TIMER_CUDA_EVENTS:
      args.insert(args.end(), {"--timer", "events"});
      break;
    case v1::TIMER_HOST_CLOCK:
      args.insert(args.end(), {"--timer", "host"});
      break;
    default:
      return std::nullopt;
  }
  if (r.check_correctness()) args.push_back("--check");
  return args;
}

// The same catalogue as bad_input_test, through the command line: every request it can
// express reaches the server and ends with the RPC error's exit code, the status code's name
// and the field.
TEST(CliBadInput, CatalogueOfBadRunRequestsGetsTheServersAnswer) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  TestServer t = StartServer(CatalogueServerOptions());
  ASSERT_NE(t.client, nullptr);
  int sent = 0;
  for (const BadRunCase& c : BadRunCatalogue()) {
    SCOPED_TRACE(c.name);
    if (c.deadline_seconds > 0) continue;  // the CLI's deadline is whole seconds
    v1::RunRequest bad = CatalogueBaseRequest();
    c.mutate(&bad);
    const std::optional<std::vector<std::string>> args =
        CliArgsFor(bad, dir.File("request.safetensors"));
    if (!args) continue;
    ++sent;
    std::vector<std::string> full = {"--target", t.target(), "--deadline", "120"};
    full.insert(full.end(), args->begin(), args->end());
    const Outcome o = RunBinary(dir, g_cli, full);
    const std::string shown = o.err.substr(0, 2048);
    EXPECT_EQ(o.exit_code, 5) << shown;  // infrastructure: the server refused the call
    const std::string code =
        "error: " + absl::StatusCodeToString(static_cast<absl::StatusCode>(c.code)) + ": ";
    EXPECT_NE(o.err.find(code), std::string::npos) << shown;
    EXPECT_NE(o.err.find(c.field), std::string::npos) << shown;
    EXPECT_NE(o.err.find(c.also), std::string::npos) << shown;
    if (c.max_message_bytes > 0) EXPECT_LT(o.err.size(), c.max_message_bytes + code.size() + 1);
  }
  // Most of the catalogue is expressible; a change that made none of it so must not pass.
  EXPECT_GE(sent, 20);
  std::cout << sent << " catalogue requests sent through the command line\n";
}

// A token file whose first line holds no token must stop the server, never start it
// without authentication.
TEST(ServerBadInput, TokenFileWithoutATokenOrMalformedRefusesToStart) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const std::vector<std::pair<const char*, std::string>> files = {
      {"empty", ""},
      {"a newline", "\n"},
      {"blank lines", "  \n\n"},
      {"comments alone", "# alice:secret-token\n\n"},
      // Refused whole, naming the line: a server never guesses whose a token is.
      {"one token for two owners", "alice:secret-token\nbob:secret-token\n"},
      {"an owner with a space", "al ice:secret-token\n"},
  };
  for (const auto& [what, text] : files) {
    SCOPED_TRACE(what);
    const std::string path = dir.File("token.txt");
    ASSERT_TRUE(WriteWholeFile(path, text));
    const Outcome o = RunBinary(dir, g_server,
                                {"--listen", "127.0.0.1:0", "--metrics-listen", "", "--device",
                                 "cpu", "--auth-token-file", path});
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find("--auth-token-file"), std::string::npos) << o.err;
    EXPECT_EQ(o.err.find("secret-token"), std::string::npos) << o.err;
  }
  const Outcome o = RunBinary(dir, g_server,
                              {"--listen", "127.0.0.1:0", "--metrics-listen", "", "--device", "cpu",
                               "--auth-token-file", dir.File("absent.txt")});
  EXPECT_EQ(o.exit_code, 2) << o.err;
}

// Likewise for /metrics: a file without 'user:password' never starts an open endpoint.
TEST(ServerBadInput, MetricsAuthFileWithoutUserAndPasswordRefusesToStart) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const std::vector<std::pair<const char*, std::string>> files = {
      {"empty", ""},
      {"blank lines", "  \n\n"},
      {"no colon", "scraper-secret\n"},
      {"no user", ":secret\n"},
  };
  for (const auto& [what, text] : files) {
    SCOPED_TRACE(what);
    const std::string path = dir.File("metrics-auth.txt");
    ASSERT_TRUE(WriteWholeFile(path, text));
    const Outcome o = RunBinary(dir, g_server,
                                {"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
                                 "--device", "cpu", "--metrics-basic-auth-file", path});
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_NE(o.err.find("--metrics-basic-auth-file"), std::string::npos) << o.err;
    EXPECT_EQ(o.err.find("secret"), std::string::npos) << o.err;
  }
}

}  // namespace
}  // namespace kerneleval::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s PATH_TO_kerneleval PATH_TO_kerneleval-server\n", argv[0]);
    return 2;
  }
  kerneleval::testing::g_cli = argv[1];
  kerneleval::testing::g_server = argv[2];
  return RUN_ALL_TESTS();
}
