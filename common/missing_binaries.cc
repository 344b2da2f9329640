#include "common/missing_binaries.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ptd {
namespace {

// How many the one-line summary names.
constexpr size_t kBiggestNamed = 3;

std::string Bytes(uint64_t n) {
  if (n >= (1u << 20)) return absl::StrFormat("%.1f MiB", static_cast<double>(n) / (1u << 20));
  if (n >= (1u << 10)) return absl::StrFormat("%d KiB", n >> 10);
  return absl::StrFormat("%d bytes", n);
}

// "path (build-id HEX; 3.0 MiB mapped)".
std::string Describe(const MissingBinary& b) {
  return absl::StrCat(b.path, " (", b.build_id.empty() ? "" : absl::StrCat("build-id ", b.build_id, "; "),
                      Bytes(b.mapped_bytes), " mapped)");
}

}  // namespace

void MissingBinaries::Add(const MissingBinary& binary) {
  auto [it, inserted] = by_path_.emplace(binary.path, binary);
  if (inserted) return;
  it->second.mapped_bytes = std::max(it->second.mapped_bytes, binary.mapped_bytes);
  if (it->second.build_id.empty()) it->second.build_id = binary.build_id;
}

void MissingBinaries::Add(const MissingBinaries& other) {
  for (const auto& [path, binary] : other.by_path_) Add(binary);
}

std::vector<MissingBinary> MissingBinaries::BiggestFirst() const {
  std::vector<MissingBinary> out;
  for (const auto& [path, binary] : by_path_) out.push_back(binary);
  std::stable_sort(out.begin(), out.end(), [](const MissingBinary& a, const MissingBinary& b) {
    return a.mapped_bytes > b.mapped_bytes;
  });
  return out;
}

std::string MissingBinaries::Summary(int64_t decode_errors, bool verbose) const {
  if (by_path_.empty()) return "";
  std::string out = absl::StrCat(by_path_.size(), by_path_.size() == 1 ? " binary" : " binaries", " not found");
  if (decode_errors >= 0) {
    absl::StrAppend(&out, " (", decode_errors, " decode errors where their code ran)");
  }
  const std::vector<MissingBinary> binaries = BiggestFirst();
  if (verbose) {
    absl::StrAppend(&out, ":");
    for (const MissingBinary& b : binaries) absl::StrAppend(&out, "\n  ", Describe(b));
    return out;
  }
  if (binaries.size() <= kBiggestNamed) {  // all of them fit the line
    absl::StrAppend(&out, ": ");
    for (size_t i = 0; i < binaries.size(); ++i) absl::StrAppend(&out, i == 0 ? "" : ", ", Describe(binaries[i]));
    return out;
  }
  absl::StrAppend(&out, ": biggest: ");
  for (size_t i = 0; i < binaries.size() && i < kBiggestNamed; ++i) {
    absl::StrAppend(&out, i == 0 ? "" : ", ", binaries[i].path, " (", Bytes(binaries[i].mapped_bytes), ")");
  }
  if (binaries.size() > kBiggestNamed) absl::StrAppend(&out, ", ...");
  absl::StrAppend(&out, "; --verbose lists all");
  return out;
}

}  // namespace ptd
