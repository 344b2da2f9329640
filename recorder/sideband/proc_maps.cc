#include "recorder/sideband/proc_maps.h"

#include <sys/mman.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"

namespace ptd {
namespace {

bool ParseHex(absl::string_view text, uint64_t* value) {
  if (text.empty() || text.size() > 16) return false;
  uint64_t v = 0;
  for (char c : text) {
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      return false;
    }
    v = (v << 4) | static_cast<uint64_t>(digit);
  }
  *value = v;
  return true;
}

// Takes the next space-delimited field off the front of `rest`.
absl::string_view NextField(absl::string_view* rest) {
  *rest = absl::StripLeadingAsciiWhitespace(*rest);
  size_t end = rest->find(' ');
  absl::string_view field = rest->substr(0, end);
  rest->remove_prefix(end == absl::string_view::npos ? rest->size() : end);
  return field;
}

absl::Status LineError(const std::string& source, size_t line_number, absl::string_view what,
                       absl::string_view line) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": line ", line_number, ": ", what,
                                                 " in \"", line.substr(0, 200), "\""));
}

}  // namespace

bool ProcMapping::executable() const { return (prot & PROT_EXEC) != 0; }

absl::StatusOr<std::vector<ProcMapping>> ParseProcMaps(absl::string_view text,
                                                       const std::string& source) {
  std::vector<ProcMapping> maps;
  size_t line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    if (line.empty()) continue;
    absl::string_view rest = line;
    ProcMapping m;
    absl::string_view range = NextField(&rest);
    absl::string_view perms = NextField(&rest);
    absl::string_view offset = NextField(&rest);
    absl::string_view dev = NextField(&rest);
    absl::string_view inode = NextField(&rest);
    size_t dash = range.find('-');
    if (dash == absl::string_view::npos || !ParseHex(range.substr(0, dash), &m.start) ||
        !ParseHex(range.substr(dash + 1), &m.end) || m.end < m.start) {
      return LineError(source, line_number, "bad address range", line);
    }
    if (perms.size() != 4) return LineError(source, line_number, "bad permissions", line);
    if (perms[0] == 'r') m.prot |= PROT_READ;
    if (perms[1] == 'w') m.prot |= PROT_WRITE;
    if (perms[2] == 'x') m.prot |= PROT_EXEC;
    if (perms[3] == 's') {
      m.flags = MAP_SHARED;
    } else if (perms[3] == 'p') {
      m.flags = MAP_PRIVATE;
    } else {
      return LineError(source, line_number, "bad sharing flag", line);
    }
    if (!ParseHex(offset, &m.pgoff)) return LineError(source, line_number, "bad offset", line);
    size_t colon = dev.find(':');
    uint64_t major = 0, minor = 0;
    if (colon == absl::string_view::npos || !ParseHex(dev.substr(0, colon), &major) ||
        !ParseHex(dev.substr(colon + 1), &minor) || major > 0xffffffffu || minor > 0xffffffffu) {
      return LineError(source, line_number, "bad device", line);
    }
    m.dev_major = static_cast<uint32_t>(major);
    m.dev_minor = static_cast<uint32_t>(minor);
    if (!absl::SimpleAtoi(inode, &m.inode)) return LineError(source, line_number, "bad inode", line);
    // The path is the rest after the padding, and may itself contain spaces.
    m.path = std::string(absl::StripLeadingAsciiWhitespace(rest));
    maps.push_back(std::move(m));
  }
  return maps;
}

absl::StatusOr<std::vector<ProcMapping>> ReadProcMaps(int pid) {
  std::string path = absl::StrCat("/proc/", pid, "/maps");
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  return ParseProcMaps(*text, path);
}

}  // namespace ptd
