#include "server/submissions/bounded_log.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kerneleval::server::submissions {
namespace {

bool IsContinuationByte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// The length of the head to keep, at most `budget`: up to and with the last line end in its
// second half, else up to a character boundary.
std::size_t HeadLength(absl::string_view log, std::size_t budget) {
  const std::size_t line_end = log.substr(0, budget).rfind('\n');
  if (line_end != absl::string_view::npos && line_end + 1 >= budget / 2) return line_end + 1;
  std::size_t n = budget;
  while (n > 0 && IsContinuationByte(log[n])) --n;
  return n;
}

// Where the tail to keep starts, leaving at most `budget` bytes: after the first line end in
// the first half of that stretch, else at a character boundary.
std::size_t TailStart(absl::string_view log, std::size_t budget) {
  const std::size_t from = log.size() - budget;
  const std::size_t line_end = log.find('\n', from);
  if (line_end != absl::string_view::npos && line_end + 1 <= from + budget / 2) {
    return line_end + 1;
  }
  std::size_t at = from;
  while (at < log.size() && IsContinuationByte(log[at])) ++at;
  return at;
}

}  // namespace

std::string BoundedLog(absl::string_view log, std::size_t max_bytes) {
  max_bytes = std::max<std::size_t>(max_bytes, 256);
  if (log.size() <= max_bytes) return std::string(log);
  // The note's numbers take at most 20 digits each: reserve its longest form.
  constexpr std::size_t kNoteRoom = 128;
  const std::size_t budget = max_bytes - kNoteRoom;
  const std::size_t head = HeadLength(log, budget / 2);
  const std::size_t tail = TailStart(log, budget - head);
  const absl::string_view dropped = log.substr(head, tail - head);
  const std::size_t lines =
      static_cast<std::size_t>(std::count(dropped.begin(), dropped.end(), '\n'));
  const bool head_ends_line = head > 0 && log[head - 1] == '\n';
  return absl::StrCat(log.substr(0, head), head_ends_line ? "" : "\n", "... [", dropped.size(),
                      " bytes, ", lines, " lines of the compile log left out] ...\n",
                      log.substr(tail));
}

}  // namespace kerneleval::server::submissions
