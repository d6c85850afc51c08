// One cell of a CSV file, as every CSV the project writes spells it (the report's, a fan-out's,
// the results store's export). Quoted per RFC 4180, and kept from being read as a formula:
// a spreadsheet runs a cell that begins with = + - @ (or a tab or carriage return before one)
// as a formula, and names of suites, workloads and submissions are free text anyone may
// choose. Such a cell gets a leading single quote, as OWASP's CSV injection guidance says, so
// that it reads as the text it is. A plain number (-1.5e-3) is left as it is: no formula.
// Header-only and pure.
#pragma once

#include <cctype>
#include <string>
#include <string_view>

namespace kerneleval {

// Whether `text` is a decimal number and nothing else: [+-]digits[.digits][e[+-]digits].
inline bool IsPlainNumber(std::string_view text) {
  std::size_t i = 0;
  auto digits = [&] {
    const std::size_t start = i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
    return i - start;
  };
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
  std::size_t mantissa = digits();
  if (i < text.size() && text[i] == '.') {
    ++i;
    mantissa += digits();
  }
  if (mantissa == 0) return false;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    if (digits() == 0) return false;
  }
  return i == text.size();
}

inline std::string CsvCell(std::string_view value) {
  std::string text(value);
  if (!text.empty() && std::string_view("=+-@\t\r").find(text[0]) != std::string_view::npos &&
      !IsPlainNumber(text)) {
    text.insert(0, 1, '\'');
  }
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

}  // namespace kerneleval
