#pragma once
// Binaries a trace maps code from that are on neither this machine nor in a build-id
// cache, gathered from the perf.data import and from the decoder, and said once in a
// line that fits a screen (`--verbose` lists them all).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ptd {

struct MissingBinary {
  std::string path;
  std::string build_id;       // lower-case hex, "" when unknown
  uint64_t mapped_bytes = 0;  // the largest mapping of it seen
};

class MissingBinaries {
 public:
  // The same path twice keeps one entry: the larger mapping, any known build-id.
  void Add(const MissingBinary& binary);
  void Add(const MissingBinaries& other);
  bool empty() const { return by_path_.empty(); }
  size_t size() const { return by_path_.size(); }
  // Largest mapping first, then by path.
  std::vector<MissingBinary> BiggestFirst() const;

  // "N binaries not found (E decode errors where their code ran): biggest: a (1.9 MiB),
  // b (1.1 MiB), c (200 KiB), ...; --verbose lists all", or with `verbose` that line's
  // start and one line per binary with its build-id (as the line does when all fit). `decode_errors` < 0 leaves the
  // parenthesis out (nothing decoded yet: import, info). "" when none is missing.
  std::string Summary(int64_t decode_errors, bool verbose) const;

 private:
  std::map<std::string, MissingBinary> by_path_;
};

}  // namespace ptd
