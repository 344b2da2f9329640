#pragma once
// From user options (--timing preset, --pt-config, --kernel) to the intel_pt event's
// config words, using only the format fields the kernel published.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "recorder/pt/pmu_format.h"
#include "recorder/pt/pt_pmu.h"
#include "recorder/session/record_options.h"

namespace ptd::pt {

struct PtEventConfig {
  PmuConfigWords words{};                  // config, config1, config2
  std::map<std::string, uint64_t> fields;  // every field we set, by format name
  std::string timing;                      // "low", "normal", "high" or "custom"
  bool user_only = true;
  std::vector<std::string> notes;          // preset parts dropped for lack of a cap
};

const char* TimingPresetName(TimingPreset preset);

// "key=value,key,..." (a bare key means 1); values decimal or 0x-hex. Keys are not
// checked here. `source` names the option in errors.
absl::StatusOr<std::vector<std::pair<std::string, uint64_t>>> ParsePtConfigString(
    absl::string_view text, absl::string_view source);

// Presets, at least as fine as magic-trace's: low = tsc, mtc, mtc_period=3; normal = low
// + cyc, cyc_thresh=1, psb_period=3 (when caps/psb_cyc); high = normal with mtc_period=0
// + noretcomp. A field the caps rule out is left out with a note. `pt` and `branch` are set when the PMU
// has them (perf's defaults). Expert keys override the preset and must exist in format/;
// values the caps rule out are refused.
absl::StatusOr<PtEventConfig> BuildPtEventConfig(const PtPmuInfo& pmu, TimingPreset timing,
                                                 absl::string_view expert_config,
                                                 bool kernel);

}  // namespace ptd::pt
