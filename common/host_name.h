// The machine's host name (gethostname), for reports' environments and the results store's
// server name. Empty when the system will not say.
#pragma once

#include <string>

namespace kerneleval {

std::string HostName();

}  // namespace kerneleval
