#include "server/evaluation/server_version.h"

#ifndef KERNELEVAL_VERSION
#define KERNELEVAL_VERSION "0.0.0"
#endif
#ifndef KERNELEVAL_GIT_REVISION
#define KERNELEVAL_GIT_REVISION "unknown"
#endif

namespace kerneleval::server {

std::string ServerVersion() { return KERNELEVAL_VERSION; }
std::string GitRevision() { return KERNELEVAL_GIT_REVISION; }

}  // namespace kerneleval::server
