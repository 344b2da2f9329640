#include "common/units.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ptd {
namespace {

struct Unit {
  const char* name;
  double factor;
};

// Splits "1.5ms" into 1.5 and "ms" and scales by the unit; `what` names the kind.
absl::StatusOr<uint64_t> ParseWithUnits(absl::string_view text, const Unit* units, size_t unit_count,
                                        absl::string_view what, absl::string_view example) {
  const std::string trimmed(absl::StripAsciiWhitespace(text));
  size_t digits = 0;
  while (digits < trimmed.size() && (absl::ascii_isdigit(trimmed[digits]) || trimmed[digits] == '.')) ++digits;
  const std::string number = trimmed.substr(0, digits);
  const std::string unit = absl::AsciiStrToLower(absl::StripAsciiWhitespace(trimmed.substr(digits)));
  double value = 0;
  if (number.empty() || !absl::SimpleAtod(number, &value) || !std::isfinite(value) || value < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "' is not a ", what, " (a number and a unit, e.g. ", example, ")"));
  }
  double factor = 0;
  for (size_t i = 0; i < unit_count; ++i) {
    if (unit == units[i].name) factor = units[i].factor;
  }
  if (factor == 0) {
    std::string known;
    for (size_t i = 1; i < unit_count; ++i) absl::StrAppend(&known, i > 1 ? ", " : "", units[i].name);
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "': unknown unit '", unit, "' for a ", what, " (", known, ")"));
  }
  const double scaled = std::round(value * factor);
  if (scaled >= 1.8e19) return absl::InvalidArgumentError(absl::StrCat("'", text, "': ", what, " too large"));
  return static_cast<uint64_t>(scaled);
}

}  // namespace

absl::StatusOr<uint64_t> ParseDurationNs(absl::string_view text) {
  static constexpr Unit kUnits[] = {{"", 1}, {"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}};
  return ParseWithUnits(text, kUnits, std::size(kUnits), "duration", "1us, 2.5ms, 3s");
}

absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text) {
  static constexpr Unit kUnits[] = {{"", 1},          {"b", 1},           {"kb", 1e3},
                                    {"mb", 1e6},      {"gb", 1e9},        {"kib", 1024.0},
                                    {"mib", 1048576.0}, {"gib", 1073741824.0}};
  return ParseWithUnits(text, kUnits, std::size(kUnits), "size", "512KB, 2MB, 1GiB");
}

std::string FormatDurationNs(uint64_t ns) {
  if (ns >= 1'000'000'000) return absl::StrFormat("%.3f s", ns / 1e9);
  if (ns >= 1'000'000) return absl::StrFormat("%.3f ms", ns / 1e6);
  if (ns >= 1'000) return absl::StrFormat("%.3f us", ns / 1e3);
  return absl::StrFormat("%u ns", ns);
}

std::string FormatByteSize(uint64_t bytes) {
  if (bytes >= 1'000'000'000) return absl::StrFormat("%.2f GB", bytes / 1e9);
  if (bytes >= 1'000'000) return absl::StrFormat("%.2f MB", bytes / 1e6);
  if (bytes >= 1'000) return absl::StrFormat("%.2f KB", bytes / 1e3);
  return absl::StrFormat("%u B", bytes);
}

}  // namespace ptd
