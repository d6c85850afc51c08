// Static facts of this build for reports, metrics and `--version`: the version and the git
// revision the server was built from (compile definitions of the server library).
#pragma once

#include <string>

namespace kerneleval::server {

std::string ServerVersion();
std::string GitRevision();

}  // namespace kerneleval::server
