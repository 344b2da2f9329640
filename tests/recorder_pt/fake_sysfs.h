#pragma once
// A fake /sys tree with an intel_pt PMU laid out like a real Intel machine's (values as
// on a Skylake client: format bits from the kernel's pt.c, caps from its CPUID leaf 0x14).

#include <map>
#include <string>

namespace ptd::pt::testing {

struct FakePtSysfs {
  std::string type = "8";
  std::map<std::string, std::string> format = {
      {"pt", "config:0"},          {"cyc", "config:1"},          {"pwr_evt", "config:4"},
      {"fup_on_ptw", "config:5"},  {"mtc", "config:9"},          {"tsc", "config:10"},
      {"noretcomp", "config:11"},  {"ptw", "config:12"},         {"branch", "config:13"},
      {"mtc_period", "config:14-17"}, {"cyc_thresh", "config:19-22"},
      {"psb_period", "config:24-27"}};
  std::map<std::string, std::string> caps = {
      {"cr3_filtering", "1"},  {"psb_cyc", "1"},          {"ip_filtering", "1"},
      {"mtc", "1"},            {"ptwrite", "0"},          {"power_event_trace", "0"},
      {"topa_output", "1"},    {"topa_multiple_entries", "1"}, {"single_range_output", "1"},
      {"num_address_ranges", "2"}, {"mtc_periods", "249"}, {"cycle_thresholds", "3fff"},
      {"psb_periods", "3f"}};
  std::string max_nonturbo_ratio = "24";
  std::string tsc_art_ratio = "188:2";

  // Writes the tree under `root` (as if it were /sys).
  void WriteTo(const std::string& root) const;
};

}  // namespace ptd::pt::testing
