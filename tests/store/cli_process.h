// The real `kerneleval` binary in a child process, stdout and stderr to files (never a
// terminal, as under cron), and the suite files the CLI tests bench: what the tests that
// judge the CLI from the outside share.
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <vector>

namespace kerneleval::testing {

// `count` workloads of fp32 rows of `hidden` floats, as a suite file for --suite-file.
inline std::string SuiteFile(const std::string& dir, const std::string& name, int count,
                             int hidden) {
  std::string workloads;
  for (int b = 1; b <= count; ++b) {
    workloads += (b == 1 ? "" : ", ") + std::string("{\"axes\": {\"batch_size\": ") +
                 std::to_string(b) + "}}";
  }
  const std::string text = R"({"name": ")" + name + R"(", "op_type": "fused_add_rmsnorm",
  "mode": "output",
  "axes": {"batch_size": {"type": "var"}, "hidden_size": {"type": "const", "value": )" +
                           std::to_string(hidden) + R"(}},
  "inputs": {
    "hidden_states": {"shape": ["batch_size", "hidden_size"], "dtype": "float32"},
    "residual": {"shape": ["batch_size", "hidden_size"], "dtype": "float32"},
    "weight": {"shape": ["hidden_size"], "dtype": "float32"}
  },
  "outputs": {"output": {"shape": ["batch_size", "hidden_size"], "dtype": "float32"}},
  "workloads": [)" + workloads +
                           "]}";
  const std::string path = dir + "/" + name + ".json";
  std::ofstream(path) << text;
  return path;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct Process {
  int rc = -1;  // exit status, or -1 when it did not exit normally
  std::string out, err;
};

// Runs the CLI with stdout and stderr to files (not a terminal): what a cron job sees.
inline Process RunCli(const std::string& dir, const std::vector<std::string>& args) {
  const std::string out = dir + "/stdout", err = dir + "/stderr";
  const pid_t pid = fork();
  if (pid == 0) {
    const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(o, 1);
    dup2(e, 2);
    std::vector<char*> argv = {const_cast<char*>(KERNELEVAL_CLI_BINARY)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  Process p;
  p.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  p.out = ReadFile(out);
  p.err = ReadFile(err);
  return p;
}

inline std::vector<std::string> Matches(const std::string& text, const std::string& pattern) {
  std::vector<std::string> found;
  const std::regex re(pattern);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator();
       ++it) {
    found.push_back((*it)[1].str());
  }
  return found;
}

}  // namespace kerneleval::testing
