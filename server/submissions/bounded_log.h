// A compile log held to a size. NVRTC writes one line per warning, so a source of many
// warnings (or a macro that expands into many) makes a log of megabytes; every stored
// submission keeps its log in memory and on disk, and every answer that carries one is a
// message a client must receive whole. Past the bound the log keeps its head (the first
// diagnostics, usually the cause) and its tail (the ptxas figures and the summary), with one
// line between them saying what was left out.
#pragma once

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace kerneleval::server::submissions {

// The most bytes of a compile log the server keeps or answers with.
inline constexpr std::size_t kMaxCompileLogBytes = std::size_t{64} << 10;

// `log` itself when it has at most `max_bytes`; else at most `max_bytes` of it: the head and
// the tail cut at line ends where a line end is near (else at a UTF-8 character boundary, so
// that the text stays valid for a proto string), joined by the line
//   ... [N bytes, M lines of the compile log left out] ...
// `max_bytes` below 256 is taken as 256 (room for that line and some of the log).
std::string BoundedLog(absl::string_view log, std::size_t max_bytes = kMaxCompileLogBytes);

}  // namespace kerneleval::server::submissions
