#pragma once
// Ground truth for inlined frames from elfutils' eu-addr2line (binutils' addr2line where it reads no lines), an independent reader of
// the same DWARF: one batch run over many addresses.

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace ptd::testing {

// One frame of an address's chain as addr2line -i -f -C prints it.
struct Addr2lineFrame {
  std::string name;       // demangled; "??" when unknown
  std::string call_file;  // inlined frames: the call site; empty for the outermost
  int call_line = 0;
  bool operator==(const Addr2lineFrame&) const = default;
};
void PrintTo(const Addr2lineFrame& frame, std::ostream* os);

// The chains (outermost frame first) of `addresses` (ELF addresses) in `elf`, or an
// empty map with `*error` set when addr2line cannot be run.
std::map<uint64_t, std::vector<Addr2lineFrame>> Addr2lineChains(const std::string& elf,
                                                               const std::vector<uint64_t>& addresses,
                                                               std::string* error);

}  // namespace ptd::testing
