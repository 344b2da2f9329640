#include "tests/testing/addr2line.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "tests/testing/test_util.h"

namespace ptd::testing {
namespace {

// "FILE:LINE:COLUMN" or "FILE:LINE" → FILE, LINE.
void SplitLocation(const std::string& text, std::string* file, int* line) {
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  *file = parts[0];
  *line = parts.size() > 1 ? std::atoi(parts[1].c_str()) : 0;
}

}  // namespace

void PrintTo(const Addr2lineFrame& frame, std::ostream* os) {
  *os << frame.name;
  if (!frame.call_file.empty()) *os << " (called at " << frame.call_file << ":" << frame.call_line << ")";
}

static std::map<uint64_t, std::vector<Addr2lineFrame>> ChainsBy(const std::string& tool, const std::string& elf,
                                                       const std::vector<uint64_t>& addresses, bool* had_lines,
                                                       std::string* error) {
  std::map<uint64_t, std::vector<Addr2lineFrame>> chains;
  std::vector<std::string> argv = {tool, "-e", elf, "-a", "-i", "-f", "-C"};
  for (uint64_t a : addresses) argv.push_back(absl::StrFormat("0x%x", a));
  CommandResult run = RunCommand(argv);
  if (run.out.empty()) {
    *error = tool + " gave nothing (exit " + std::to_string(run.exit_code) + "): " + run.err;
    return chains;
  }
  // Per address: its "0x..." line, then pairs of lines, innermost frame first: a name
  // (eu-addr2line adds " inlined at ... in OUTER"), then a location: the address's own,
  // then for each outer frame the call site of the frame inside it.
  std::vector<std::string> lines = absl::StrSplit(run.out, '\n', absl::SkipEmpty());
  size_t i = 0;
  while (i < lines.size()) {
    uint64_t address = 0;
    if (!absl::SimpleHexAtoi(lines[i], &address)) {
      *error = "unexpected " + tool + " line: " + lines[i];
      return {};
    }
    ++i;
    std::vector<Addr2lineFrame> innermost_first;
    while (i + 1 < lines.size() && !absl::StartsWith(lines[i], "0x")) {
      Addr2lineFrame frame;
      frame.name = lines[i].substr(0, lines[i].find(" inlined at "));
      if (!absl::StartsWith(lines[i + 1], "??")) *had_lines = true;
      if (!innermost_first.empty()) {
        SplitLocation(lines[i + 1], &innermost_first.back().call_file, &innermost_first.back().call_line);
      }
      innermost_first.push_back(frame);
      i += 2;
    }
    std::reverse(innermost_first.begin(), innermost_first.end());
    chains[address] = innermost_first;
  }
  return chains;
}

std::map<uint64_t, std::vector<Addr2lineFrame>> Addr2lineChains(const std::string& elf,
                                                               const std::vector<uint64_t>& addresses,
                                                               std::string* error) {
  // elfutils' reader first; elfutils 0.188 reads no line table of clang 14's DWARF 4
  // (every location "??:0") and then shows no inlined frames: binutils' reader there
  // (which in turn misnames some of GCC 12's inlined frames).
  bool had_lines = false;
  std::map<uint64_t, std::vector<Addr2lineFrame>> chains = ChainsBy("eu-addr2line", elf, addresses, &had_lines, error);
  if (!error->empty() || had_lines || addresses.empty()) return chains;
  error->clear();
  return ChainsBy("addr2line", elf, addresses, &had_lines, error);
}

}  // namespace ptd::testing
