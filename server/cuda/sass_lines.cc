#include "server/cuda/sass_lines.h"

#include <cupti_pcsampling.h>

#include <cstdlib>
#include <memory>

namespace kerneleval::server {
namespace {

// CUPTI allocates the names it returns and leaves them to the caller.
struct FreeDeleter {
  void operator()(char* p) const { std::free(p); }
};

}  // namespace

SourceLocation SassLines::Of(const std::string& function, std::uint64_t pc_offset) {
  const auto key = std::make_pair(function, pc_offset);
  if (auto it = known_.find(key); it != known_.end()) return it->second;
  CUpti_GetSassToSourceCorrelationParams p = {};
  p.size = CUpti_GetSassToSourceCorrelationParamsSize;
  p.cubin = cubin_.data();
  p.cubinSize = cubin_.size();
  p.functionName = function.c_str();
  p.pcOffset = pc_offset;
  SourceLocation where;
  const CUptiResult r = cuptiGetSassToSourceCorrelation(&p);
  const std::unique_ptr<char, FreeDeleter> file(p.fileName);
  const std::unique_ptr<char, FreeDeleter> dir(p.dirName);
  if (r == CUPTI_SUCCESS && file != nullptr && p.lineNumber > 0) {
    where.file = file.get();
    where.line = p.lineNumber;
  }
  return known_[key] = where;
}

std::uint64_t SassLines::Crc() const {
  CUpti_GetCubinCrcParams p = {};
  p.size = CUpti_GetCubinCrcParamsSize;
  p.cubin = cubin_.data();
  p.cubinSize = cubin_.size();
  return cuptiGetCubinCrc(&p) == CUPTI_SUCCESS ? p.cubinCrc : 0;
}

}  // namespace kerneleval::server
