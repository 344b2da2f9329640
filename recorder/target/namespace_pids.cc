#include "recorder/target/namespace_pids.h"

#include <dirent.h>

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"

namespace ptd {

absl::StatusOr<int> InnermostPidFromStatus(const std::string& status, const std::string& source) {
  for (absl::string_view line : absl::StrSplit(status, '\n')) {
    if (!absl::ConsumePrefix(&line, "NSpid:")) continue;
    std::vector<absl::string_view> ids = absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    int pid = 0;
    if (ids.empty() || !absl::SimpleAtoi(ids.back(), &pid)) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": bad NSpid line: ", line));
    }
    return pid;
  }
  return absl::NotFoundError(absl::StrCat(source, ": no NSpid line (kernel older than 4.1)"));
}

std::map<int, int> ReadNamespaceTids(int pid) {
  std::map<int, int> out;
  const std::string task_dir = absl::StrCat("/proc/", pid, "/task");
  DIR* dir = ::opendir(task_dir.c_str());
  if (dir == nullptr) return out;
  while (const dirent* entry = ::readdir(dir)) {
    int tid = 0;
    if (!absl::SimpleAtoi(entry->d_name, &tid)) continue;
    const std::string source = absl::StrCat(task_dir, "/", tid, "/status");
    absl::StatusOr<std::string> status = ReadFileToString(source);
    if (!status.ok()) continue;
    absl::StatusOr<int> inner = InnermostPidFromStatus(*status, source);
    if (inner.ok() && *inner != tid) out[tid] = *inner;
  }
  ::closedir(dir);
  return out;
}

}  // namespace ptd
