// Plain-text tables and number formatting shared by the report formatters.
#pragma once

#include <string>
#include <vector>

namespace kerneleval::client {

// Columns sized to their widest cell, two spaces apart, a dashed rule under the header (no
// header line and no rule when `header` is empty). With `align_numbers`, cells that look
// numeric (start with a digit, sign or '.') are right-aligned; the rest are left-aligned.
class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header, bool align_numbers = true)
      : header_(std::move(header)), align_numbers_(align_numbers) {}
  void AddRow(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  size_t size() const { return rows_.size(); }
  // Every line starts with `indent` and ends with '\n'.
  std::string Render(const std::string& indent = "") const;

 private:
  std::vector<std::string> header_;
  bool align_numbers_;
  std::vector<std::vector<std::string>> rows_;
};

// Seconds with a unit picked for 3-4 significant digits: "850 ns", "4.33 us", "12.4 ms",
// "1.25 s". "-" for zero or negative (no measurement). `micro` is the microsecond symbol.
std::string FormatSeconds(double seconds, const char* micro = "us");
// printf("%.*f").
std::string Fixed(double value, int decimals);
// Bytes as "64.0 MiB" / "1.50 GiB".
std::string FormatBytes(double bytes);

}  // namespace kerneleval::client
