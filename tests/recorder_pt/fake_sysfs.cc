#include "tests/recorder_pt/fake_sysfs.h"

#include <cstdlib>

#include "common/file_util.h"

namespace ptd::pt::testing {
namespace {

void Put(const std::string& path, const std::string& value) {
  if (!WriteFileAtomic(path, std::string_view(value + "\n")).ok()) std::abort();
}

}  // namespace

void FakePtSysfs::WriteTo(const std::string& root) const {
  const std::string dir = root + "/bus/event_source/devices/intel_pt";
  if (!MakeDirs(dir + "/format").ok() || !MakeDirs(dir + "/caps").ok()) std::abort();
  Put(dir + "/type", type);
  for (const auto& [name, value] : format) Put(dir + "/format/" + name, value);
  for (const auto& [name, value] : caps) Put(dir + "/caps/" + name, value);
  if (!max_nonturbo_ratio.empty()) Put(dir + "/max_nonturbo_ratio", max_nonturbo_ratio);
  if (!tsc_art_ratio.empty()) Put(dir + "/tsc_art_ratio", tsc_art_ratio);
}

}  // namespace ptd::pt::testing
