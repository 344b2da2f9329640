#include "tests/recorder_pt/fake_address_filter.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <vector>

#include "absl/strings/str_split.h"

namespace ptd::pt::testing {
namespace {

// kstrtoul(s, 0, ...): the whole token is a number in base 0.
bool KernelNumber(const std::string& s, uint64_t* out) {
  if (s.empty() || s[0] < '0' || s[0] > '9') return false;
  char* end = nullptr;
  errno = 0;
  *out = std::strtoull(s.c_str(), &end, 0);
  return errno == 0 && end != nullptr && *end == '\0';
}

}  // namespace

int CheckKernelAddressFilter(const std::string& filter, const perf_event_attr& attr,
                             uint64_t num_address_ranges, bool per_task) {
  // CPU-wide events (a cgroup's, or cpu >= 0 with pid -1) have no task context:
  // perf_event_set_addr_filter refuses them before parsing (older kernels refused only
  // file filters, in perf_event_parse_addr_filter: object code maps differently per process).
  if (!per_task) return EOPNOTSUPP;
  std::vector<std::string> tokens = absl::StrSplit(filter, absl::ByAnyChar(" ,\n"), absl::SkipEmpty());
  uint64_t ranges = 0;
  for (size_t i = 0; i < tokens.size(); i += 2) {
    const std::string& action = tokens[i];
    if (action != "filter" && action != "start" && action != "stop") return EINVAL;
    if (i + 1 >= tokens.size()) return EINVAL;  // an action without a source
    std::string source = tokens[i + 1];
    std::string file;
    if (const size_t at = source.find('@'); at != std::string::npos) {
      file = source.substr(at + 1);
      source = source.substr(0, at);
      if (file.empty()) return EINVAL;
    }
    uint64_t offset = 0;
    uint64_t size = 0;
    std::vector<std::string> parts = absl::StrSplit(source, '/');
    if (parts.size() > 2 || !KernelNumber(parts[0], &offset)) return EINVAL;
    if (parts.size() == 2 && !KernelNumber(parts[1], &size)) return EINVAL;
    if (file.empty()) {
      // A filter without a file is on kernel addresses: refused for user-only events.
      if (attr.exclude_kernel) return EINVAL;
    } else {
      struct stat st;
      if (stat(file.c_str(), &st) != 0) return ENOENT;
      if (!S_ISREG(st.st_mode)) return EINVAL;
    }
    // pt_event_addr_filters_validate.
    if (size == 0 || action == "start") return EOPNOTSUPP;
    if (++ranges > num_address_ranges) return EOPNOTSUPP;
  }
  return 0;
}

}  // namespace ptd::pt::testing
