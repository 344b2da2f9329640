#include "image/maps_spec.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ptd::image {

bool ParseNumber(absl::string_view text, uint64_t* value) {
  if (text.empty()) return false;
  if (absl::ConsumePrefix(&text, "0x") || absl::ConsumePrefix(&text, "0X")) {
    if (text.empty() || text.size() > 16) return false;
    for (char c : text) {
      if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
    }
    return absl::SimpleHexAtoi(text, value);
  }
  for (char c : text) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return absl::SimpleAtoi(text, value);
}

namespace {

std::string Resolve(const std::string& base_dir, absl::string_view path) {
  if (base_dir.empty() || absl::StartsWith(path, "/")) return std::string(path);
  return absl::StrCat(base_dir, "/", path);
}

absl::Status LineError(const std::string& origin, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(origin, ": ", what));
}

}  // namespace

absl::StatusOr<std::vector<MapSpec>> ParseMapsText(absl::string_view text, const std::string& source,
                                                   const std::string& base_dir) {
  std::vector<MapSpec> specs;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    size_t hash = line.find('#');
    if (hash != absl::string_view::npos) line = line.substr(0, hash);
    std::vector<absl::string_view> words =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (words.empty()) continue;
    MapSpec spec;
    spec.origin = absl::StrFormat("%s:%d", source, line_no);
    if (words[0] == "pages") {
      if (words.size() != 3 && words.size() != 4) {
        return LineError(spec.origin, "expected 'pages ADDRFILE DUMPFILE [PAGESIZE]'");
      }
      spec.kind = MapSpec::Kind::kPages;
      spec.address_file = Resolve(base_dir, words[1]);
      spec.path = Resolve(base_dir, words[2]);
      if (words.size() == 4 && (!ParseNumber(words[3], &spec.page_size) || spec.page_size == 0 ||
                                spec.page_size > (uint64_t{1} << 30))) {
        return LineError(spec.origin, absl::StrCat("bad page size '", words[3], "'"));
      }
    } else {
      if (words.size() != 2 && words.size() != 4) {
        return LineError(spec.origin, "expected 'PATH VADDR [OFFSET SIZE]'");
      }
      spec.path = Resolve(base_dir, words[0]);
      if (!ParseNumber(words[1], &spec.vaddr)) {
        return LineError(spec.origin, absl::StrCat("bad address '", words[1], "'"));
      }
      if (words.size() == 4 && (!ParseNumber(words[2], &spec.file_offset) ||
                                !ParseNumber(words[3], &spec.size) || spec.size == 0)) {
        return LineError(spec.origin, "bad OFFSET or SIZE");
      }
      if (spec.vaddr + spec.size < spec.vaddr) return LineError(spec.origin, "mapping wraps around");
    }
    specs.push_back(std::move(spec));
  }
  return specs;
}

absl::StatusOr<MapSpec> ParseMapOption(absl::string_view option) {
  MapSpec spec;
  spec.origin = absl::StrCat("--map ", option);
  size_t at = option.rfind('@');
  if (at == absl::string_view::npos || at == 0) {
    return LineError(spec.origin, "expected PATH@VADDR[:OFFSET:SIZE]");
  }
  spec.path = std::string(option.substr(0, at));
  std::vector<absl::string_view> numbers = absl::StrSplit(option.substr(at + 1), ':');
  if (numbers.size() != 1 && numbers.size() != 3) {
    return LineError(spec.origin, "expected PATH@VADDR[:OFFSET:SIZE]");
  }
  if (!ParseNumber(numbers[0], &spec.vaddr)) return LineError(spec.origin, "bad VADDR");
  if (numbers.size() == 3 && (!ParseNumber(numbers[1], &spec.file_offset) ||
                              !ParseNumber(numbers[2], &spec.size) || spec.size == 0)) {
    return LineError(spec.origin, "bad OFFSET or SIZE");
  }
  return spec;
}

}  // namespace ptd::image
