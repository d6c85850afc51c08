#include "common/host_name.h"

#include <unistd.h>

namespace kerneleval {

std::string HostName() {
  char name[256] = {};  // HOST_NAME_MAX is 64 on Linux; the last byte stays NUL.
  if (gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

}  // namespace kerneleval
