#include "common/log.h"

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/stubs/logging.h"

namespace kerneleval {
namespace {

std::mutex& LogMutex() {
  static std::mutex mu;
  return mu;
}

std::string& Program() {
  static std::string program = "kerneleval";
  return program;
}

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kWarning:
      return "WARNING";
    case LogLevel::kError:
      return "ERROR";
  }
  return "INFO";
}

void WriteLocked(LogLevel level, absl::string_view message) {
  const std::string line = absl::StrCat(Program(), ": ", LevelName(level), " ", message, "\n");
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

void ProtobufLogHandler(google::protobuf::LogLevel level, const char* filename, int line,
                        const std::string& message) {
  // Parsing a client's bytes is the only way protobuf complains about data here.
  if (absl::StrContains(message, "invalid UTF-8") || absl::StrContains(message, "parse")) {
    LogClientFault(absl::StrCat("protobuf: ", message));
    return;
  }
  const LogLevel ours = level >= google::protobuf::LOGLEVEL_ERROR     ? LogLevel::kError
                        : level == google::protobuf::LOGLEVEL_WARNING ? LogLevel::kWarning
                                                                      : LogLevel::kInfo;
  Log(ours, absl::StrCat("protobuf ", filename, ":", line, ": ", message));
}

}  // namespace

void SetLogProgram(absl::string_view program) {
  std::lock_guard<std::mutex> lock(LogMutex());
  Program() = std::string(program);
}

void Log(LogLevel level, absl::string_view message) {
  std::lock_guard<std::mutex> lock(LogMutex());
  WriteLocked(level, message);
}

void LogClientFault(absl::string_view message) {
  using Clock = std::chrono::steady_clock;
  constexpr int kLinesPerSecond = 5;
  static Clock::time_point window_start;
  static int lines_in_window = 0;
  static long dropped = 0;
  std::lock_guard<std::mutex> lock(LogMutex());
  const Clock::time_point now = Clock::now();
  if (now - window_start >= std::chrono::seconds(1)) {
    window_start = now;
    lines_in_window = 0;
  }
  if (lines_in_window >= kLinesPerSecond) {
    ++dropped;
    return;
  }
  ++lines_in_window;
  if (dropped > 0) {
    WriteLocked(LogLevel::kInfo, absl::StrCat("client fault: ", message, " (", dropped,
                                              " more client-fault lines dropped)"));
    dropped = 0;
  } else {
    WriteLocked(LogLevel::kInfo, absl::StrCat("client fault: ", message));
  }
}

void RouteProtobufLogs() { google::protobuf::SetLogHandler(&ProtobufLogHandler); }

}  // namespace kerneleval
