// The source line of a PC in a module image, from the line table the compiler wrote
// (-lineinfo, or the .loc directives of PTX): CUPTI's SASS-to-source correlation, which
// reads the cubin on the host and needs no device.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

namespace kerneleval::server {

struct SourceLocation {
  std::string file;  // Empty where the table has no line for the PC.
  std::uint32_t line = 0;
};

// Lines of one module image, each PC asked of CUPTI once.
class SassLines {
 public:
  explicit SassLines(std::string cubin) : cubin_(std::move(cubin)) {}

  // The line of `pc_offset` in `function` (its symbol, as the module names it); an empty
  // file where the image has no line table, the function is not in it, or CUPTI cannot read
  // the image.
  SourceLocation Of(const std::string& function, std::uint64_t pc_offset);

  // The image's CRC as CUPTI computes it: what PC samples name their module by.
  std::uint64_t Crc() const;

 private:
  std::string cubin_;
  std::map<std::pair<std::string, std::uint64_t>, SourceLocation> known_;
};

}  // namespace kerneleval::server
