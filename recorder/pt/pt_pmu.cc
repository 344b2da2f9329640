#include "recorder/pt/pt_pmu.h"

#include <dirent.h>

#include <algorithm>

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"

namespace ptd::pt {
namespace {

// Names in a directory, sorted; empty when it does not exist (caps/ is optional on
// older kernels).
std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<std::string> ReadTrimmed(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  return std::string(absl::StripAsciiWhitespace(*text));
}

}  // namespace

std::string PtPmuDir(const std::string& sysfs_root) {
  return sysfs_root + "/bus/event_source/devices/intel_pt";
}

uint64_t PtPmuInfo::Cap(const std::string& name) const {
  auto it = caps.find(name);
  uint64_t value = 0;
  if (it == caps.end()) return 0;
  // pt_cap_show prints every cap with "%x": "249" is 0x249 (periods 0, 3, 6, 9).
  if (absl::SimpleHexAtoi(it->second, &value)) return value;
  return 0;
}

absl::StatusOr<PtPmuInfo> DiscoverPtPmu(const std::string& sysfs_root) {
  const std::string dir = PtPmuDir(sysfs_root);
  if (!IsDirectory(dir)) return absl::FailedPreconditionError(kNoPtPmuMessage);
  PtPmuInfo info;
  absl::StatusOr<std::string> type = ReadTrimmed(dir + "/type");
  if (!type.ok()) return type.status();
  if (!absl::SimpleAtoi(*type, &info.type) || info.type < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, "/type: byte 0: not a PMU type number: \"", *type, "\""));
  }
  const std::vector<std::string> format_names = ListDir(dir + "/format");
  if (format_names.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, "/format: missing or empty; cannot place config bits"));
  }
  for (const std::string& name : format_names) {
    const std::string path = dir + "/format/" + name;
    absl::StatusOr<std::string> text = ReadTrimmed(path);
    if (!text.ok()) return text.status();
    absl::StatusOr<PmuFormatField> field = ParsePmuFormatField(*text, path);
    if (!field.ok()) return field.status();
    info.format.emplace(name, *std::move(field));
  }
  for (const std::string& name : ListDir(dir + "/caps")) {
    absl::StatusOr<std::string> text = ReadTrimmed(dir + "/caps/" + name);
    if (!text.ok()) return text.status();
    info.caps.emplace(name, *std::move(text));
  }
  // Both files are absent on some kernels and CPUs; the decoder then does without.
  if (absl::StatusOr<std::string> ratio = ReadTrimmed(dir + "/max_nonturbo_ratio"); ratio.ok()) {
    if (!absl::SimpleAtoi(*ratio, &info.max_nonturbo_ratio)) {
      return absl::InvalidArgumentError(
          absl::StrCat(dir, "/max_nonturbo_ratio: byte 0: not a number: \"", *ratio, "\""));
    }
  }
  if (absl::StatusOr<std::string> ratio = ReadTrimmed(dir + "/tsc_art_ratio"); ratio.ok()) {
    std::vector<std::string> parts = absl::StrSplit(*ratio, ':');
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &info.tsc_art_ratio_num) ||
        !absl::SimpleAtoi(parts[1], &info.tsc_art_ratio_den)) {
      return absl::InvalidArgumentError(
          absl::StrCat(dir, "/tsc_art_ratio: byte 0: want \"num:den\", got \"", *ratio, "\""));
    }
  }
  info.cpu = ReadHostInfo().cpu;
  return info;
}

}  // namespace ptd::pt
