#include "recorder/pt/ip_filter.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "recorder/images/elf_symbol.h"

namespace ptd::pt {
namespace {

absl::Status Bad(absl::string_view item, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("--filter \"", item, "\": ", why));
}

bool ParseNumber(absl::string_view text, uint64_t* out) {
  if (absl::ConsumePrefix(&text, "0x") || absl::ConsumePrefix(&text, "0X")) {
    return !text.empty() && absl::SimpleHexAtoi(text, out);
  }
  return !text.empty() && absl::ascii_isdigit(static_cast<unsigned char>(text[0])) &&
         absl::SimpleAtoi(text, out);
}

absl::StatusOr<std::string> AbsoluteFile(absl::string_view item, const std::string& file) {
  char resolved[PATH_MAX];
  if (realpath(file.c_str(), resolved) == nullptr) {
    return Bad(item, absl::StrCat("no such file: ", file));
  }
  // The kernel cuts the filter string at spaces, commas and newlines
  // (perf_event_parse_addr_filter), and has no quoting.
  if (strpbrk(resolved, " ,\n") != nullptr) {
    return Bad(item, absl::StrCat(resolved, ": the kernel's address filters cannot name a file "
                                  "whose path holds a space or comma (or newline); move or "
                                  "rename it"));
  }
  return std::string(resolved);
}

}  // namespace

absl::StatusOr<std::string> ResolveIpFilter(const std::string& text,
                                            const std::string& default_file,
                                            uint64_t max_ranges) {
  std::vector<std::string> out;
  for (absl::string_view raw : absl::StrSplit(text, ',')) {
    absl::string_view item = absl::StripAsciiWhitespace(raw);
    if (item.empty()) continue;
    std::vector<absl::string_view> words = absl::StrSplit(item, ' ', absl::SkipEmpty());
    if (words.size() != 2) return Bad(item, "want \"filter TARGET\" or \"stop TARGET\"");
    const absl::string_view action = words[0];
    if (action == "start") {
      return Bad(item, "intel_pt has no start filters (the kernel refuses them); use filter");
    }
    if (action != "filter" && action != "stop") {
      return Bad(item, absl::StrCat("unknown action \"", action, "\" (want filter or stop)"));
    }
    absl::string_view target = words[1];
    std::string file = default_file;
    if (const size_t at = target.find('@'); at != absl::string_view::npos) {
      file = std::string(target.substr(at + 1));
      target = target.substr(0, at);
    }
    if (file.empty()) return Bad(item, "no file to look in: name one with @FILE");
    absl::StatusOr<std::string> path = AbsoluteFile(item, file);
    if (!path.ok()) return path.status();
    uint64_t offset = 0;
    uint64_t size = 0;
    if (target.empty()) {
      absl::StatusOr<ElfCodeRange> code = FindElfCodeRange(*path);
      if (!code.ok()) return Bad(item, code.status().message());
      offset = code->file_offset;
      size = code->size;
    } else if (absl::ascii_isdigit(static_cast<unsigned char>(target[0]))) {
      std::vector<absl::string_view> parts = absl::StrSplit(target, '/');
      if (parts.size() != 2 || !ParseNumber(parts[0], &offset) || !ParseNumber(parts[1], &size)) {
        return Bad(item, "a numeric range is OFFSET/SIZE (e.g. 0x1130/0x40)");
      }
    } else {
      absl::StatusOr<ElfSymbolAddress> symbol = FindElfFunction(*path, std::string(target));
      if (!symbol.ok()) return Bad(item, symbol.status().message());
      offset = symbol->file_offset;
      size = symbol->size;
    }
    if (size == 0) return Bad(item, "the range is empty (intel_pt refuses size-0 filters)");
    out.push_back(absl::StrFormat("%s 0x%x/0x%x@%s", action, offset, size, *path));
  }
  if (out.empty()) return absl::InvalidArgumentError("--filter: no filter given");
  if (max_ranges != 0 && out.size() > max_ranges) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--filter: ", out.size(), " ranges, but this CPU has ", max_ranges,
        " (caps/num_address_ranges)"));
  }
  return absl::StrJoin(out, ",");
}

}  // namespace ptd::pt
