// PTX read as PTX, not as text: what registration learns from a PTX module (the parameter
// list of an entry, whether an entry can wait for its grid dependency) comes from the code
// the assembler reads, never from a comment, and a kernel's functions are those its calls
// can reach, not those the module merely holds. Pure text parsing of a module that assembled
// (the assembler has accepted it before any of this runs), so that it is tested without NVRTC.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace kerneleval::server::submissions {

// `ptx` with each comment (`//` to the end of the line, `/* ... */`) replaced by spaces, line
// breaks kept. A string literal (the file names of .file directives, .pragma) is no comment
// and holds none: `"a//b"` stays as it is.
std::string PtxWithoutComments(absl::string_view ptx);

struct PtxFunction {
  bool entry = false;        // .entry; else .func
  absl::string_view params;  // the parameter list, without its parentheses
  absl::string_view body;    // from `{` to its matching `}`
};

// Every .entry and .func of comment-free PTX `code` that has a body, by name; views into
// `code`. Declarations (a prototype ending in `;`) are left out.
std::map<std::string, PtxFunction> PtxFunctions(absl::string_view code);

// The byte size of each .param of `.entry <lowered_name>(...)` in `ptx`, in order; nullopt
// when the PTX defines no entry of exactly that name (comments are not code).
std::optional<std::vector<long long>> PtxEntryParamBytes(absl::string_view ptx,
                                                         absl::string_view lowered_name);

// Whether `.entry <lowered_name>` of `ptx` can execute griddepcontrol.wait: the instruction is
// in its body or in a .func its calls reach, transitively. A direct `call` reaches its target;
// an indirect one (through a register) may reach any .func whose address the module takes
// (a name used other than as a direct call's target or in its own header). Comments are not
// code, and a .func no call reaches does not count. nullopt when the PTX has no such entry.
// A test of reachability, not of paths: a wait behind a branch never taken still counts,
// which the chained checks of hot and graph replay catch where overlap would pay
// (docs/submissions.md).
std::optional<bool> PtxEntryWaitsForGrid(absl::string_view ptx, absl::string_view lowered_name);

}  // namespace kerneleval::server::submissions
