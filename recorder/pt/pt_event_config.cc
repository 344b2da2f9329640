#include "recorder/pt/pt_event_config.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace ptd::pt {
namespace {

// caps/<bitmap_cap> has bit N set when value N is supported (mtc_periods, cycle_thresholds,
// psb_periods). An absent cap means "unknown": do not refuse. As pt_event_valid(): 0 is
// always allowed for cyc_thresh and psb_period, never implied for mtc_period.
absl::Status CheckInCapBitmap(const PtPmuInfo& pmu, const std::string& field, uint64_t value,
                              const std::string& cap) {
  if (pmu.caps.find(cap) == pmu.caps.end()) return absl::OkStatus();
  if (value == 0 && field != "mtc_period") return absl::OkStatus();
  const uint64_t bitmap = pmu.Cap(cap);
  if (value < 64 && ((bitmap >> value) & 1)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--pt-config: ", field, "=", value, " not supported by this CPU (caps/", cap, " = ",
      pmu.caps.at(cap), ")"));
}

absl::Status CheckCaps(const PtPmuInfo& pmu, const std::string& field, uint64_t value) {
  auto requires_cap = [&](const std::string& cap) -> absl::Status {
    if (value == 0 || pmu.caps.find(cap) == pmu.caps.end() || pmu.Cap(cap) != 0) {
      return absl::OkStatus();
    }
    return absl::InvalidArgumentError(
        absl::StrCat("--pt-config: ", field, " needs caps/", cap, " which is 0 on this CPU"));
  };
  if (field == "cyc") return requires_cap("psb_cyc");
  if (field == "mtc") return requires_cap("mtc");
  if (field == "ptw") return requires_cap("ptwrite");
  if (field == "pwr_evt") return requires_cap("power_event_trace");
  if (field == "mtc_period") return CheckInCapBitmap(pmu, field, value, "mtc_periods");
  if (field == "cyc_thresh") return CheckInCapBitmap(pmu, field, value, "cycle_thresholds");
  if (field == "psb_period") return CheckInCapBitmap(pmu, field, value, "psb_periods");
  return absl::OkStatus();
}

}  // namespace

const char* TimingPresetName(TimingPreset preset) {
  switch (preset) {
    case TimingPreset::kLow:
      return "low";
    case TimingPreset::kNormal:
      return "normal";
    case TimingPreset::kHigh:
      return "high";
  }
  return "normal";
}

absl::StatusOr<std::vector<std::pair<std::string, uint64_t>>> ParsePtConfigString(
    absl::string_view text, absl::string_view source) {
  std::vector<std::pair<std::string, uint64_t>> out;
  size_t offset = 0;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    const size_t item_offset = offset;
    offset += item.size() + 1;
    absl::string_view trimmed = absl::StripAsciiWhitespace(item);
    if (trimmed.empty()) continue;
    const size_t eq = trimmed.find('=');
    absl::string_view key = absl::StripAsciiWhitespace(trimmed.substr(0, eq));
    uint64_t value = 1;
    if (eq != absl::string_view::npos) {
      absl::string_view number = absl::StripAsciiWhitespace(trimmed.substr(eq + 1));
      bool ok = false;
      if (absl::StartsWith(number, "0x") || absl::StartsWith(number, "0X")) {
        ok = number.size() > 2 && absl::SimpleHexAtoi(number.substr(2), &value);
      } else {
        ok = !number.empty() && number[0] != '-' && number[0] != '+' &&
             absl::SimpleAtoi(number, &value);
      }
      if (!ok) {
        return absl::InvalidArgumentError(absl::StrCat(
            source, ": byte ", item_offset, ": \"", item, "\": value must be a number"));
      }
    }
    if (key.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": byte ", item_offset, ": \"", item, "\": empty key"));
    }
    out.emplace_back(std::string(key), value);
  }
  return out;
}

absl::StatusOr<PtEventConfig> BuildPtEventConfig(const PtPmuInfo& pmu, TimingPreset timing,
                                                 absl::string_view expert_config,
                                                 bool kernel) {
  PtEventConfig cfg;
  cfg.timing = TimingPresetName(timing);
  cfg.user_only = !kernel;
  std::map<std::string, uint64_t> wanted;
  auto preset = [&](const std::string& field, uint64_t value) {
    if (pmu.format.count(field) == 0) {
      cfg.notes.push_back(absl::StrCat("timing preset: ", field, " not offered by this PMU"));
      return false;
    }
    if (absl::Status ok = CheckCaps(pmu, field, value); !ok.ok()) {
      cfg.notes.push_back(absl::StrCat("timing preset: ", field, "=", value,
                                       " left out: not supported by this CPU"));
      return false;
    }
    wanted[field] = value;
    return true;
  };
  if (pmu.format.count("pt") != 0) wanted["pt"] = 1;
  if (pmu.format.count("branch") != 0) wanted["branch"] = 1;
  // Every preset: TSC at each PSB and MTC in between (mtc_period 3: an MTC every 2^3
  // crystal-clock ticks), so that time is re-anchored between PSBs. normal adds
  // cycle-accurate CYC (threshold 1) and a PSB every 2^(3+11) = 16 KiB instead of 2 KiB,
  // as magic-trace; high takes an MTC at every tick and disables return compression.
  preset("tsc", 1);
  if (pmu.caps.count("mtc") == 0 || pmu.Cap("mtc") != 0) {
    if (preset("mtc", 1)) {
      preset("mtc_period", timing == TimingPreset::kHigh ? 0 : 3);
    }
  } else {
    cfg.notes.push_back("timing preset: no MTC packets (caps/mtc is 0)");
  }
  if (timing != TimingPreset::kLow) {
    if (pmu.Cap("psb_cyc") != 0) {
      preset("cyc", 1);
      preset("cyc_thresh", 1);
      preset("psb_period", 3);
    } else {
      cfg.notes.push_back("timing preset: no cycle-accurate mode (caps/psb_cyc is 0)");
    }
  }
  if (timing == TimingPreset::kHigh) preset("noretcomp", 1);

  absl::StatusOr<std::vector<std::pair<std::string, uint64_t>>> expert =
      ParsePtConfigString(expert_config, "--pt-config");
  if (!expert.ok()) return expert.status();
  for (const auto& [key, value] : *expert) {
    if (pmu.format.count(key) == 0) {
      std::vector<std::string> known;
      for (const auto& [name, unused] : pmu.format) known.push_back(name);
      return absl::InvalidArgumentError(absl::StrCat("--pt-config: unknown field \"", key,
                                                     "\"; this PMU has: ",
                                                     absl::StrJoin(known, ", ")));
    }
    absl::Status cap_ok = CheckCaps(pmu, key, value);
    if (!cap_ok.ok()) return cap_ok;
    wanted[key] = value;
    cfg.timing = "custom";
  }
  for (const auto& [key, value] : wanted) {
    absl::Status st = pmu.format.at(key).Encode(value, cfg.words);
    if (!st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--pt-config: ", key, ": ", st.message()));
    }
    cfg.fields[key] = value;
  }
  return cfg;
}

}  // namespace ptd::pt
