#include "client/text_table.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

namespace kerneleval::client {
namespace {

bool LooksNumeric(const std::string& cell) {
  if (cell.empty()) return false;
  const unsigned char c = static_cast<unsigned char>(cell[0]);
  return std::isdigit(c) || ((c == '-' || c == '+' || c == '.') && cell.size() > 1 &&
                             (std::isdigit(static_cast<unsigned char>(cell[1])) || cell[1] == '.'));
}

}  // namespace

std::string TextTable::Render(const std::string& indent) const {
  std::vector<size_t> widths(header_.size(), 0);
  auto widen = [&widths](const std::vector<std::string>& row) {
    if (row.size() > widths.size()) widths.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  };
  widen(header_);
  for (const auto& row : rows_) widen(row);

  auto line = [&](const std::vector<std::string>& row, bool header) {
    std::string out = indent;
    for (size_t i = 0; i < widths.size(); ++i) {
      const std::string cell = i < row.size() ? row[i] : "";
      const std::string pad(widths[i] - cell.size(), ' ');
      const bool right = !header && align_numbers_ && LooksNumeric(cell);
      out += right ? pad + cell : cell + (i + 1 < widths.size() ? pad : "");
      if (i + 1 < widths.size()) out += "  ";
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out;
  if (!header_.empty()) {
    out = line(header_, true) + indent;
    for (size_t i = 0; i < widths.size(); ++i) {
      out += std::string(widths[i], '-');
      if (i + 1 < widths.size()) out += "  ";
    }
    out += "\n";
  }
  for (const auto& row : rows_) out += line(row, false);
  return out;
}

std::string Fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", decimals, value);
  return buffer;
}

std::string FormatSeconds(double seconds, const char* micro) {
  if (!(seconds > 0) || !std::isfinite(seconds)) return "-";
  double value = seconds;
  std::string unit = "s";
  if (seconds < 1e-6) {
    value = seconds * 1e9;
    unit = "ns";
  } else if (seconds < 1e-3) {
    value = seconds * 1e6;
    unit = micro;
  } else if (seconds < 1) {
    value = seconds * 1e3;
    unit = "ms";
  }
  const int decimals = value < 10 ? 2 : 1;
  return Fixed(value, decimals) + " " + unit;
}

std::string FormatBytes(double bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  return Fixed(bytes, unit == 0 ? 0 : (bytes >= 100 ? 0 : 1)) + " " + kUnits[unit];
}

}  // namespace kerneleval::client
