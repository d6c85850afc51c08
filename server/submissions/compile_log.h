// What of NVRTC's log goes back to the caller: only what cites the submission's own lines.
// A diagnostic located in another file quotes that file's text (the line after the location
// is the offending source line), so a source that gets a header or any other file included
// would read it back through the log. The compile jail keeps other files out; this keeps
// their text out of the answer should one ever be read.
#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace kerneleval::server::submissions {

// `log` without the diagnostics of other files. A diagnostic starts at a line, at column 0,
// of the form `FILE(LINE): ...`; it is kept when FILE is `source_name` (or __nv_name_map,
// where NVRTC compiles the caller's entries as name expressions), and its continuation
// lines (the quoted source line, the caret, notes) go with it. After a dropped diagnostic,
// every line is dropped up to the next kept diagnostic, a `ptxas` line or the "errors
// detected in the compilation of" summary, each of which NVRTC writes at column 0 and a
// quoted source line (indented) never is. A failure to open an include keeps the name and
// loses NVRTC's reason, which would say whether the path exists.
std::string SubmissionLogLines(absl::string_view log, absl::string_view source_name);

}  // namespace kerneleval::server::submissions
