// The suites of a directory: every *.json file in it, in file-name order (LoadSuiteDirectory).
#include "common/suites.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace kerneleval {

absl::StatusOr<std::vector<v1::SuiteDefinition>> LoadSuiteDirectory(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::file_status status = fs::status(dir, error);
  if (!fs::exists(status)) {
    return absl::NotFoundError(absl::StrCat("suite directory ", dir, " does not exist"));
  }
  if (!fs::is_directory(status)) {
    return absl::InvalidArgumentError(absl::StrCat("suite directory ", dir, " is not a directory"));
  }
  std::vector<fs::path> files;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    if (it->path().extension() == ".json" && it->is_regular_file()) files.push_back(it->path());
  }
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot list suite directory ", dir, ": ", error.message()));
  }
  std::sort(files.begin(), files.end(),
            [](const fs::path& a, const fs::path& b) { return a.filename() < b.filename(); });

  std::vector<v1::SuiteDefinition> suites;
  std::map<std::string, std::string> defined_in;  // suite name -> file
  for (const fs::path& file : files) {
    std::ifstream in(file, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in.good() && !in.eof()) {
      return absl::InternalError(absl::StrCat("cannot read suite file ", file.string()));
    }
    absl::StatusOr<v1::SuiteDefinition> suite = ParseSuiteJson(text.str(), file.string());
    if (!suite.ok()) return suite.status();
    auto [previous, inserted] = defined_in.emplace(suite->name(), file.string());
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat(file.string(), ": name: suite \"",
                                                     suite->name(), "\" is already defined in ",
                                                     previous->second));
    }
    suites.push_back(*std::move(suite));
  }
  return suites;
}

}  // namespace kerneleval
