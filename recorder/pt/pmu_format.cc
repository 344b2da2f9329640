#include "recorder/pt/pmu_format.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ptd::pt {

int PmuFormatField::Width() const {
  int width = 0;
  for (const auto& [low, high] : ranges) width += high - low + 1;
  return width;
}

absl::Status PmuFormatField::Encode(uint64_t value, PmuConfigWords& words) const {
  const int width = Width();
  if (width < 64 && (value >> width) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("value ", value, " does not fit in a ", width, "-bit field"));
  }
  uint64_t& word = words[word_index()];
  for (const auto& [low, high] : ranges) {
    const int bits = high - low + 1;
    const uint64_t mask = bits == 64 ? ~0ull : ((1ull << bits) - 1);
    word = (word & ~(mask << low)) | ((value & mask) << low);
    value = bits == 64 ? 0 : value >> bits;
  }
  return absl::OkStatus();
}

uint64_t PmuFormatField::Decode(const PmuConfigWords& words) const {
  uint64_t value = 0;
  int shift = 0;
  for (const auto& [low, high] : ranges) {
    const int bits = high - low + 1;
    const uint64_t mask = bits == 64 ? ~0ull : ((1ull << bits) - 1);
    if (shift < 64) value |= ((words[word_index()] >> low) & mask) << shift;
    shift += bits;
  }
  return value;
}

absl::StatusOr<PmuFormatField> ParsePmuFormatField(absl::string_view text,
                                                   absl::string_view source) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": byte 0: PMU format \"",
                                                   absl::CEscape(text), "\": ", why));
  };
  absl::string_view body = absl::StripAsciiWhitespace(text);
  const size_t colon = body.find(':');
  if (colon == absl::string_view::npos) return bad("expected <config word>:<bits>");
  absl::string_view word_name = body.substr(0, colon);
  PmuFormatField field;
  if (word_name == "config") {
    field.word = 0;
  } else if (word_name == "config1") {
    field.word = 1;
  } else if (word_name == "config2") {
    field.word = 2;
  } else {
    return bad("unknown config word (want config, config1 or config2)");
  }
  int total = 0;
  uint64_t used_bits = 0;  // ranges that overlap cannot hold a value: malformed sysfs
  for (absl::string_view part : absl::StrSplit(body.substr(colon + 1), ',')) {
    std::vector<absl::string_view> ends = absl::StrSplit(part, '-');
    int low = 0, high = 0;
    if (ends.size() > 2 || !absl::SimpleAtoi(ends[0], &low) ||
        (ends.size() == 2 && !absl::SimpleAtoi(ends[1], &high))) {
      return bad("bit range must be N or N-M");
    }
    if (ends.size() == 1) high = low;
    if (low < 0 || high > 63 || low > high) return bad("bit range outside 0-63");
    total += high - low + 1;
    if (total > 64) return bad("field wider than 64 bits");
    const uint64_t bits = (high == 63 ? ~uint64_t{0} : ((uint64_t{1} << (high + 1)) - 1)) &
                          ~((uint64_t{1} << low) - 1);
    if (used_bits & bits) return bad("bit ranges overlap");
    used_bits |= bits;
    field.ranges.emplace_back(low, high);
  }
  return field;
}

}  // namespace ptd::pt
