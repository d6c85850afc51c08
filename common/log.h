// The one place the programs write log lines: "<program>: <LEVEL> <message>" on stderr,
// one line per call, safe from any thread. Client faults (a request that does not parse, a
// string field with invalid UTF-8) are logged through LogClientFault: at INFO and at most a
// few lines a second, so that no client can fill the log or page anyone at will.
#pragma once

#include <string_view>

#include "absl/strings/string_view.h"

namespace kerneleval {

enum class LogLevel { kInfo, kWarning, kError };

// Names the program in every line ("kerneleval-server", "kerneleval-device-host").
void SetLogProgram(absl::string_view program);

void Log(LogLevel level, absl::string_view message);
inline void LogInfo(absl::string_view message) { Log(LogLevel::kInfo, message); }
inline void LogWarning(absl::string_view message) { Log(LogLevel::kWarning, message); }
inline void LogError(absl::string_view message) { Log(LogLevel::kError, message); }

// INFO, rate-limited to 5 lines per second; lines dropped meanwhile are counted in the next.
void LogClientFault(absl::string_view message);

// Routes protobuf's own log lines here: its complaints about client data (invalid UTF-8 in a
// request) become client faults instead of ERROR lines.
void RouteProtobufLogs();

}  // namespace kerneleval
